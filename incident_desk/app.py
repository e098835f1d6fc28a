"""The desk as the feature modules see it: settings, data, journal, and the log reads every feature shares.

Features import this module, the core and ``client_features``; never the server factory and never each other.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

import anyio.to_thread

from incident_desk.client_logging import ClientLogLevels
from incident_desk.core import credentials
from incident_desk.core.audit import AuditJournal, Journal
from incident_desk.core.desk import Desk, LogUnavailable, bundled_sample_desk
from incident_desk.core.sources import IncidentSources
from incident_desk.settings import Settings

if TYPE_CHECKING:
    from incident_desk.core.cursors import CursorSeal
    from incident_desk.core.logfile import TailWindow
    from incident_desk.core.redact import Redaction

T = TypeVar("T")
# Logs up to this size are read on the caller's thread when the data directory's last look is fresh: reading and
# redacting 4 KiB takes 0.25 ms (0.6 ms with a secret on every line) on a 2-core VM, a hop to a worker thread
# and back about 0.1 ms of the loop's time; beyond that the read dominates and a thread keeps the loop freer.
INLINE_LOG_MAX_BYTES = 4 * 1024
# What the first log read imports and compiles; until they are loaded, reads go to a worker thread.
_LOG_READERS = ("incident_desk.core.logfile", "incident_desk.core.redact")


@dataclass
class DeskApp:
    """What the feature modules share: settings, data, and the services built from them."""

    settings: Settings
    desk: IncidentSources
    journal: Journal
    sealing_keys: list[bytes] = field(default_factory=list)
    log_levels: ClientLogLevels = field(default_factory=ClientLogLevels)
    _readers_loaded: bool = field(default=False, init=False, repr=False)

    @property
    def data_root(self) -> Path:
        return self.desk.root

    def redactor(self, text: str) -> str:
        # Imported by the first log read, not at start: compiling the redaction rules costs the start ~50 ms.
        from incident_desk.core.redact import redact

        return redact(text) if self.settings.redact_secrets else text

    @property
    def redaction(self) -> Redaction | None:
        """What searches redact before matching, with the triggers that let them skip clean lines."""
        from incident_desk.core.redact import SECRETS

        return SECRETS if self.settings.redact_secrets else None

    @cached_property
    def cursors(self) -> CursorSeal:
        """Tags the log cursors this desk hands out (keyed like the 2026 round-trip state), refuses any other."""
        from incident_desk.core.cursors import CursorSeal

        return CursorSeal(self.sealing_keys)

    def services(self) -> list[str]:
        return self.desk.services(extra=list(self.settings.services))

    def read_log(self, incident_id: str, reader: Callable[[BinaryIO], T]) -> T:
        """Run ``reader`` on an incident's log, opened safely once and read only through that handle (a path
        opened again could lead somewhere else by then); a log that vanished or cannot be read is a named
        domain error."""
        with self.desk.open_log(incident_id) as handle:
            return _read(incident_id, handle, reader)

    async def read_log_from_loop(self, incident_id: str, reader: Callable[[BinaryIO], T]) -> T:
        """:meth:`read_log` for a caller on the event loop. A log of at most ``INLINE_LOG_MAX_BYTES`` that the data
        directory's fresh view lists is opened and read right here, once the log reader and the redaction rules
        are loaded (the first read loads them in a worker thread: compiling the rules takes about 50 ms): the
        open never blocks and lists nothing, and a hop to a worker thread would cost about as much as the read.
        Any other log is read in a worker thread, through the handle already opened when there is one."""
        if not self._readers_loaded:
            self._readers_loaded = all(name in sys.modules for name in _LOG_READERS)
        handle = self.desk.open_listed_log(incident_id) if self._readers_loaded else None
        if handle is None:
            return await anyio.to_thread.run_sync(self.read_log, incident_id, reader)
        try:
            small = os.fstat(handle.fileno()).st_size <= INLINE_LOG_MAX_BYTES
            if small:
                return _read(incident_id, handle, reader)
            # Shielded: when the request is cancelled this waits for the read, so the handle closes after it.
            return await anyio.to_thread.run_sync(_read, incident_id, handle, reader)
        except OSError as exc:
            raise LogUnavailable(incident_id, exc.strerror or exc.__class__.__name__) from None
        finally:
            handle.close()

    async def bounded_log_from_loop(self, incident_id: str) -> str:
        """The tail window of an incident's log, with a note when older lines were left out."""
        return self._noted(await self.read_log_from_loop(incident_id, self._tail_window))

    def _tail_window(self, handle: BinaryIO) -> TailWindow:
        # Imported by the first log read: the log reader is not needed before the first answer.
        from incident_desk.core.logfile import read_tail

        settings = self.settings
        return read_tail(
            handle, max_lines=settings.log_window_lines, max_bytes=settings.log_window_bytes, redactor=self.redactor
        )

    @staticmethod
    def _noted(window: TailWindow) -> str:
        if not window.truncated:
            return window.text
        return (
            f"[incident-desk: showing the last {window.shown_lines} lines ({window.shown_bytes} of "
            f"{window.total_bytes} bytes); page or search the rest with read_incident_log]\n{window.text}"
        )


def _read(incident_id: str, handle: BinaryIO, reader: Callable[[BinaryIO], T]) -> T:
    """``reader`` on an opened log; a read that fails is the named domain error."""
    try:
        return reader(handle)
    except OSError as exc:
        raise LogUnavailable(incident_id, exc.strerror or exc.__class__.__name__) from None


def source_secret(settings: Settings) -> Callable[[str], str | None]:
    """An incident source's password or token: its INCIDENT_DESK_SOURCE_<NAME> variable, else the keychain."""

    def lookup(name: str) -> str | None:
        from pydantic import SecretStr

        from incident_desk.core import credentials

        value = os.environ.get(credentials.env_var_name(name).replace(".", "_"))
        return credentials.resolve_secret(SecretStr(value) if value else None, settings.keyring_service, name).value

    return lookup


def open_journal(settings: Settings) -> Journal:
    """The SQLite journal (the default), or the PostgreSQL one replicas share; ``AuditError`` names the setting."""
    if settings.audit_url is None:
        return AuditJournal(settings.audit_path)
    from incident_desk.core.audit_pg import PostgresJournal

    # The password never comes from the URL (settings refuse one there): environment first, then the keychain.
    found = credentials.resolve_secret(
        settings.audit_db_password, settings.keyring_service, credentials.AUDIT_DB_PASSWORD
    )
    return PostgresJournal(settings.audit_url, found.value)


def build_app(settings: Settings, sealing_keys: list[bytes] | None = None) -> DeskApp:
    root = settings.data_dir if settings.data_dir is not None else bundled_sample_desk()
    data = Desk(root, max_file_bytes=settings.max_data_file_bytes, freshness_seconds=settings.data_freshness_seconds)
    return DeskApp(
        settings=settings,
        desk=IncidentSources(
            data,
            settings.incident_sources,
            settings.service_logs,
            secret=source_secret(settings),
            spool_max_bytes=settings.log_spool_max_bytes,
        ),
        journal=open_journal(settings),
        sealing_keys=sealing_keys or [],
    )
