"""A search's quick pass over runs that hold no candidate line, for a pattern with literals.

Where no line holds one of the pattern's literals, a run needs nothing but to be read and passed: no windows, no
index hand-offs, no newline count (``log_search._Search.settle`` counts it if a later number needs it). This loop
reads a run into one buffer, finds the literals with a SIMD search and the long lines with ``log_runs.long_lines``
(and, when the pattern could match U+FFFD, the lines that are not UTF-8), and moves the scan past it; it stops at
the first run that may hold a candidate, which the search's full scan then reads. On a warm page cache it reads a
log about as fast as ripgrep does, most of it the copy out of the page cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Protocol

from incident_desk.core.search.run_indexes import RUN_INDEXES, RunIndex
from incident_desk.core.search.runs import Run, long_lines, undecodable_lines

Finder = Callable[[bytearray, bytes, int, int], int]


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


def skim(scan: Skimmed, fd: int, buffer: bytearray, end: int | None, *, undecodable: bool) -> int | None:
    """Move ``scan`` on over the runs from ``scan.offset`` (a line start) that hold no candidate line, up to
    ``end`` (a line start; None: the end of the file). Returns the end of the run it stopped at, which may hold
    one (``scan.offset`` is its start); None when it stopped for any other reason (the end, a line longer than
    ``buffer``, a budget), so that the full scan reads on from ``scan.offset`` and stops as it always does."""
    with memoryview(buffer) as view:
        while True:
            position = scan.offset
            room = len(buffer) if end is None else min(len(buffer), end - position)
            if room <= 0 or scan.should_stop(position):
                return None
            got = os.preadv(fd, [view[:room]], position)
            # At the end of the file (or of the part asked for) the last line is whole; else up to the last newline.
            length = got if got < room or position + got == end else buffer.rfind(b"\n", 0, got) + 1
            if not length or not scan.within_bytes(position + length):
                return None
            if any(find(buffer, literal, 0, length) >= 0 for find, literal in scan.searches):
                return position + length
            newlines, special = _known(scan, buffer, position, length, undecodable)
            if special:
                return position + length
            scan.pass_run(position, length, newlines)


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
