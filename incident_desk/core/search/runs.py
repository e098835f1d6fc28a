"""A log read forward in runs of whole lines, and each run's index: its newline count and its special lines.

The search reads a log into two fixed buffers in turn, so memory stays flat whatever the log's size; a line longer
than a buffer is skipped to its end and kept only as a head. A run's index is computed off the scan's thread, by
numpy with the interpreter lock released.
"""

from __future__ import annotations

import codecs
import io
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from incident_desk.core.search.paging import MAX_LINE_BYTES

ROW = 4096  # long-line detection: a line over MAX_LINE_BYTES covers a whole aligned row of this size
_NEWLINE = 0x0A

RawReader = io.BufferedIOBase | io.RawIOBase


@dataclass(frozen=True)
class Run:
    """Whole lines at the start of ``buffer``: ``length`` bytes from file offset ``offset``.

    Every line ends with a newline, except the last one of the file when it has none (``terminated`` False).
    """

    offset: int
    buffer: bytearray
    length: int
    terminated: bool


@dataclass(frozen=True)
class HugeLine:
    """A line longer than the read buffer: its head (enough to show it cut) and its true length."""

    offset: int
    head: bytes
    length: int
    newline: bool


def runs(handle: RawReader, offset: int, read_bytes: int, end: int | None = None) -> Iterator[Run | HugeLine]:
    """The file from ``offset`` in runs of whole lines, read into two buffers in turn; up to ``end`` if given.

    A run stays valid until the second run after it is read: the search's indexer thread can still be counting
    one run's newlines while the next one is read and scanned.
    """
    handle.seek(offset)
    buffer, spare = bytearray(read_bytes), bytearray(read_bytes)
    filled = 0
    while True:
        room = len(buffer) if end is None else min(len(buffer), end - offset)
        if filled > room:  # a huge line's read went past the end
            filled = max(room, 0)
        with memoryview(buffer) as view:
            got = handle.readinto(view[filled:room]) or 0 if filled < room else 0
        filled += got
        if not got:
            if filled:
                yield Run(offset, buffer, filled, terminated=buffer[filled - 1] == _NEWLINE)
            return
        last_newline = buffer.rfind(b"\n", 0, filled)
        if last_newline < 0:
            if filled < len(buffer):
                continue
            huge, filled = _huge_line(handle, buffer, offset)
            yield huge
            offset += huge.length + 1
            if not huge.newline:
                return
            continue
        yield Run(offset, buffer, last_newline + 1, terminated=True)
        rest = filled - last_newline - 1
        spare[:rest] = buffer[last_newline + 1 : filled]
        buffer, spare = spare, buffer
        offset += last_newline + 1
        filled = rest


def _huge_line(handle: RawReader, buffer: bytearray, offset: int) -> tuple[HugeLine, int]:
    """Skip to the end of a line that fills the whole buffer; return it and how much of the next is buffered."""
    head = bytes(buffer[: MAX_LINE_BYTES + 1])
    length = len(buffer)
    while True:
        with memoryview(buffer) as view:
            got = handle.readinto(view) or 0
        if not got:
            return HugeLine(offset, head, length, newline=False), 0
        newline = buffer.find(b"\n", 0, got)
        if newline >= 0:
            rest = got - newline - 1
            buffer[:rest] = buffer[newline + 1 : got]
            return HugeLine(offset, head, length + newline, newline=True), rest
        length += got


def newlines_and_long_lines(run: Run, scratch: Any) -> tuple[int, list[tuple[int, int]]]:
    """How many newlines ``run`` holds, and where its lines longer than MAX_LINE_BYTES are (start, end).

    ``scratch``: a numpy bool array, reused by every call; the run is compared a piece of its size at a time.

    numpy counts at memory speed with the interpreter lock released (``bytes.count`` is a byte-at-a-time loop
    that holds it). A line longer than MAX_LINE_BYTES covers at least one whole aligned row of ROW bytes, so only
    rows without a newline need a closer look.
    """
    import numpy as np

    data = np.frombuffer(run.buffer, dtype=np.uint8, count=run.length)
    newline = np.uint8(_NEWLINE)  # a numpy scalar: a Python int would be converted on every comparison
    newlines = 0
    empty_rows: list[int] = []
    # A piece at a time into the same small scratch, which stays in the core's cache from the comparison to the
    # count and the row check (the whole run at once leaves the cache between them); reused, because fresh pages
    # cost more.
    piece_size = len(scratch)
    for piece_start in range(0, run.length, piece_size):
        piece = data[piece_start : piece_start + piece_size]
        is_newline = np.equal(piece, newline, out=scratch[: len(piece)])
        newlines += int(np.count_nonzero(is_newline))
        rows = len(piece) // ROW
        if rows:
            has_newline = is_newline[: rows * ROW].reshape(rows, ROW).any(axis=1)
            if not has_newline.all():
                empty_rows += (np.flatnonzero(~has_newline) + piece_start // ROW).tolist()
    del data
    long_lines: list[tuple[int, int]] = []
    end = 0
    for row in empty_rows:
        if row * ROW < end:
            continue
        start = run.buffer.rfind(b"\n", 0, row * ROW) + 1
        end = run.buffer.find(b"\n", row * ROW, run.length)
        end = run.length if end < 0 else end
        if end - start > MAX_LINE_BYTES:
            long_lines.append((start, end))
    return newlines, long_lines


def long_lines(buffer: bytearray, length: int) -> list[tuple[int, int]]:
    """Where the lines of ``buffer[:length]`` longer than MAX_LINE_BYTES are (start, end), without counting newlines.

    Each step looks back from MAX_LINE_BYTES past a line start for the last newline (a few bytes away in a log),
    which clears every line starting before it: some 128 steps a MiB, several times cheaper than a newline count,
    so a run without a candidate costs no count (``log_search._Search.settle`` counts only what a number needs).
    """
    found: list[tuple[int, int]] = []
    position = 0
    while length - position > MAX_LINE_BYTES:  # the line at ``position`` may be too long
        newline = buffer.rfind(b"\n", position, position + MAX_LINE_BYTES + 1)
        if newline >= 0:
            position = newline + 1
            continue
        end = buffer.find(b"\n", position + MAX_LINE_BYTES + 1, length)
        end = length if end < 0 else end
        found.append((position, end))
        position = end + 1
    return found


def undecodable_lines(run: Run) -> list[tuple[int, int]]:
    """The lines of ``run`` that are not valid UTF-8 (start, end): shown with U+FFFD where raw bytes are not."""
    found: list[tuple[int, int]] = []
    position = 0
    with memoryview(run.buffer) as view:
        while position < run.length:
            try:
                codecs.utf_8_decode(view[position : run.length], "strict", True)
            except UnicodeDecodeError as exc:
                bad = position + exc.start
                start = run.buffer.rfind(b"\n", position, bad) + 1 or position
                end = run.buffer.find(b"\n", bad, run.length)
                end = run.length if end < 0 else end
                found.append((start, end))
                position = end + 1
            else:
                break
    return found


class LineNumbers:
    """Line numbers within a run, counted from the last one asked for: only as far as a candidate or a stop.

    ``first_line`` gives the number of the run's first line, known once the run before it is finished (its
    newlines counted), so it is asked for only when a number is needed.
    """

    def __init__(self, buffer: bytearray, first_line: Callable[[], int]) -> None:
        self.buffer, self.position, self.first_line = buffer, 0, first_line
        self.line: int | None = None

    def at(self, position: int) -> int:
        """The number of the line starting at ``position`` (never before the last position asked for)."""
        if self.line is None:
            self.line = self.first_line()
        self.line += self.buffer.count(b"\n", self.position, position)
        self.position = position
        return self.line


class RunState:
    """A run being scanned: its index (newline count if known, and special lines) from the indexer thread, and
    its numbering."""

    def __init__(self, run: Run, index: Future[tuple[int | None, list[tuple[int, int]]]], numbers: LineNumbers) -> None:
        self.run, self.index, self.numbers = run, index, numbers
        self.special: list[tuple[int, int]] | None = None  # None: the index has not been waited for
        self.next_special = 0

    def newlines(self) -> int | None:
        """The run's newline count, or None when it was left uncounted (``log_search._Search.settle``)."""
        return self.index.result()[0]

    def specials_before(self, position: int) -> Iterator[tuple[int, int]]:
        """The special lines starting before ``position`` not yet considered, in order."""
        if self.special is None:
            self.special = self.index.result()[1]
        while self.next_special < len(self.special) and self.special[self.next_special][0] < position:
            self.next_special += 1
            yield self.special[self.next_special - 1]
