"""An incident's timeline: log lines per minute by level, from one bounded forward pass over a log of any size.

The log is read in chunks of a fixed size (a line longer than a few chunks is skipped, not held), so memory stays
flat whatever its size; the pass stops at a time budget, a byte budget or a cap on distinct minutes, and says how
far it got. Counting is done by array operations over each chunk's lines (``core.timeline_scan``: no Python per
line), into one reused buffer; a short pause after each chunk leaves the interpreter lock to the event loop.

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
from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

import structlog

from incident_desk.core.helper_pool import HELPERS, STRETCH_BYTES, default_processes, on_disk
from incident_desk.core.journal.audit import Decision
from incident_desk.core.log_clock import line_moment, utc_minute
from incident_desk.core.scan_budget import SCAN_BUDGET_BYTES, ScanBudget, StopReason
from incident_desk.core.timeline.chunks import Counted, Skipped, counted_chunks, first_error_line
from incident_desk.core.timeline.counts import MinuteCounts
from incident_desk.core.timeline.helped import StretchCount, stretch_counts
from incident_desk.core.timeline.kernel import LINES_PER_PASS
from incident_desk.core.timeline.patterns import patterns as _patterns

if TYPE_CHECKING:
    pass

_log = structlog.get_logger(__name__)
LEVELS = ("error", "warn", "info", "debug")
Level = Literal["error", "warn", "info", "debug"]
MAX_MINUTES = 24 * 60
MAX_FIRST_ERROR_CHARS = 300
_FIRST_ERROR_READ = 4096  # enough of the first error's line to find its time, level and shown text
CHUNK_BYTES = 2 * 1024 * 1024  # read and counted at a time (one per worker thread, plus one being read)
MAX_CARRY_BYTES = 4 * 1024 * 1024  # a line longer than this is skipped, not held, and counts as unparsed
# After each chunk the scan's own thread sleeps this long; 0 still hands the interpreter lock over (the counting
# runs in worker threads whose array operations leave it anyway).
PAUSE_SECONDS = 0.0
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


def _first_error_at(
    handle: BinaryIO, line: int, offset: int, anchor: datetime, redactor: Redactor
) -> FirstError | None:
    """The first error, read again from its offset: only its place is kept between passes, never its text."""
    _line_pattern, first_error_pattern = _patterns()
    handle.seek(offset)
    framed = b"\n" + handle.read(_FIRST_ERROR_READ).split(b"\n", 1)[0]
    hit = first_error_pattern.search(framed)
    if hit is None:
        return None
    return _first_error(framed, hit, line, anchor, redactor)


def _first_error(framed: bytes, hit: Any, line: int, anchor: datetime, redactor: Redactor) -> FirstError:
    day, hour_minute, seconds, zone = (framed[start:end] for start, end in hit[1:5])
    whole = framed[hit[0][0] + 1 : hit[0][1]]
    text = redactor(whole.decode("utf-8", errors="replace"))[:MAX_FIRST_ERROR_CHARS]
    minute = _minute_start(*utc_minute(day, hour_minute, zone), anchor)
    at = minute.replace(second=min(59, int(seconds))) if minute else None
    return FirstError(line, at, text)


def _minute_start(day: bytes, hour_minute: bytes, anchor: datetime) -> datetime | None:
    try:
        on = date.fromisoformat(day.decode()) if day else None
        return line_moment(on, int(hour_minute[:2]), int(hour_minute[3:5]), 0, anchor)
    except ValueError:
        return None


def _last_line_end(handle: BinaryIO, total: int) -> int:
    """Where the log's last newline ends (a line start); 0 when none is within the last line a scan would hold."""
    end = total
    while end > max(0, total - MAX_CARRY_BYTES):
        start = max(0, end - 64 * 1024)
        handle.seek(start)
        newline = handle.read(end - start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _resume(
    handle: BinaryIO,
    offset: int,
    lines: int,
    parsed: int,
    first_error: tuple[int, int] | None,
    counts: dict[tuple[bytes, bytes, bytes], int],
) -> Resume:
    return Resume(offset, lines, parsed, counts, first_error, _check_digest(handle, offset))


class _Pass:
    """A pass's running state: how far it has read and what it counted, and the last point every line read was
    whole and counted (where a later pass may resume), with its counts (None: as they are now)."""

    def __init__(
        self,
        handle: BinaryIO,
        resume: Resume | None,
        budget: ScanBudget,
        *,
        max_minutes: int,
        anchor: datetime,
        redactor: Redactor,
        pause_seconds: float,
    ) -> None:
        self.handle, self.budget, self.max_minutes = handle, budget, max_minutes
        self.anchor, self.redactor, self.pause_seconds = anchor, redactor, pause_seconds
        self.counts = MinuteCounts(resume.counts if resume else {})
        self.minutes_seen = self.counts.minutes()
        self.first_error: FirstError | None = None
        self.first_error_place = resume.first_error if resume else None
        self.bytes = self.started_at = resume.offset if resume else 0
        self.lines = resume.lines if resume else 0
        self.parsed = resume.parsed if resume else 0
        self.latest = (resume.offset, resume.lines, resume.parsed, resume.first_error) if resume else None
        self.latest_counts: dict[tuple[bytes, bytes, bytes], int] | None = None
        self.stopped: StopReason | None = None
        if self.first_error_place is not None:
            self.first_error = _first_error_at(handle, *self.first_error_place, anchor, redactor)

    def out_of_budget(self) -> StopReason | None:
        # Only once the pass has moved, as a search does: the first pass of a desk loads numpy, the patterns
        # and a thread, which on a loaded machine can take the whole budget, and a pass that counted nothing
        # would answer the same when asked again.
        return self.budget.stop_reason(self.bytes, moved=self.bytes > self.started_at)

    def admits(self, minutes: set[tuple[bytes, bytes]]) -> bool:
        """Whether counting these (day, minute) pairs keeps the pass within its minute limit (then they count)."""
        seen = self.minutes_seen | minutes if minutes else self.minutes_seen
        if len(seen) > self.max_minutes:
            return False
        self.minutes_seen = seen
        return True

    def whole_here(self) -> None:
        self.latest, self.latest_counts = (self.bytes, self.lines, self.parsed, self.first_error_place), None

    def count_here(self, chunks: Generator[Skipped | Counted, None, None], *, hand_over: Callable[[], bool]) -> bool:
        """Count ``chunks`` (read from ``self.bytes`` on) until the log ends or the pass must stop (False), or until
        ``hand_over`` says, at a line start, that helpers are ready to take the rest (True)."""
        first_error_pattern = _patterns()[1]
        with closing(chunks):
            while True:
                self.stopped = self.out_of_budget()
                if self.stopped is not None:
                    return False
                event = next(chunks, None)
                if event is None:
                    return False
                if isinstance(event, Skipped):
                    self.bytes += event.bytes
                    self.lines += event.lines
                    continue
                found = event.levels
                if not self.admits(self.counts.fresh_minutes(found)):
                    self.stopped = "minute limit"
                    return False
                if not event.whole:
                    self.latest_counts = self.counts.as_dict()
                self.counts.add(found)
                first = first_error_line(event, first_error_pattern) if self.first_error_place is None else None
                if first is not None:
                    index, offset, framed_line, hit = first
                    line = self.lines + index + 1
                    self.first_error_place = (line, self.bytes + offset)
                    self.first_error = _first_error(framed_line, hit, line, self.anchor, self.redactor)
                self.lines += found.lines
                self.parsed += found.parsed
                self.bytes += event.size - 1
                if event.whole:
                    self.whole_here()
                    if hand_over():
                        return True
                time.sleep(self.pause_seconds)

    def count_by(self, stretches: Generator[StretchCount, None, None]) -> None:
        """Take the helpers' counts, stretch by stretch, until they end, fail or the budget runs out; a stretch
        that does not follow on (the log changed under the helpers) or would pass the minute limit is left to
        this process."""
        with closing(stretches):
            for stretch in stretches:
                if self.out_of_budget() is not None or not stretch.whole or stretch.begin != self.bytes:
                    return
                if not self.admits({(day, hour_minute) for day, hour_minute, _ in stretch.counts}):
                    return
                self.counts.add_counts(stretch.counts)
                if self.first_error_place is None and stretch.first_error is not None:
                    index, offset = stretch.first_error
                    self.first_error_place = (self.lines + index + 1, offset)
                    self.first_error = _first_error_at(self.handle, *self.first_error_place, self.anchor, self.redactor)
                self.lines += stretch.lines
                self.parsed += stretch.parsed
                self.bytes = stretch.end
                self.whole_here()


def scan_levels(
    handle: BinaryIO,
    *,
    anchor: datetime,
    time_budget: float | None = None,
    byte_budget: int = SCAN_BUDGET_BYTES,
    max_minutes: int = MAX_MINUTES,
    redactor: Redactor = lambda text: text,
    cancelled: threading.Event | None = None,
    resume: Resume | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    max_carry_bytes: int = MAX_CARRY_BYTES,
    pause_seconds: float = PAUSE_SECONDS,
    workers: int | None = None,
    lines_per_pass: int = LINES_PER_PASS,
    processes: int | None = None,
    stretch_bytes: int = STRETCH_BYTES,
) -> LevelScan:
    """Count the log's lines per minute and level from its start, until its end or a budget; find the first error.

    ``anchor`` is the incident's opening: a bare ``HH:MM:SS`` is read nearest it (``log_clock``). Only the first
    error's text is decoded (and redacted).
    ``resume``: a previous pass's ``resume`` over this log; used if the log still holds the bytes it counted.
    ``chunk_bytes``: read and counted at a time; a line longer than ``max_carry_bytes`` counts as unparsed.
    ``workers`` (threads counting chunks) and ``lines_per_pass`` (lines decided at once) are the kernel's sizes.
    ``processes``: helper processes that count a log of two ``stretch_bytes`` or more, a stretch each (default
    ``helper_pool.default_processes()``; 0: this process counts alone). Helpers still starting leave the
    counting to this process until they are ready, then take the rest but its last partial line.
    """
    budget = ScanBudget.starting_now(time_budget=time_budget, byte_budget=byte_budget, cancelled=cancelled)
    line_pattern, _ = _patterns()
    total = handle.seek(0, os.SEEK_END)
    resume = _valid(resume, handle, total)
    run = _Pass(
        handle, resume, budget, max_minutes=max_minutes, anchor=anchor, redactor=redactor, pause_seconds=pause_seconds
    )

    def chunks_from_here() -> Generator[Skipped | Counted, None, None]:
        handle.seek(run.bytes)
        return counted_chunks(
            handle,
            line_pattern,
            chunk=chunk_bytes,
            max_carry=max_carry_bytes,
            want_errors=lambda: run.first_error_place is None,
            workers=workers,
            lines_per_pass=lines_per_pass,
        )

    processes = default_processes() if processes is None else processes
    big = processes and total - run.bytes >= 2 * stretch_bytes and on_disk(handle)
    helped_until = _last_line_end(handle, total) if big else 0
    with HELPERS.lent(processes if helped_until else 0) as helpers:

        def helpers_ready() -> bool:
            return helped_until - run.bytes >= 2 * stretch_bytes and all(helper.ready() for helper in helpers)

        done = False
        if helpers and run.out_of_budget() is None:
            # Its first chunk here whatever the helpers' state, as a pass always counts one before its budget
            # can stop it (a stretch is sixteen chunks: too long to wait for past the budget).
            handed = run.count_here(chunks_from_here(), hand_over=helpers_ready)
            done = not handed
            if handed:
                handed_at = run.bytes
                run.count_by(
                    stretch_counts(
                        helpers,
                        handle,
                        run.bytes,
                        helped_until,
                        want_errors=lambda: run.first_error_place is None,
                        should_stop=lambda: run.out_of_budget() is not None,
                        chunk=chunk_bytes,
                        max_carry=max_carry_bytes,
                        stretch_bytes=stretch_bytes,
                    )
                )
                _log.debug("timeline counted by helpers", counted_here=handed_at, by_helpers=run.bytes - handed_at)
    if not done:  # the whole log here, or what the helpers left: the log's last line, or from where they stopped
        run.count_here(chunks_from_here(), hand_over=lambda: False)
    stopped: StopReason = run.stopped or "end of log"
    if run.bytes >= total:
        stopped = "end of log"
    kept = run.latest_counts
    all_counts = run.counts.as_dict()
    parsed_lines = run.parsed
    by_minute: dict[datetime, dict[str, int]] = {}
    for (day, hour_minute, level), count in all_counts.items():
        if count <= 0:
            continue
        start = _minute_start(day, hour_minute, anchor)
        if start is None:
            parsed_lines -= count
            continue
        bucket = by_minute.setdefault(start, dict.fromkeys(LEVELS, 0))
        bucket[_LEVEL_OF[level]] += count
    minutes = [Minute(start, **levels) for start, levels in sorted(by_minute.items())]
    latest = run.latest
    return LevelScan(
        minutes=minutes,
        first_error=run.first_error,
        unparsed_lines=run.lines - parsed_lines,
        scanned_lines=run.lines,
        scanned_bytes=run.bytes,
        total_bytes=total,
        stopped=stopped,
        resume=None if latest is None else _resume(handle, *latest, all_counts if kept is None else kept),
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
