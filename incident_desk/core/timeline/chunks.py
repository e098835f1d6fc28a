"""The timeline's reading: a log cut into chunks of whole lines, counted by ``timeline_scan`` in a worker thread.

Chunks are read into a few reused buffers (no new bytes object per chunk) and counted in worker threads while the
caller's thread reads the next chunk (the kernel's array operations leave the interpreter lock). Results come
back in log order. A line longer than ``max_carry`` is skipped whole (reported as one unparsed line), never held.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO

from incident_desk.core.timeline.kernel import LINES_PER_PASS, ChunkLevels, Frame, levels_in
from incident_desk.core.timeline.scratch import Scratches

if TYPE_CHECKING:
    from incident_desk.core.linear import LinearPattern

# Threads counting chunks. One, with the caller's thread reading ahead, measured faster than two on a 2-core VM
# (a whole GiB in 1.30 s and 1.69 CPU s against 1.53 s and 2.14 CPU s, medians of six): two threads of short
# numpy calls hand the interpreter lock to each other thousands of times a second, which cost more than the
# second core gave. (The search found the same: ``log_parallel.free_workers``.)
WORKERS = 1


@dataclass
class Skipped:
    """Bytes of an overlong line passed over, and whether that line started here (it counts once)."""

    bytes: int
    lines: int


@dataclass
class Counted:
    """A chunk of whole lines at ``frame.buffer[1:size]`` and its counts; ``whole`` is False for the log's last
    line without a newline. The frame stays as it is until the next chunk is asked for."""

    frame: Frame
    size: int
    whole: bool
    levels: ChunkLevels


class ChunkBuffers:
    """Frames and scratch arrays kept from one pass to the next by a caller that makes many (a helper process):
    the same pages written again cost no page faults."""

    def __init__(self) -> None:
        self.scratches = Scratches()
        self._frames: list[Frame] = []
        self._capacity = 0

    def frames(self, capacity: int, count: int) -> deque[Frame]:
        if capacity != self._capacity:
            self._frames, self._capacity = [], capacity
        while len(self._frames) < count:
            self._frames.append(Frame(capacity))
        return deque(self._frames[:count])


def first_error_line(event: Counted, pattern: LinearPattern) -> tuple[int, int, bytes, Any] | None:
    """The chunk's first line that ``pattern`` (the first error's) matches: its index in the chunk, its offset in
    the chunk (after the frame's leading newline), the line with a newline before it, and the match."""
    buffer = event.frame.buffer
    for start, index in zip(event.levels.error_starts.tolist(), event.levels.error_lines.tolist(), strict=True):
        framed_line = bytes(buffer[start - 1 : buffer.find(b"\n", start)])
        hit = pattern.search(framed_line)
        if hit is not None:
            return index, start - 1, framed_line, hit
    return None


def _read_into(handle: BinaryIO, into: memoryview) -> int:
    """Read into the scan's own buffer where the handle can."""
    readinto = getattr(handle, "readinto", None)
    if readinto is not None:
        return int(readinto(into) or 0)
    data = handle.read(len(into))
    into[: len(data)] = data
    return len(data)


def counted_chunks(
    handle: BinaryIO,
    line: LinearPattern,
    *,
    chunk: int,
    max_carry: int,
    want_errors: Callable[[], bool],
    workers: int | None = None,
    lines_per_pass: int = LINES_PER_PASS,
    buffers: ChunkBuffers | None = None,
) -> Generator[Skipped | Counted, None, None]:
    """The log from the handle's position on, chunk by chunk in order. Stop asking at any point: the work still
    under way (at most one chunk per worker, and one read ahead) is waited for and dropped, so the next pass never
    runs beside it and memory stays that of one pass. ``workers``: threads counting at once (default
    ``WORKERS``; 0: the caller's thread counts each chunk as it reads it); ``lines_per_pass``: lines the kernel
    decides at once; ``buffers``: frames and scratch arrays to reuse (default: this pass's own)."""
    workers = WORKERS if workers is None else workers
    in_flight = workers + 1  # one chunk more than the workers count: read while they count
    kept = buffers or ChunkBuffers()
    frames = kept.frames(max_carry + chunk, in_flight + 1)
    pool = ThreadPoolExecutor(workers, thread_name_prefix="timeline") if workers else None
    scratches = kept.scratches  # each worker's own arrays, written into pass after pass
    # In log order: a skipped stretch, or a chunk's frame, size, wholeness and its counts (or their future).
    pending: deque[Skipped | tuple[Frame, int, bool, Future[ChunkLevels]]] = deque()
    frame = frames.popleft()
    held = 0  # bytes of an unfinished line at frame.buffer[1 : 1 + held]
    in_long_line = False
    ended = False
    try:
        while True:
            while not ended and len(pending) < in_flight:
                buffer = frame.buffer
                got = _read_into(handle, memoryview(buffer)[1 + held : 1 + held + chunk])
                if in_long_line:
                    newline = buffer.find(b"\n", 1, 1 + got)
                    skipped = got if newline < 0 else newline
                    pending.append(Skipped(skipped, 0))
                    if newline < 0:
                        ended = not got
                        continue
                    in_long_line, got = False, got - skipped
                    buffer[1 : 1 + got] = buffer[1 + skipped : 1 + skipped + got]
                    if not got:
                        continue
                end = 1 + held + got
                frame.end_data(end)
                if got:
                    size = buffer.rfind(b"\n", 1, end) + 1
                    if size == 0:
                        held = end - 1
                        if held >= max_carry:
                            pending.append(Skipped(held, 1))
                            held, in_long_line = 0, True
                        continue
                elif held:
                    size = end  # the log's last line, without a newline
                else:
                    ended = True
                    break
                count = partial(
                    levels_in,
                    frame,
                    size,
                    line,
                    want_errors=want_errors(),
                    lines_per_pass=lines_per_pass,
                    scratches=scratches,
                )
                if pool is None:
                    work: Future[ChunkLevels] = Future()
                    work.set_result(count())
                else:
                    work = pool.submit(count)
                pending.append((frame, size, bool(got), work))
                following = frames.popleft()
                held = end - size
                following.buffer[1 : 1 + held] = buffer[size:end]
                frame = following
                ended = not got
            if not pending:
                return
            first = pending.popleft()
            if isinstance(first, Skipped):
                yield first
                continue
            done_frame, done_size, whole, done = first
            yield Counted(done_frame, done_size, whole, done.result())
            frames.append(done_frame)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
