"""A log read in fixed stretches, each read, prefiltered and indexed by one thread while it is in that core's cache.

Copying a log out of the page cache and counting its newlines cost the search more than finding the pattern; done
by different threads, every byte also travels through memory twice and every run is handed over. Here the file is
cut into fixed stretches. Whoever reads one (the searching thread itself, or on a machine with cores to spare one
of two workers, see ``free_workers``) reads its run of whole lines with ``os.preadv`` into a buffer from a fixed
pool, looks for the first line where a raw match may be, publishes the run, and then counts its newlines and finds
its special lines while the bytes are still in cache. The search takes the runs in order and numbers lines from
the counts.

A stretch's run starts at the first line that starts in it and ends where the next stretch's run starts, both
found from the file alone, so stretches need nothing from each other. Where that fails (a line longer than the
slack of a buffer, a stretch no line starts in, a file that changed between two reads) the bytes in between are
read line by line by ``log_runs.runs``, so the runs handed on always join up exactly.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from incident_desk.core.helper_pool import usable_cores
from incident_desk.core.search.runs import HugeLine, RawReader, Run, runs

WORKERS = 2
# Buffers: one per worker, two read ahead, and two the search may still hold (the run it scans and the one before).
_POOL = WORKERS + 4
_PROBE_BYTES = 4096  # a first look for where a stretch's first line starts


def free_workers() -> int:
    """How many workers to read with: two when the machine has four cores or more and two of them idle besides
    the searching thread's, else none (the searching thread reads each stretch itself). On two cores, even an idle
    machine's, two workers measured slower than reading inline: the hand-offs cost more than the second core
    gives, most of all when a run's index is remembered and reading is nearly all the work. Linux says how many
    threads are runnable right now; elsewhere the last minute's load average stands in for it (with neither,
    Windows, two workers on four cores or more)."""
    cores = usable_cores()
    if cores < 4:
        return 0
    others = _runnable_elsewhere()
    return WORKERS if others is None or others <= cores - 3 else 0


def _runnable_elsewhere() -> float | None:
    """Threads running or ready to run on the machine besides the calling one, or None if not known."""
    try:
        # "0.52 0.48 0.40 2/731 12345": two threads runnable, this one among them.
        return int(Path("/proc/loadavg").read_bytes().split()[3].split(b"/")[0]) - 1
    except (OSError, IndexError, ValueError):
        pass
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


# A run's newline count (None: not counted yet, see ``log_search._Search.settle``) and its special lines (start, end).
Index = tuple[int | None, list[tuple[int, int]]]


@dataclass(frozen=True)
class PreparedRun(Run):
    """A run read by a worker: its index is computed after the run is handed on, so the search need not wait for
    it until it numbers a line. ``clear_until``: no line before this position holds a raw match."""

    index: Future[Index]
    clear_until: int


_GAP = "gap"  # no run of its own: no line starts in the stretch, or its run overflows a buffer
_END = "end"  # the stretch starts at or past the end of the file


class ParallelRuns:
    """The runs of a log from ``start`` (a line start) to ``end`` (a line start; None: the end of the file), read
    ahead in stretches by two workers.

    ``index(run)`` and ``clear_until(buffer, length)`` run on the workers.
    The search hands each run back with ``release`` once it is done with it; ``close`` waits for the workers.
    With ``workers`` 0 the calling thread reads each stretch itself, one ahead, and indexes it at once.
    """

    def __init__(
        self,
        handle: RawReader,
        start: int,
        read_bytes: int,
        index: Callable[[Run], Index],
        clear_until: Callable[[bytearray, int], int],
        workers: int = WORKERS,
        end: int | None = None,
    ) -> None:
        self.handle, self.fd, self.start, self.read_bytes = handle, handle.fileno(), start, read_bytes
        self.end = end
        # A run may go past its stretch by the slack: the line that crosses into the next stretch.
        self.stride = read_bytes - read_bytes // 8
        self.index, self.clear_until = index, clear_until
        self.free: list[bytearray] = []
        self.unmade = _POOL  # buffers are made as the reading gets ahead: a search that stops early makes few
        self.workers = None if not workers else ThreadPoolExecutor(workers, thread_name_prefix="log-read")
        self.ahead: deque[tuple[bytearray, Future[PreparedRun | str]]] = deque()
        self.next_stretch = 0

    def release(self, run: Run) -> None:
        """The search is done with ``run``: its buffer may be read into again."""
        if isinstance(run, PreparedRun):
            self.free.append(run.buffer)

    def close(self) -> None:
        """Stop reading ahead; return once no worker touches a buffer or the file any more."""
        if self.workers is not None:
            self.workers.shutdown(wait=True, cancel_futures=True)
        self.ahead.clear()

    def runs(self) -> Iterator[Run | HugeLine]:
        """Whole runs in file order, joined up exactly: each starts where the one before ended."""
        position = self.start
        while True:
            while (self.free or self.unmade) and (self.workers is not None or not self.ahead):
                if not self.free:
                    self.free.append(bytearray(self.read_bytes))
                    self.unmade -= 1
                buffer = self.free.pop()
                published: Future[PreparedRun | str] = Future()
                if self.workers is not None:
                    self.workers.submit(self._prepare, self.next_stretch, buffer, published)
                else:
                    self._prepare(self.next_stretch, buffer, published)
                self.ahead.append((buffer, published))
                self.next_stretch += 1
            buffer, published = self.ahead.popleft()
            result = published.result()
            if not isinstance(result, PreparedRun):
                self.free.append(buffer)
                if result == _END:
                    if os.fstat(self.fd).st_size > position and (self.end is None or self.end > position):
                        yield from self._line_by_line(position, self.end)
                    return
                continue
            if result.offset < position:  # the file changed under the reads: this run is stale
                self.free.append(buffer)
                continue
            if result.offset > position:
                yield from self._line_by_line(position, result.offset)
            yield result
            position = result.offset + result.length

    def _line_by_line(self, start: int, end: int | None) -> Iterator[Run | HugeLine]:
        """The bytes from ``start`` to ``end`` (a line start; None: the end of the file), read in order."""
        yield from runs(self.handle, start, self.read_bytes, end=end)

    def _prepare(self, stretch: int, buffer: bytearray, published: Future[PreparedRun | str]) -> None:
        """A worker's part: read the stretch's run, publish it with where its first raw match may be, index it."""
        index: Future[Index] = Future()
        try:
            result = self._read(stretch, buffer, index)
        except BaseException as exc:
            published.set_exception(exc)
            return
        published.set_result(result)
        if not isinstance(result, PreparedRun):
            return
        try:
            index.set_result(self.index(result))
        except BaseException as exc:
            index.set_exception(exc)

    def _read(self, stretch: int, buffer: bytearray, index: Future[Index]) -> PreparedRun | str:
        begins = self.start + stretch * self.stride
        ends = begins + self.stride  # the run ends at the first line that starts at or after here
        if self.end is not None:
            if begins >= self.end:
                return _END
            ends = min(ends, self.end)
        first = self.start if stretch == 0 else self._first_line_start(begins, ends)
        if isinstance(first, str):
            return first
        room = len(buffer) if self.end is None else min(len(buffer), self.end - first)
        with memoryview(buffer) as view:
            got = os.preadv(self.fd, [view[:room]], first) if room > 0 else 0
        if not got:
            return _END
        newline = buffer.find(b"\n", ends - 1 - first, got)
        if newline >= 0:
            length = newline + 1
        elif got < room:
            length = got  # the file ends in this run
        else:
            return _GAP  # the line crossing into the next stretch is longer than the slack
        terminated = buffer[length - 1] == 0x0A
        return PreparedRun(first, buffer, length, terminated, index, self.clear_until(buffer, length))

    def _first_line_start(self, begins: int, ends: int) -> int | str:
        """The offset of the first line starting in ``begins``..``ends``, or _GAP or _END if none does."""
        position, size = begins - 1, _PROBE_BYTES
        while position < ends - 1:
            data = os.pread(self.fd, min(size, ends - 1 - position), position)
            if not data:
                return _END
            newline = data.find(b"\n")
            if newline >= 0:
                return position + newline + 1
            position += len(data)
            size = min(size * 4, self.read_bytes)
        return _GAP
