"""A big log's search prefiltered by helper processes, a stretch each, so the desk reads only where a match may be.

Reading a log out of the page cache and counting its newlines cost a search more than finding the pattern, and
threads cannot share that work (``log_parallel.free_workers``). The timeline's helper processes
(``core.helper_pool``) are lent to the search: each reads its stretch by position into its own buffer, looks
for the first line that may be a candidate (one with one of the pattern's literals, too long to scan raw, or not
UTF-8 when that matters) and counts the newlines before it. The desk adds the counts of stretches without one and
scans, with the real matcher and redaction, only from a stretch's first candidate to its end. Only patterns with
literals are prefiltered this way (without them the desk's own scan is already as fast as ripgrep's), and only
logs of ``HELPED_FROM`` bytes or more. The first big search reads alone and starts the helpers once it
has its answer; the searches after it find them ready.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import structlog

from incident_desk.core import helper_pool
from incident_desk.core.helper_pool import HELPERS, PRELOADED, helped_stretches, line_start_at
from incident_desk.core.scan_budget import ScanBudget, StopReason
from incident_desk.core.search.literals import searches
from incident_desk.core.search.paging import Cursor
from incident_desk.core.search.run_indexes import RunIndex, RunIndexes
from incident_desk.core.search.runs import Run, newlines_and_long_lines, undecodable_lines

if TYPE_CHECKING:
    from incident_desk.core.search.pattern import SearchPattern

PRELOADED.append(__name__)  # a helper loads this module before it says it is ready

STRETCH_BYTES = 32 * 1024 * 1024
_log = structlog.get_logger(__name__)
HELPED_FROM = 2 * STRETCH_BYTES  # smaller logs are searched by the desk alone: helpers would save little
# A helper's stretch is some 50 ms of work (more on a loaded machine, never this much). The search waits for one
# at most half of what is left of its time budget, and no less than this: a helper later than that is dropped and
# the desk reads its stretch itself, in the same call (a stopped helper once cost a search its whole budget).
STRETCH_DUE_MIN_SECONDS = 0.5


def stretch_due(budget: ScanBudget) -> float:
    """How long the search waits for a helper's stretch from now: half of its time budget left, at least
    ``STRETCH_DUE_MIN_SECONDS``, at most the pool's ``STRETCH_SECONDS``."""
    left = budget.deadline - time.monotonic()
    return min(helper_pool.STRETCH_SECONDS, max(STRETCH_DUE_MIN_SECONDS, left / 2))


@dataclass(frozen=True)
class ClearStretch:
    """What a helper found in ``begin .. end`` (both line starts): no line before ``clear_until`` (a line start)
    can be a candidate, and ``newlines`` lines end before it; ``whole`` is False when the log ended early."""

    begin: int
    end: int
    clear_until: int
    newlines: int
    whole: bool = True


_KEPT: dict[str, Any] = {}  # a helper's buffer, scratch and remembered run indexes, kept from stretch to stretch
_INDEXES = RunIndexes()


def _kept(name: str, size: int, make: Callable[[int], Any]) -> Any:
    """A helper's ``name`` (its buffer, its scratch) of ``size``, made the first time and again for other sizes."""
    kept = _KEPT.get(name)
    if kept is None or len(kept) != size:
        kept = _KEPT[name] = make(size)
    return kept


def clear_stretch(
    fd: int,
    begin_at: int,
    end_at: int,
    literals: tuple[bytes, ...],
    undecodable: bool,
    read_bytes: int,
    index_piece: int,
) -> ClearStretch:
    """Find where the first candidate line of ``begin_at .. end_at`` of the open log ``fd`` may start, reading
    ``read_bytes`` at a time: a helper's work. Candidates are the lines holding one of ``literals``, the lines too
    long to scan raw and (``undecodable``) those that are not UTF-8; a line longer than a read stops it too."""
    import numpy as np
    import stringzilla

    begin, end = line_start_at(fd, begin_at), line_start_at(fd, end_at)
    if begin is None or end is None:
        return ClearStretch(begin_at, end_at, begin_at, 0, whole=False)
    end = max(begin, end)
    buffer: bytearray = _kept("buffer", read_bytes, bytearray)
    scratch = _kept("scratch", index_piece, lambda size: np.empty(size, dtype=np.bool_))
    finds = searches(literals, stringzilla.find, stringzilla.utf8_uncased_search)
    status = os.fstat(fd)
    position, newlines = begin, 0
    with memoryview(buffer) as view:
        while position < end:
            got = os.preadv(fd, [view[: min(read_bytes, end - position)]], position)
            if not got:
                return ClearStretch(begin, end, position, newlines, whole=False)
            length = buffer.rfind(b"\n", 0, got) + 1
            if not length:  # a line longer than a read: the desk's to read
                return ClearStretch(begin, end, position, newlines)
            hits = [hit for find, literal in finds if (hit := find(buffer, literal, 0, length)) >= 0]
            if hits:  # only the lines before the first hit's need looking at
                length = buffer.rfind(b"\n", 0, min(hits)) + 1
            run = Run(position, buffer, length, terminated=True)
            known: RunIndex | None = _run_index(run, scratch, undecodable) if hits else None
            if known is None:  # a run without a candidate of its own: its index is remembered for the next search
                key = (status.st_dev, status.st_ino, position, length)
                digest = _INDEXES.digest(buffer, length)
                known = _INDEXES.get(key, digest)
                if known is None or (undecodable and known.undecodable is None):
                    known = _run_index(run, scratch, undecodable)
                    _INDEXES.put(key, digest, known)
            specials = [*known.long_lines, *(known.undecodable or ())] if undecodable else known.long_lines
            stop = min([length, *(start for start, _end in specials)])
            if stop < length:
                return ClearStretch(begin, end, position + stop, newlines + buffer.count(b"\n", 0, stop))
            newlines += known.newlines
            position += length
            if hits:
                return ClearStretch(begin, end, position, newlines)
    return ClearStretch(begin, end, end, newlines)


def _run_index(run: Run, scratch: Any, undecodable: bool) -> RunIndex:
    count, long_lines = newlines_and_long_lines(run, scratch)
    return RunIndex(count, tuple(long_lines), tuple(undecodable_lines(run)) if undecodable else None)


def clear_stretches(
    helpers: list[Any],
    handle: BinaryIO,
    begin: int,
    end: int,
    *,
    literals: tuple[bytes, ...],
    undecodable: bool,
    read_bytes: int,
    index_piece: int,
    should_stop: Callable[[], bool],
    stretch_bytes: int = STRETCH_BYTES,
    stretch_seconds: Callable[[], float] | None = None,
) -> Generator[ClearStretch | None, None, None]:
    """What ``helpers`` (lent and ready) found in each stretch of ``begin .. end`` (``begin`` a line start), in log
    order, after a None once they have their first stretches; stops early when one fails or misses
    ``stretch_seconds()`` (the caller reads on itself)."""
    for answer in helped_stretches(
        helpers,
        handle,
        begin,
        end,
        ask=lambda at, until: ("run", clear_stretch, (at, until, literals, undecodable, read_bytes, index_piece)),
        should_stop=should_stop,
        stretch_bytes=stretch_bytes,
        announce=True,
        stretch_seconds=stretch_seconds,
    ):
        assert answer is None or isinstance(answer, ClearStretch)
        yield answer


class HelpedScan(Protocol):
    """What ``helped_scan`` asks of a search (``log_search._Search``)."""

    offset: int
    stopped: StopReason | None
    start: Cursor
    budget: ScanBudget
    literals: tuple[bytes, ...] | None
    pattern: SearchPattern
    sizes: Any

    def should_stop(self, offset: int, *, out_of_bytes: bool = False) -> bool: ...

    def pass_run(self, offset: int, length: int, newlines: int | None) -> None: ...


_TAIL_BYTES = 64 * 1024


def helped_scan(
    scan: HelpedScan, handle: BinaryIO, total: int, processes: int, read: Callable[[int, int | None], None]
) -> bool:
    """Move ``scan`` on through the log with helpers. The desk reads the first eighth of a stretch alone, then a
    stretch of its own while they start on the next ones (a search that finds its matches early never waits for
    them); then it moves past each stretch up to its first candidate line by the helper's count, and
    ``read(start, end)`` (the desk's own reading and scanning) from there to the stretch's end. Returns where the
    helpers stop helping (none free, one failed, the log changed, a budget is near, the scan stopped): the caller
    reads on from ``scan.offset`` if the scan has not stopped. True when the scan would have used helpers that
    are not there yet: the caller starts them once its answer is made (``HELPERS.start``), so they never take a
    core from the search that needed them, and the next one finds them ready."""
    assert scan.literals is not None
    tail = os.pread(handle.fileno(), min(_TAIL_BYTES, total), total - min(_TAIL_BYTES, total))
    until = total - len(tail) + tail.rfind(b"\n") + 1  # the last line's end: helpers give only whole lines
    early = line_start_at(handle.fileno(), scan.offset + scan.sizes.stretch_bytes // 8)
    if early is None or until - early < 2 * scan.sizes.stretch_bytes:
        return False
    # A search whose matches are in the log's first megabytes (the first 50 of ERROR) neither asks nor starts a
    # helper: they would only take CPU from it.
    read(scan.offset, early)
    if scan.stopped is not None or scan.offset != early:
        return False
    own = line_start_at(handle.fileno(), scan.offset + scan.sizes.stretch_bytes)  # the desk's own first stretch
    if own is None or own >= until:
        return False
    if not HELPERS.ready(processes):
        return True  # not started, still starting or lent to a timeline: the desk reads alone
    with HELPERS.lent(processes) as helpers:
        if not helpers or not all([helper.ready() for helper in helpers]):
            return False  # taken meanwhile: the desk reads alone
        stretches = clear_stretches(
            helpers,
            handle,
            own,
            until,
            literals=scan.literals,
            undecodable=not scan.pattern.replacement_blind,
            read_bytes=scan.sizes.read_bytes,
            index_piece=scan.sizes.index_piece,
            should_stop=lambda: scan.should_stop(scan.offset),
            stretch_bytes=scan.sizes.stretch_bytes,
            stretch_seconds=lambda: stretch_due(scan.budget),
        )
        began = scan.offset
        try:
            _follow(scan, stretches, own, read)
        finally:
            stretches.close()
        _log.debug("search read with helpers", from_offset=began, to_offset=scan.offset, stopped=scan.stopped)
    return False


def _follow(
    scan: HelpedScan,
    stretches: Iterator[ClearStretch | None],
    own: int,
    read: Callable[[int, int | None], None],
) -> None:
    """Move ``scan`` on by the helpers' answers, reading itself its own first stretch (up to ``own``) and each
    stretch from its first candidate on."""
    for stretch in stretches:
        if stretch is None:  # the helpers have their first stretches: the desk reads its own meanwhile
            read(scan.offset, own)
            if scan.stopped is not None or scan.offset != own:
                return
            continue
        if not stretch.whole or stretch.begin != scan.offset:
            return  # the log changed under the helpers: the desk reads it itself
        if stretch.clear_until - scan.start.offset > scan.budget.max_bytes or scan.should_stop(scan.offset):
            return  # the byte budget ends within: the desk's own scan stops where it always does
        # Numbered on by the helper's count, without counting the runs the desk left uncounted before it.
        scan.pass_run(scan.offset, stretch.clear_until - scan.offset, stretch.newlines)
        if stretch.clear_until < stretch.end:
            read(stretch.clear_until, stretch.end)
            if scan.stopped is not None or scan.offset != stretch.end:
                return
