"""Where a chunk's lines start, a slice of it at a time, by array operations.

The newlines are marked by one compare of the bytes into the thread's mark bytes; read eight at a time, only the
words holding a newline are taken, and each one's first newline is found by a multiplication. A word holding more
(lines under eight bytes) is read again until none is left. The per-word arrays are the thread's scratch arrays
(``timeline_scratch``), so a slice allocates only the index of the words holding a newline.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from incident_desk.core.timeline.scratch import Scratch


def _np() -> Any:
    import numpy

    return numpy


def _byte_of(np: Any, lowest: Any) -> Any:
    """The index of the byte holding each word's one set bit (a bit at the bottom of its byte), in place of
    ``lowest``: the multiplication puts the index into the top byte."""
    lowest *= np.uint64(0x0001020304050607)
    lowest >>= np.uint64(56)
    return lowest.view(np.intp)


def line_starts(frame: Any, begin: int, end: int, scratch: Scratch) -> Any:
    """The starts of the lines in ``frame.buffer[begin:end]`` (``begin`` follows a newline), in ``scratch``."""
    np = _np()
    low, high = (begin - 1) & ~7, (end + 6) & ~7  # the newlines before each start: at begin - 1 .. end - 2
    marks = scratch.flags("line_marks", high - low)
    np.equal(frame.bytes[low:high], 0x0A, out=marks)
    marks[: begin - 1 - low] = False
    marks[end - 1 - low :] = False
    words = marks.view(np.uint64)
    holding = np.flatnonzero(np.not_equal(words, 0, out=scratch.flags("line_holds", len(words))))  # bools: fast
    count = len(holding)
    found = np.take(words, holding, out=scratch.u64("line_found", count), mode="clip")
    lowest = np.subtract(0, found, out=scratch.u64("line_lowest", count))
    lowest &= found
    found ^= lowest  # the newlines after each word's first
    starts = np.left_shift(holding, 3, out=scratch.intp("line_starts", count))
    starts += _byte_of(np, lowest)
    starts += low + 1
    if np.count_nonzero(found):  # lines under eight bytes: rare, so these arrays are made as needed
        more = np.flatnonzero(found != 0)
        extra = [starts.copy()]
        holding, rest = holding[more], found[more]
        while len(rest):
            lowest = rest & (np.uint64(0) - rest)
            extra.append((holding << 3) + _byte_of(np, lowest.copy()) + (low + 1))
            rest ^= lowest
            more = np.flatnonzero(rest)
            holding, rest = holding[more], rest[more]
        starts = np.sort(np.concatenate(extra))
    return starts


def line_slices(frame: Any, size: int, slice_bytes: int, scratch: Scratch) -> Iterator[Any]:
    """The starts of the lines of ``frame.buffer[1:size]``, for slices of about ``slice_bytes`` of whole lines
    (a longer line is a slice of its own). Each slice's starts are in ``scratch``: used up before the next."""
    begin = 1
    while begin < size:
        end = size
        if size - begin > slice_bytes:
            end = frame.buffer.rfind(b"\n", begin, begin + slice_bytes) + 1
            if end <= begin:
                end = frame.buffer.find(b"\n", begin + slice_bytes, size) + 1 or size
        yield line_starts(frame, begin, end, scratch)
        begin = end
