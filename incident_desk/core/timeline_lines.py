"""Where a chunk's lines start, a slice of it at a time, by array operations.

The newlines are marked by one compare of the bytes into the frame's mark bytes; read eight at a time, only the
words holding a newline are taken, and each one's first newline is found by a multiplication. A word holding more
(lines under eight bytes) is read again until none is left. Slices of under a megabyte keep each array of line
starts under 128 KiB: glibc maps larger arrays anew each time, and every pass would page-fault them in again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def _np() -> Any:
    import numpy

    return numpy


def _byte_of(np: Any, lowest: Any) -> Any:
    """The index of the byte holding each word's one set bit (a bit at the bottom of its byte): the multiplication
    puts the index into the top byte."""
    return ((lowest * np.uint64(0x0001020304050607)) >> np.uint64(56)).astype(np.intp)


def line_starts(frame: Any, begin: int, end: int) -> Any:
    """The starts of the lines in ``frame.buffer[begin:end]`` (``begin`` follows a newline)."""
    np = _np()
    low, high = (begin - 1) & ~7, (end + 6) & ~7  # the newlines before each start: at begin - 1 .. end - 2
    marks = frame.marks[: high - low] if high - low <= len(frame.marks) else np.empty(high - low, dtype=np.bool_)
    np.equal(frame.bytes[low:high], 0x0A, out=marks)
    marks[: begin - 1 - low] = False
    marks[end - 1 - low :] = False
    words = marks.view(np.uint64)
    holding = np.flatnonzero(words != 0)
    found = words[holding]
    lowest = found & (np.uint64(0) - found)
    starts = (holding << 3) + _byte_of(np, lowest) + (low + 1)
    rest = found ^ lowest
    more = np.flatnonzero(rest)
    if len(more):
        extra = [starts]
        holding, rest = holding[more], rest[more]
        while len(rest):
            lowest = rest & (np.uint64(0) - rest)
            extra.append((holding << 3) + _byte_of(np, lowest) + (low + 1))
            rest ^= lowest
            more = np.flatnonzero(rest)
            holding, rest = holding[more], rest[more]
        starts = np.sort(np.concatenate(extra))
    return starts


def line_slices(frame: Any, size: int, slice_bytes: int) -> Iterator[Any]:
    """The starts of the lines of ``frame.buffer[1:size]``, for slices of about ``slice_bytes`` of whole lines
    (a longer line is a slice of its own)."""
    begin = 1
    while begin < size:
        end = size
        if size - begin > slice_bytes:
            end = frame.buffer.rfind(b"\n", begin, begin + slice_bytes) + 1
            if end <= begin:
                end = frame.buffer.find(b"\n", begin + slice_bytes, size) + 1 or size
        yield line_starts(frame, begin, end)
        begin = end
