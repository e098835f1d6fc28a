"""Paging cursors that carry a tag, so only a cursor the desk handed out is ever followed.

A cursor says where a line starts and which number it has. Nothing cheap can check that the two agree (that
would mean counting the newlines before the offset), and a hand-made ``L4@0`` would label the log's first lines
4, 5, 6. So each cursor the desk hands out carries an HMAC over the incident and both numbers, and any other is
refused. The key is derived from the desk's sealing key when one is configured, so replicas sharing it accept
each other's cursors; otherwise from a key kept in the user's data directory, made on first use, so a cursor
stays good across restarts of the same installation (a client that starts a desk per call, as MCP Inspector's
CLI does, can page) and is refused by any other installation.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path

from incident_desk.core import errors
from incident_desk.core.search.paging import Cursor, CursorError

_PURPOSE = b"incident-desk log cursor v1"
_TAG_BYTES = 12
INSTALLATION_KEY_FILE = "cursor.key"
_KEY_BYTES = 32


def installation_key(directory: Path) -> bytes:
    """The cursor key kept in ``directory`` (mode 0600), made on first use; never replaced once there.

    Two desks starting at once both write a candidate and link it into place; the one that loses reads the
    winner's. A key file that is not a regular file of the right size raises ``OSError`` rather than being
    trusted or overwritten.
    """
    path = directory / INSTALLATION_KEY_FILE
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    candidate = directory / f".{INSTALLATION_KEY_FILE}.{secrets.token_hex(8)}"
    fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(_KEY_BYTES))
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(candidate, path)  # never replaces a key another desk made meanwhile
    finally:
        candidate.unlink(missing_ok=True)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size != _KEY_BYTES:
            raise OSError(f"{path} is not a {_KEY_BYTES}-byte key file; move it aside and the desk makes a new one")
        return handle.read(_KEY_BYTES)


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
                f"cursor {errors.echoed(text, 'cursor', quoted=True)} was not handed out by this desk for "
                f"{errors.echoed(incident_id, 'incidentId')}: call again without a cursor to "
                "start from the first line"
            )
        return cursor
