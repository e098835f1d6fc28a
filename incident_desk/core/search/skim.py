"""A search's quick pass over runs that hold no candidate line, for a pattern with literals.

Where no line holds one of the pattern's literals, a run needs nothing but to be read and passed: no windows, no
index hand-offs, no newline count (``log_search._Search.settle`` counts it if a later number needs it). This loop
reads a run into one buffer, finds the literals with a SIMD search and the long lines with ``log_runs.long_lines``
(and, when the pattern could match U+FFFD, the lines that are not UTF-8), and moves the scan past it; it stops at
the first run that may hold a candidate, which the search's full scan then reads.

Most of that time is the copy out of the page cache, which holds no interpreter lock. So once a skim has passed
a few runs, on two cores or more, a second thread skims the second half of what the skim is expected to cover
(``_Ahead``: the rest of the log for a search's first skim, else as far as its last skim went) while this one
skims the first. Here, the runs it passed are then passed in order, with the scan's own checks, and the skim goes
on from the first run it did not pass; if it is behind (a busy machine gave it no core), it is stopped there rather
than waited for, so a split skim is never slower than one thread by more than a run. What is found is the same
either way; the runs are cut at the second half's first line, so counts remembered from an unsplit scan past it
are counted again. On a warm page cache a skim of a log then reads it faster than ripgrep does.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from incident_desk.core.helper_pool import usable_cores
from incident_desk.core.search.run_indexes import RUN_INDEXES, RunIndex
from incident_desk.core.search.runs import Run, long_lines, undecodable_lines

Finder = Callable[[bytearray, bytes, int, int], int]

# Runs a skim passes before it splits what is left: most skims that end soon (a common word's first matches) end
# within them, so they never start a thread.
PASSED_BEFORE_SPLIT = 4
_DONE = None  # what the second thread queues last


class Skimmed(Protocol):
    """What ``skim`` asks of a search (``log_search._Search``)."""

    offset: int

    @property
    def log(self) -> tuple[int, int]: ...

    @property
    def searches(self) -> Sequence[tuple[Finder, bytes]]: ...

    def should_stop(self, offset: int, *, out_of_bytes: bool = False) -> bool: ...

    def within_bytes(self, end: int) -> bool: ...

    def pass_run(self, offset: int, length: int, newlines: int | None) -> None: ...


class _Reached:
    """``_skim_runs`` stopped where it was asked to, with nothing decided."""


REACHED = _Reached()


def skim(
    scan: Skimmed,
    fd: int,
    buffer: bytearray,
    end: int | None,
    *,
    undecodable: bool,
    split_bytes: int = 0,
    expected: int | None = None,
) -> int | None:
    """Move ``scan`` on over the runs from ``scan.offset`` (a line start) that hold no candidate line, up to
    ``end`` (a line start; None: the end of the file). Returns the end of the run it stopped at, which may hold
    one (``scan.offset`` is its start); None when it stopped for any other reason (the end, a line longer than
    ``buffer``, a budget), so that the full scan reads on from ``scan.offset`` and stops as it always does.

    ``split_bytes``: when the skim is expected to cover at least this much more after its first runs, the second
    half is skimmed by a second thread (0: never); ``expected``: how far the search's last skim went (None: the
    first skim, expected to go to the end)."""
    began = scan.offset
    with memoryview(buffer) as view:
        first = _skim_runs(scan, fd, buffer, view, end, undecodable, runs=PASSED_BEFORE_SPLIT if split_bytes else None)
        if not isinstance(first, _Reached):
            return first
        reach = None if expected is None else began + expected
        ahead = _Ahead.start(scan, fd, len(buffer), end, undecodable, split_bytes, reach)
        if ahead is not None:
            try:
                until = _skim_runs(scan, fd, buffer, view, ahead.begins, undecodable)
                if not isinstance(until, _Reached):
                    return until
                if not ahead.pass_its_runs(scan):
                    return None
            finally:
                ahead.stop()
        rest = _skim_runs(scan, fd, buffer, view, end, undecodable)
        return None if isinstance(rest, _Reached) else rest


def _skim_runs(
    scan: Skimmed,
    fd: int,
    buffer: bytearray,
    view: memoryview,
    end: int | None,
    undecodable: bool,
    runs: int | None = None,
) -> int | _Reached | None:
    """``skim`` in this thread, up to ``end`` or for ``runs`` runs; REACHED when it got to ``end`` (not the
    file's end: None) or passed ``runs`` runs, with nothing else decided."""
    passed = 0
    while True:
        position = scan.offset
        if runs is not None and passed >= runs:
            return REACHED
        room = len(buffer) if end is None else min(len(buffer), end - position)
        if room <= 0:
            return REACHED if end is not None and position == end else None
        if scan.should_stop(position):
            return None
        got = os.preadv(fd, [view[:room]], position)
        length = _whole_lines(buffer, got, room, position, end)
        if not length or not scan.within_bytes(position + length):
            return None
        newlines, plain = _plain(scan, buffer, position, length, undecodable)
        if not plain:
            return position + length
        scan.pass_run(position, length, newlines)
        passed += 1


def _whole_lines(buffer: bytearray, got: int, room: int, position: int, end: int | None) -> int:
    """How much of ``got`` bytes read at ``position`` (``room`` asked) is the run: all of it at the end of the
    file or of the part asked for (the last line is whole), else up to the last newline. Both threads cut runs
    with it, so that a run is the same whoever reads it."""
    return got if got < room or position + got == end else buffer.rfind(b"\n", 0, got) + 1


def _plain(scan: Skimmed, buffer: bytearray, offset: int, length: int, undecodable: bool) -> tuple[int | None, bool]:
    """Whether the run in ``buffer`` holds no literal and no special line, and its newline count if known."""
    if any(find(buffer, literal, 0, length) >= 0 for find, literal in scan.searches):
        return None, False
    newlines, special = _known(scan, buffer, offset, length, undecodable)
    return newlines, not special


def _known(scan: Skimmed, buffer: bytearray, offset: int, length: int, undecodable: bool) -> tuple[int | None, bool]:
    """The run's remembered newline count (None if not known), and whether it has a special line: longer than a
    line is shown, or (``undecodable``) not UTF-8. A run never seen before is not hashed."""
    key = (*scan.log, offset, length)
    known: RunIndex | None = None
    if key in RUN_INDEXES.runs:
        known = RUN_INDEXES.get(key, RUN_INDEXES.digest(buffer, length))
    special = bool(known.long_lines) if known is not None else bool(long_lines(buffer, length))
    if not special and undecodable:
        if known is not None and known.undecodable is not None:
            special = bool(known.undecodable)
        elif not buffer[:length].isascii():
            special = bool(undecodable_lines(Run(offset, buffer, length, terminated=True)))
    return (known.newlines if known is not None else None), special


class _Ahead:
    """A second thread skimming from ``begins`` (a line start) to ``end``: it queues each plain run it reads,
    (offset, length, newlines), and stops at the first run that is not plain, at a short read, past the byte
    budget, or when told to. It decides nothing for the scan: the scan passes its runs itself."""

    def __init__(self, scan: Skimmed, fd: int, size: int, begins: int, end: int | None, undecodable: bool) -> None:
        self.begins = begins
        self._scan, self._fd, self._size, self._end, self._undecodable = scan, fd, size, end, undecodable
        self._runs: queue.SimpleQueue[tuple[int, int, int | None] | None] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._skim, name="log-skim-ahead", daemon=True)
        self._thread.start()

    @classmethod
    def start(
        cls,
        scan: Skimmed,
        fd: int,
        size: int,
        end: int | None,
        undecodable: bool,
        split_bytes: int,
        reach: int | None,
    ) -> _Ahead | None:
        """A second thread for the second half of what the skim is expected to cover (up to ``reach``; None: the
        end), or None: too little of it, one core, no line start within a buffer of its middle, or no thread."""
        if not split_bytes or not _cores_to_share():
            return None
        stop = os.fstat(fd).st_size if end is None else end
        covered = min(stop, reach) if reach is not None else stop
        if covered - scan.offset < split_bytes:
            return None
        # One read: a log whose middle is one long line is not read further here, outside the scan's budgets.
        middle = scan.offset + (covered - scan.offset) // 2
        newline = os.pread(fd, size, middle).find(b"\n")
        begins = middle + newline + 1
        if newline < 0 or begins >= stop:
            return None
        try:
            return cls(scan, fd, size, begins, end, undecodable)
        except RuntimeError:  # no thread to be had: the skim goes on alone
            return None

    def pass_its_runs(self, scan: Skimmed) -> bool:
        """Pass, in order, the runs the second thread found plain (it queues none past the byte budget), and stop
        it as soon as it has no more ready: the scan goes on alone from there rather than wait for it. False when
        the scan's time budget or a cancellation stopped it first."""
        for offset, length, newlines in self._queued():
            if scan.should_stop(offset):
                return False
            scan.pass_run(offset, length, newlines)
        return True

    def stop(self) -> None:
        """Stop the second thread and wait for it: it reads the search's file, which the search closes next."""
        self._stopping.set()
        self._thread.join()

    def _queued(self) -> Iterator[tuple[int, int, int | None]]:
        """The runs queued, in order: those ready now, then, once the thread is told to stop, the run it was on."""
        while True:
            try:
                found = self._runs.get_nowait()
            except queue.Empty:
                self.stop()  # it finishes the run it is on, and queues it
                found = self._runs.get()
            if found is _DONE:
                return
            yield found

    def _skim(self) -> None:
        scan, end = self._scan, self._end
        position = self.begins
        try:
            buffer = bytearray(self._size)
            with memoryview(buffer) as view:
                while not self._stopping.is_set():
                    room = len(buffer) if end is None else min(len(buffer), end - position)
                    if room <= 0:
                        return
                    got = os.preadv(self._fd, [view[:room]], position)
                    if got < room:  # the file's end (or a file cut short): left to the scan's own reads
                        return
                    length = _whole_lines(buffer, got, room, position, end)
                    if not length or not scan.within_bytes(position + length):
                        return
                    newlines, plain = _plain(scan, buffer, position, length, self._undecodable)
                    if not plain:
                        return
                    self._runs.put((position, length, newlines))
                    position += length
        except OSError:
            return  # the scan reads the same bytes itself and meets the error where it can report it
        finally:
            self._runs.put(_DONE)


def _cores_to_share() -> bool:
    """Whether this process has a second core for the second thread (``core.helper_pool.usable_cores``)."""
    return usable_cores() >= 2
