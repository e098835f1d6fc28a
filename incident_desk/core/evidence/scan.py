"""The template pass: one forward scan of a log of any size, bounded as every scan is (``core.scan_budget``),
counted by the helper processes of the timeline and the search on a big log (``core.helper_pool``), resumable
where it stopped (a log that has only grown, or one a budget stopped, costs only the bytes not yet read).

What it keeps is a ``Tally`` of masked lines (``tally``); ``drain`` then groups those into templates.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

import structlog

from incident_desk.core.evidence.reading import CHUNK_BYTES, pieces, pread_from
from incident_desk.core.evidence.tally import Boundary, Tally, tally_chunk
from incident_desk.core.helper_pool import (
    HELPERS,
    PRELOADED,
    default_processes,
    helped_stretches,
    line_start_at,
    on_disk,
)
from incident_desk.core.scan_budget import SCAN_BUDGET_BYTES, ScanBudget, StopReason

PRELOADED.append(__name__)  # a helper loads this module before it says it is ready
_log = structlog.get_logger(__name__)
# A helper's share at a time: masking costs some ten times the timeline's counting a byte, so a stretch is an
# eighth of the timeline's, and a pass that stops leaves its helpers as little stale work.
STRETCH_BYTES = 4 * 1024 * 1024
_CHECK_BYTES = 256  # bytes before a resume point that must be unchanged for the tally up to it to hold


def warm_up() -> None:
    """Load what a stretch needs (numpy, RE2), so a helper's first stretch does not wait on it."""
    from incident_desk.core.evidence.masking import mask_lines
    from incident_desk.core.evidence.tally import _time_pattern

    mask_lines(b"0\n")
    _time_pattern()


@dataclass
class TemplateScan:
    """What the pass saw: its tally of masked lines, how far it read, and why it stopped."""

    tally: Tally
    scanned_bytes: int
    total_bytes: int
    stopped: StopReason
    skipped_lines: int = 0
    resume: Resume | None = None


@dataclass
class Resume:
    """A pass's tally of every line before ``offset`` (a line start), for the same baseline, with a digest of the
    bytes just before it so a log rewritten since is read afresh."""

    offset: int
    baseline_end: float
    tally: Tally = field(default_factory=Tally)
    skipped_lines: int = 0
    check: str = ""


def _digest(handle: BinaryIO, offset: int) -> str:
    start = max(0, offset - _CHECK_BYTES)
    handle.seek(start)
    return hashlib.sha256(handle.read(offset - start)).hexdigest()


def _still_holds(resume: Resume | None, handle: BinaryIO, total: int, boundary: Boundary) -> bool:
    return (
        resume is not None
        and resume.offset <= total
        and resume.baseline_end == boundary.baseline_end
        and _digest(handle, resume.offset) == resume.check
    )


@dataclass(frozen=True)
class StretchTally:
    """A helper's tally of the lines starting in ``begin .. end`` (line starts); ``whole`` False when the log ended
    early under it."""

    begin: int
    end: int
    tally: Tally
    skipped_lines: int
    whole: bool


def tally_stretch(fd: int, begin_at: int, end_at: int, boundary: Boundary, chunk_bytes: int) -> StretchTally:
    """Tally the lines that start in ``begin_at .. end_at`` of the open log ``fd``: a helper's work."""
    begin, end = line_start_at(fd, begin_at), line_start_at(fd, end_at)
    if begin is None or end is None:
        return StretchTally(begin_at, end_at, Tally(), 0, whole=False)
    end = max(begin, end)
    tally, skipped, done = Tally(), 0, begin
    for piece in pieces(pread_from(fd, begin, end), begin, chunk_bytes):
        if piece.data:
            tally_chunk(piece.data, piece.offset, boundary, tally)
            done = piece.offset + len(piece.data)
        else:
            skipped += piece.lines
            tally.lines += piece.lines
            done = piece.offset + piece.skipped
    return StretchTally(begin, end, tally, skipped, whole=done >= end)


class _Pass:
    def __init__(self, handle: BinaryIO, boundary: Boundary, budget: ScanBudget, resume: Resume | None) -> None:
        self.handle, self.boundary, self.budget = handle, boundary, budget
        self.tally = resume.tally if resume else Tally()
        self.skipped = resume.skipped_lines if resume else 0
        self.at = self.started_at = resume.offset if resume else 0
        self.stopped: StopReason | None = None

    def out_of_budget(self) -> StopReason | None:
        return self.budget.stop_reason(self.at, moved=self.at > self.started_at)

    def read_here(self, until: Callable[[], bool], chunk_bytes: int) -> None:
        """Tally from ``self.at`` until the log ends, the budget runs out, or ``until()`` says to hand over."""
        self.handle.seek(self.at)
        for piece in pieces(self.handle.read, self.at, chunk_bytes):
            if piece.data:
                tally_chunk(piece.data, piece.offset, self.boundary, self.tally)
                self.at = piece.offset + len(piece.data)
            else:
                self.skipped += piece.lines
                self.tally.lines += piece.lines
                self.at = piece.offset + piece.skipped
                if not piece.lines:
                    continue  # inside an overlong line: stop only at a line start, where a later pass can resume
            self.stopped = self.out_of_budget()
            if self.stopped is not None or until():
                return

    def take(self, stretch: StretchTally) -> bool:
        if self.out_of_budget() is not None or not stretch.whole or stretch.begin != self.at:
            return False
        self.tally.merge(stretch.tally)
        self.skipped += stretch.skipped_lines
        self.at = stretch.end
        return True


def scan_templates(
    handle: BinaryIO,
    boundary: Boundary,
    *,
    time_budget: float | None = None,
    byte_budget: int = SCAN_BUDGET_BYTES,
    cancelled: threading.Event | None = None,
    resume: Resume | None = None,
    processes: int | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    stretch_bytes: int = STRETCH_BYTES,
) -> TemplateScan:
    """Tally the log's masked lines from its start (or from ``resume``, when it still holds) until its end or a
    budget. ``processes``: helpers that tally a log of two stretches or more (default: as the timeline's)."""
    budget = ScanBudget.starting_now(time_budget=time_budget, byte_budget=byte_budget, cancelled=cancelled)
    total = handle.seek(0, os.SEEK_END)
    run = _Pass(handle, boundary, budget, resume if _still_holds(resume, handle, total, boundary) else None)
    processes = default_processes() if processes is None else processes
    big = bool(processes) and total - run.at >= 2 * stretch_bytes and on_disk(handle)
    with HELPERS.lent(processes if big else 0) as helpers:

        def ready() -> bool:
            return bool(helpers) and total - run.at >= 2 * stretch_bytes and all(h.ready() for h in helpers)

        run.read_here(ready, chunk_bytes)
        if helpers and run.stopped is None and run.at < total and ready():
            handed_at = run.at
            for answer in helped_stretches(
                helpers,
                handle,
                run.at,
                total,
                ask=lambda begin, end: ("run", tally_stretch, (begin, end, boundary, chunk_bytes)),
                should_stop=lambda: run.out_of_budget() is not None,
                stretch_bytes=stretch_bytes,
            ):
                assert isinstance(answer, StretchTally)
                if not run.take(answer):
                    break
            _log.debug("templates tallied by helpers", here=handed_at, by_helpers=run.at - handed_at)
    if run.stopped is None and run.at < total:
        run.stopped = run.out_of_budget()
        if run.stopped is None:
            run.read_here(lambda: False, chunk_bytes)
    stopped: StopReason = run.stopped if run.stopped is not None and run.at < total else "end of log"
    kept = Resume(run.at, boundary.baseline_end, run.tally, run.skipped, _digest(handle, run.at))
    return TemplateScan(run.tally, run.at, total, stopped, run.skipped, kept)
