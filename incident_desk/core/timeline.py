"""An incident's timeline: log lines per minute by level, from one bounded forward pass over a log of any size.

The log is read in chunks of a fixed size (a line longer than a few chunks is skipped, not held), so memory stays
flat whatever its size; the pass stops at a time budget, a byte budget or a cap on distinct minutes, and says how
far it got. Counting is done by one regular expression per chunk and a ``Counter`` (both in C); a short pause after
each chunk leaves the interpreter lock to the event loop.

Lines start with a time: ``HH:MM:SS`` (taken on the day the incident opened, UTC) or an ISO date-time
(``2026-11-29T10:58:12``; any zone suffix is ignored and the time taken as UTC), then an optional source word, then
a level. Lines without that shape are counted as unparsed.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from incident_desk.core.audit import Decision
from incident_desk.core.scan_budget import SCAN_BUDGET_BYTES, ScanBudget, StopReason
from incident_desk.core.timeline_scan import levels_in

if TYPE_CHECKING:
    from incident_desk.core.linear import LinearPattern

LEVELS = ("error", "warn", "info", "debug")
Level = Literal["error", "warn", "info", "debug"]
MAX_MINUTES = 24 * 60
MAX_FIRST_ERROR_CHARS = 300
_FIRST_ERROR_READ = 4096  # enough of the first error's line to find its time, level and shown text
CHUNK_BYTES = 1024 * 1024  # read and counted at a time
MAX_CARRY_BYTES = 4 * CHUNK_BYTES  # a line longer than this is skipped, not held, and counts as unparsed
PAUSE_SECONDS = 0.001  # after each chunk, the interpreter lock is left to the event loop this long
_SPARK = "▁▂▃▄▅▆▇█"
_LEVEL_OF = {
    b"ERROR": "error",
    b"FATAL": "error",
    b"CRITICAL": "error",
    b"WARN": "warn",
    b"WARNING": "warn",
    b"INFO": "info",
    b"DEBUG": "debug",
    b"TRACE": "debug",
}
# Each pattern starts with a literal newline (the scan puts one before each chunk), so a match starts only at a
# line's start. Log content may be hostile: the patterns run on RE2 (linear time), compiled on the first scan so
# that starting the desk does not load it.
_LINE_SOURCE = (
    rb"\n(?:(\d{4}-\d\d-\d\d)[T ])?(\d\d:\d\d):\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t]+(?:\S+[ \t]+)?"
    rb"\[?(ERROR|FATAL|CRITICAL|WARNING|WARN|INFO|DEBUG|TRACE)\b"
)
_FIRST_ERROR_SOURCE = (
    rb"\n(?:(\d{4}-\d\d-\d\d)[T ])?(\d\d:\d\d):(\d\d)(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t]+(?:\S+[ \t]+)?"
    rb"\[?(?:ERROR|FATAL|CRITICAL)\b[^\n]*"
)


@cache
def _patterns() -> tuple[LinearPattern, LinearPattern]:
    from incident_desk.core.linear import LinearPattern

    return LinearPattern(_LINE_SOURCE), LinearPattern(_FIRST_ERROR_SOURCE)


Redactor = Callable[[str], str]


@dataclass(frozen=True)
class Minute:
    start: datetime
    error: int
    warn: int
    info: int
    debug: int

    @property
    def total(self) -> int:
        return self.error + self.warn + self.info + self.debug


@dataclass(frozen=True)
class FirstError:
    line: int
    time: datetime | None
    text: str


# How much of the log before a resume point must be unchanged for the counts up to it to still hold.
_RESUME_CHECK_BYTES = 256


@dataclass(frozen=True)
class Resume:
    """Where a pass can pick up: the counts of every line before ``offset`` (a line start), and a digest of the
    bytes just before it, so a log rewritten since (rotated, truncated, edited) is counted afresh."""

    offset: int
    lines: int
    parsed: int
    counts: dict[tuple[bytes, bytes, bytes], int]
    first_error: tuple[int, int] | None  # its line number and byte offset: its text is read and redacted anew
    check: str


@dataclass(frozen=True)
class LevelScan:
    """What one pass saw: the per-minute series (oldest first), the first error, and how far it read."""

    minutes: list[Minute]
    first_error: FirstError | None
    unparsed_lines: int
    scanned_lines: int
    scanned_bytes: int
    total_bytes: int
    stopped: StopReason
    resume: Resume | None = None  # where a later pass over the same (grown) log may start


def _check_digest(handle: BinaryIO, offset: int) -> str:
    start = max(0, offset - _RESUME_CHECK_BYTES)
    handle.seek(start)
    return hashlib.sha256(handle.read(offset - start)).hexdigest()


def _valid(resume: Resume | None, handle: BinaryIO, total: int) -> Resume | None:
    if resume is None or resume.offset > total:
        return None
    return resume if _check_digest(handle, resume.offset) == resume.check else None


def _first_error_at(handle: BinaryIO, line: int, offset: int, anchor: date, redactor: Redactor) -> FirstError | None:
    """The first error, read again from its offset: only its place is kept between passes, never its text."""
    _line_pattern, first_error_pattern = _patterns()
    handle.seek(offset)
    framed = b"\n" + handle.read(_FIRST_ERROR_READ).split(b"\n", 1)[0]
    hit = first_error_pattern.search(framed)
    if hit is None:
        return None
    return _first_error(framed, hit, line, anchor, redactor)


def _first_error(framed: bytes, hit: Any, line: int, anchor: date, redactor: Redactor) -> FirstError:
    day, hour_minute, seconds = (framed[start:end] for start, end in hit[1:4])
    whole = framed[hit[0][0] + 1 : hit[0][1]]
    text = redactor(whole.decode("utf-8", errors="replace"))[:MAX_FIRST_ERROR_CHARS]
    minute = _minute_start(day, hour_minute, anchor)
    at = minute.replace(second=min(59, int(seconds))) if minute else None
    return FirstError(line, at, text)


def _minute_start(day: bytes, hour_minute: bytes, anchor: date) -> datetime | None:
    try:
        on = date.fromisoformat(day.decode()) if day else anchor
        hours, minutes = int(hour_minute[:2]), int(hour_minute[3:5])
        return datetime(on.year, on.month, on.day, hours, minutes, tzinfo=UTC)
    except ValueError:
        return None


def scan_levels(
    handle: BinaryIO,
    *,
    anchor: date,
    time_budget: float | None = None,
    byte_budget: int = SCAN_BUDGET_BYTES,
    max_minutes: int = MAX_MINUTES,
    redactor: Redactor = lambda text: text,
    cancelled: threading.Event | None = None,
    resume: Resume | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    max_carry_bytes: int = MAX_CARRY_BYTES,
    pause_seconds: float = PAUSE_SECONDS,
) -> LevelScan:
    """Count the log's lines per minute and level from its start, until its end or a budget; find the first error.

    ``anchor`` is the day a bare ``HH:MM:SS`` belongs to. Only the first error's text is decoded (and redacted).
    ``resume``: a previous pass's ``resume`` over this log; used if the log still holds the bytes it counted.
    ``chunk_bytes``: read and counted at a time; a line longer than ``max_carry_bytes`` counts as unparsed.
    """
    budget = ScanBudget.starting_now(time_budget=time_budget, byte_budget=byte_budget, cancelled=cancelled)
    line_pattern, first_error_pattern = _patterns()
    total = handle.seek(0, os.SEEK_END)
    resume = _valid(resume, handle, total)
    counts: Counter[tuple[bytes, bytes, bytes]] = Counter(resume.counts if resume else {})
    first_error: FirstError | None = None
    first_error_place = resume.first_error if resume else None
    if first_error_place is not None:
        first_error = _first_error_at(handle, *first_error_place, anchor, redactor)
    scanned_bytes = resume.offset if resume else 0
    scanned_lines = resume.lines if resume else 0
    parsed_lines = resume.parsed if resume else 0
    latest = resume  # the last point at which every line read so far was whole and counted
    handle.seek(scanned_bytes)
    stopped: StopReason = "end of log"
    carry = b""
    in_long_line = False  # inside a line longer than max_carry_bytes: its rest is skipped, it counts as unparsed
    while True:
        out_of_budget = budget.stop_reason(scanned_bytes)
        if out_of_budget is not None:
            stopped = out_of_budget
            break
        read = handle.read(chunk_bytes)
        if in_long_line:
            newline = read.find(b"\n")
            skipped = len(read) if newline < 0 else newline + 1
            scanned_bytes += skipped
            if newline < 0 and read:
                continue
            in_long_line, read = False, read[skipped:]
        if not read:
            chunk, carry = carry, b""
            if not chunk:
                break
        else:
            data = carry + read
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                if len(data) < max_carry_bytes:
                    carry = data  # a line longer than a chunk so far: keep reading it
                    continue
                scanned_bytes += len(data)
                scanned_lines += 1
                carry, in_long_line = b"", True
                continue
            chunk, carry = data[:cut], data[cut:]
        framed = b"\n" + chunk
        found, parsed = levels_in(framed, line_pattern)
        counts.update(found)
        if len({(day, hour_minute) for day, hour_minute, _ in counts}) > max_minutes:
            counts.subtract(found)
            stopped = "minute limit"
            break
        if first_error_place is None:
            hit = first_error_pattern.search(framed)
            if hit is not None:
                line = scanned_lines + chunk.count(b"\n", 0, hit[0][0]) + 1
                first_error_place = (line, scanned_bytes + hit[0][0])
                first_error = _first_error(framed, hit, line, anchor, redactor)
        lines = chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
        scanned_lines += lines
        parsed_lines += parsed
        scanned_bytes += len(chunk)
        if chunk.endswith(b"\n"):
            latest = Resume(scanned_bytes, scanned_lines, parsed_lines, dict(counts), first_error_place, "")
        time.sleep(pause_seconds)
    if scanned_bytes >= total:
        stopped = "end of log"
    by_minute: dict[datetime, dict[str, int]] = {}
    for (day, hour_minute, level), count in counts.items():
        if count <= 0:
            continue
        start = _minute_start(day, hour_minute, anchor)
        if start is None:
            parsed_lines -= count
            continue
        bucket = by_minute.setdefault(start, dict.fromkeys(LEVELS, 0))
        bucket[_LEVEL_OF[level]] += count
    minutes = [Minute(start, **levels) for start, levels in sorted(by_minute.items())]
    return LevelScan(
        minutes=minutes,
        first_error=first_error,
        unparsed_lines=scanned_lines - parsed_lines,
        scanned_lines=scanned_lines,
        scanned_bytes=scanned_bytes,
        total_bytes=total,
        stopped=stopped,
        resume=None if latest is None else replace(latest, check=_check_digest(handle, latest.offset)),
    )


def service_decisions(decisions: Sequence[Decision], service: str) -> list[Decision]:
    """The restart decisions for ``service``, oldest first (the journal reads newest first)."""
    return sorted((d for d in decisions if d.service == service), key=lambda d: d.time)


def filled_series(minutes: Sequence[Minute]) -> list[Minute]:
    """The series with quiet minutes between the first and the last as zero rows, so bars keep their place."""
    if not minutes:
        return []
    present = {m.start: m for m in minutes}
    filled: list[Minute] = []
    at, last = minutes[0].start, minutes[-1].start
    while at <= last and len(filled) < MAX_MINUTES:
        filled.append(present.get(at, Minute(at, 0, 0, 0, 0)))
        at += timedelta(minutes=1)
    return filled


def sparkline(values: Sequence[int], width: int = 60) -> str:
    """One block character per value (or per group of values summed, past ``width``), scaled to the largest;
    rounded up, so only a zero is the lowest block."""
    group = max(1, math.ceil(len(values) / width))
    columns = [sum(values[i : i + group]) for i in range(0, len(values), group)]
    top = max(columns, default=0)
    if top <= 0:
        return _SPARK[0] * len(columns)
    steps = len(_SPARK) - 1
    return "".join(_SPARK[min(steps, (value * steps + top - 1) // top)] for value in columns)
