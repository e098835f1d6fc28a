"""Paging cursors that carry a tag, so only a cursor the desk handed out is ever followed.

A cursor says where a line starts and which number it has. Nothing cheap can check that the two agree (that
would mean counting the newlines before the offset), and a hand-made ``L4@0`` would label the log's first lines
4, 5, 6. So each cursor the desk hands out carries an HMAC over the incident and both numbers, and any other is
refused. The key is derived from the desk's sealing key when one is configured, so replicas sharing it accept
each other's cursors; otherwise it is made per process, and a restart asks clients to start again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence

from incident_desk.core.logfile import Cursor, CursorError

_PURPOSE = b"incident-desk log cursor v1"
_TAG_BYTES = 12


class CursorSeal:
    """Encodes cursors with a tag for one incident, and decodes only cursors that carry a valid one."""

    def __init__(self, sealing_keys: Sequence[bytes] = ()) -> None:
        keys = list(sealing_keys) or [secrets.token_bytes(32)]
        self._keys = [hmac.new(key, _PURPOSE, hashlib.sha256).digest() for key in keys]

    def _tag(self, key: bytes, incident_id: str, cursor: Cursor) -> str:
        message = f"{incident_id}\n{cursor.line}\n{cursor.offset}".encode()
        digest = hmac.new(key, message, hashlib.sha256).digest()[:_TAG_BYTES]
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def encode(self, incident_id: str, cursor: Cursor) -> str:
        return f"{cursor.encode()}.{self._tag(self._keys[0], incident_id, cursor)}"

    def decode(self, incident_id: str, text: str) -> Cursor:
        """The cursor in ``text``, if this desk handed it out for this incident; CursorError otherwise."""
        position, _, tag = text.strip().partition(".")
        cursor = Cursor.decode(position)
        if not tag or not any(hmac.compare_digest(tag, self._tag(key, incident_id, cursor)) for key in self._keys):
            raise CursorError(
                f"cursor {text!r} was not handed out by this desk for {incident_id} (or the desk has restarted "
                "since): call again without a cursor to start from the first line"
            )
        return cursor
