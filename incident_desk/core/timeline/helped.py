"""A timeline's share of the helper processes (``core.helper_pool``): counting one stretch of an open log.

``count_stretch`` is what a helper runs (pickled by name); ``stretch_counts`` asks the lent helpers for the counts
of a pass's stretches in log order. A helper loads this module, and with it numpy, RE2 and the kernel, before it
says it is ready (``warm_up``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from incident_desk.core.helper_pool import STRETCH_BYTES, Helper, Span, helped_stretches, line_start_at
from incident_desk.core.timeline.kernel import Key

if TYPE_CHECKING:
    from incident_desk.core.timeline.chunks import ChunkBuffers


def warm_up() -> None:
    """Load and compile what counting needs, so a helper's first stretch does not wait on it."""
    from incident_desk.core.timeline import kernel
    from incident_desk.core.timeline.patterns import patterns

    patterns()
    kernel.constants()


@dataclass(frozen=True)
class StretchCount:
    """What a helper counted: the lines starting in ``begin .. end`` (both line starts), their counts by key, and
    the first error's line (its index among them) and offset; ``whole`` is False when the log ended early (it was
    truncated or rewritten under the scan)."""

    begin: int
    end: int
    lines: int
    parsed: int
    counts: dict[Key, int]
    first_error: tuple[int, int] | None
    whole: bool = True


@functools.cache
def _kept_buffers() -> ChunkBuffers:
    """A helper's frames and scratch arrays, kept from stretch to stretch."""
    from incident_desk.core.timeline.chunks import ChunkBuffers

    return ChunkBuffers()


def count_stretch(fd: int, begin_at: int, end_at: int, want_errors: bool, chunk: int, max_carry: int) -> StretchCount:
    """Count the lines that start in ``begin_at .. end_at`` of the open log ``fd`` (read ``chunk`` bytes at a
    time; a line longer than ``max_carry`` is passed over as unparsed): a helper's work."""
    from incident_desk.core.timeline.chunks import Skipped, counted_chunks, first_error_line
    from incident_desk.core.timeline.counts import MinuteCounts
    from incident_desk.core.timeline.patterns import patterns

    begin, end = line_start_at(fd, begin_at), line_start_at(fd, end_at)
    if begin is None or end is None:
        return StretchCount(begin_at, end_at, 0, 0, {}, None, whole=False)
    end = max(begin, end)
    line_pattern, first_error_pattern = patterns()
    counts = MinuteCounts({})
    lines = parsed = done = 0
    first_error: tuple[int, int] | None = None
    span = Span(fd, begin, end)
    chunks = counted_chunks(
        span,  # type: ignore[arg-type]  # reads by position: only ``readinto`` is asked of a handle
        line_pattern,
        chunk=chunk,
        max_carry=max_carry,
        want_errors=lambda: want_errors and first_error is None,
        workers=0,  # a helper has a core of its own: no thread to hand chunks to
        buffers=_kept_buffers(),
    )
    with contextlib.closing(chunks):
        for event in chunks:
            if isinstance(event, Skipped):
                lines, done = lines + event.lines, done + event.bytes
                continue
            counts.add(event.levels)
            first = first_error_line(event, first_error_pattern) if want_errors and first_error is None else None
            if first is not None:
                first_error = (lines + first[0], begin + done + first[1])
            lines, parsed, done = lines + event.levels.lines, parsed + event.levels.parsed, done + event.size - 1
    return StretchCount(begin, end, lines, parsed, counts.as_dict(), first_error, whole=begin + done == end)


def stretch_counts(
    helpers: list[Helper],
    handle: BinaryIO,
    begin: int,
    end: int,
    *,
    want_errors: Callable[[], bool],
    should_stop: Callable[[], bool],
    chunk: int,
    max_carry: int,
    stretch_bytes: int = STRETCH_BYTES,
) -> Generator[StretchCount, None, None]:
    """The counts of ``begin .. end`` of the open log (``begin`` a line start), stretch by stretch in log order,
    from ``helpers`` (lent and ready; ``chunk`` and ``max_carry`` as ``counted_chunks`` takes them). Stops early
    when one fails or takes over ``STRETCH_SECONDS`` for a stretch (logged: the caller goes on counting itself)
    and when ``should_stop`` says so while it waits. Stop asking at any point."""
    for answer in helped_stretches(
        helpers,
        handle,
        begin,
        end,
        ask=lambda stretch_begin, stretch_end: (
            "run",
            count_stretch,
            (stretch_begin, stretch_end, want_errors(), chunk, max_carry),
        ),
        should_stop=should_stop,
        stretch_bytes=stretch_bytes,
    ):
        assert isinstance(answer, StretchCount)
        yield answer
