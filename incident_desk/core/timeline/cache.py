"""A small per-log summary of the timeline's pass, on disk, so a log that has only grown costs only its new bytes.

Keyed by the file's identity (device and inode): a rotated log is a new file. The summary holds per-minute counts
and the place (never the text) of the first error, plus a digest of the bytes just before where it stopped, so a
log truncated or rewritten in place is counted afresh (``core.timeline._valid``). At most ``MAX_ENTRIES`` summaries
are kept, the least recently written dropped first; a summary that cannot be read or written is ignored.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import structlog

from incident_desk.core.log_clock import READING
from incident_desk.core.timeline import levels as timeline

MAX_ENTRIES = 64
MAX_ENTRY_BYTES = 1024 * 1024  # 24 h of minutes by four levels is far less; a bigger file is not ours
T = TypeVar("T")
_log = structlog.get_logger(__name__)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _encode(resume: timeline.Resume) -> dict[str, Any]:
    return {
        "offset": resume.offset,
        "lines": resume.lines,
        "parsed": resume.parsed,
        "counts": [[_b64(d), _b64(m), _b64(level), n] for (d, m, level), n in resume.counts.items() if n > 0],
        "first_error": list(resume.first_error) if resume.first_error else None,
        "check": resume.check,
    }


def _decode(data: dict[str, Any]) -> timeline.Resume:
    place = data["first_error"]
    return timeline.Resume(
        offset=int(data["offset"]),
        lines=int(data["lines"]),
        parsed=int(data["parsed"]),
        counts={
            (base64.b64decode(d), base64.b64decode(m), base64.b64decode(level)): int(n)
            for d, m, level, n in data["counts"]
        },
        first_error=(int(place[0]), int(place[1])) if place else None,
        check=str(data["check"]),
    )


class TimelineCache:
    """Summaries of timeline passes in ``directory``, one small JSON file per log."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _entry(self, handle: BinaryIO) -> Path | None:
        try:
            status = os.fstat(handle.fileno())
        except (OSError, ValueError, AttributeError):
            return None  # not a file on disk (a test's BytesIO): nothing to key it by
        key = hashlib.sha256(f"{status.st_dev}:{status.st_ino}".encode()).hexdigest()[:32]
        return self.directory / f"{key}.json"

    def load(self, handle: BinaryIO) -> timeline.Resume | None:
        return self._read(handle, _decode, MAX_ENTRY_BYTES, "timeline summary unreadable, counting afresh")

    def _read(
        self, handle: BinaryIO, decode: Callable[[dict[str, Any]], T], max_bytes: int, unreadable: str
    ) -> T | None:
        """This log's entry decoded, or None when there is none, it is over ``max_bytes``, it was written by a desk
        that read line times another way (``log_clock.READING``), or it does not decode (logged as ``unreadable``):
        a summary is only ever a shortcut, so any doubt means reading the log afresh."""
        entry = self._entry(handle)
        if entry is None:
            return None
        try:
            if entry.stat().st_size > max_bytes:
                return None
            data: dict[str, Any] = json.loads(entry.read_text())
            if data.get("reading") != READING:
                raise ValueError("written by a desk that read line times another way")
            return decode(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            _log.debug(unreadable, error=str(exc))
            return None

    def store(self, handle: BinaryIO, resume: timeline.Resume | None) -> None:
        if resume is not None:
            self._keep(handle, _encode(resume), "timeline summary")

    def _keep(self, handle: BinaryIO, fields: dict[str, Any], what: str) -> None:
        """Write ``fields`` (and how line times were read) as the log's entry, whole or not at all (a temporary
        file renamed over it); a cache that cannot be written costs a later pass its head start, nothing more."""
        entry = self._entry(handle)
        if entry is None:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            partial = entry.with_suffix(".tmp")
            partial.write_text(json.dumps({**fields, "reading": READING}))
            partial.replace(entry)
            self._trim()
        except OSError as exc:
            _log.debug(f"{what} not written", error=str(exc))

    def _trim(self) -> None:
        entries = sorted(self.directory.glob("*.json"), key=lambda path: path.stat().st_mtime, reverse=True)
        for stale in entries[MAX_ENTRIES:]:
            stale.unlink(missing_ok=True)

    def scan(self, handle: BinaryIO, **options: Any) -> timeline.LevelScan:
        """``timeline.scan_levels`` from this log's summary, if it still holds; the new summary is kept."""
        scan = timeline.scan_levels(handle, resume=self.load(handle), **options)
        self.store(handle, scan.resume)
        return scan
