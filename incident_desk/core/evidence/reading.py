"""A log read as chunks of whole lines, with lines too long to hold passed over (counted, never kept)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

CHUNK_BYTES = 1024 * 1024  # some 10 ms of masking: the budget is looked at this often
MAX_LINE_BYTES = 4 * 1024 * 1024  # a longer line is passed over as one line without a template


@dataclass(frozen=True)
class Piece:
    """Whole lines (``data``, each ending with a newline) at byte ``offset``; or, with ``data`` empty, ``skipped``
    bytes of an overlong line (``lines``: 1 where that line ended)."""

    offset: int
    data: bytes
    skipped: int = 0
    lines: int = 0


def pread_from(fd: int, offset: int, end: int) -> Callable[[int], bytes]:
    """Reads of ``fd`` by position from ``offset`` up to ``end`` (a helper's stretch; the shared offset untouched)."""
    at = offset

    def read(size: int) -> bytes:
        nonlocal at
        data = os.pread(fd, min(size, end - at), at) if at < end else b""
        at += len(data)
        return data

    return read


def pieces(read: Callable[[int], bytes], offset: int, chunk_bytes: int = CHUNK_BYTES) -> Iterator[Piece]:
    """The lines from ``offset`` on, read ``chunk_bytes`` at a time; a last line without a newline gets one."""
    held = b""
    in_long_line = False
    while True:
        data = read(chunk_bytes)
        if not data:
            if held and not in_long_line:
                yield Piece(offset, held + b"\n")
            elif in_long_line:
                yield Piece(offset, b"", skipped=len(held), lines=1)
            return
        if in_long_line:
            newline = data.find(b"\n")
            if newline < 0:
                yield Piece(offset, b"", skipped=len(data))
                offset += len(data)
                continue
            yield Piece(offset, b"", skipped=newline + 1, lines=1)
            offset += newline + 1
            data, in_long_line = data[newline + 1 :], False
        data = held + data if held else data
        cut = data.rfind(b"\n") + 1
        if cut:
            yield Piece(offset, data[:cut])
            offset += cut
        held = data[cut:]
        if len(held) > MAX_LINE_BYTES:
            yield Piece(offset, b"", skipped=len(held))
            offset += len(held)
            held, in_long_line = b"", True
