"""What the template pass keeps of the lines it read: per masked line, its counts before and after the baseline's
end, and its first and last line.

A chunk's lines are masked (``masking``), split and counted by C-level builtins (``Counter``, ``dict(zip(...))``);
Python runs once per distinct masked line of the chunk, not per line. Which lines belong to the baseline (timed
before the baseline's end) is found by reading the times of a few lines: the chunk's last, then a bisection (logs
are written in time order; a line without a time takes the time of a timed line before it).
"""

from __future__ import annotations

import bisect
import functools
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from incident_desk.core.evidence.masking import mask_lines
from incident_desk.core.log_clock import line_moment, zone_minutes

if TYPE_CHECKING:
    from incident_desk.core.linear import LinearPattern

MAX_KEYS = 20_000  # distinct masked lines kept; lines beyond are counted as ``overflow``
MAX_KEY_BYTES = 400  # a masked line is cut to this for its key
_LOOK_BACK = 16  # lines looked at for a time before a line without one
# Per masked line: lines in the baseline, lines after it, the first line (1-based, or 0-based in a stretch), the
# first line's byte offset, the last line.
BASE, RECENT, FIRST, OFFSET, LAST = range(5)


@functools.cache
def _time_pattern() -> LinearPattern:
    from incident_desk.core.linear import LinearPattern

    return LinearPattern(rb"(?:(\d{4}-\d\d-\d\d)[T ])?(\d\d):(\d\d):(\d\d)(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?")


def line_time(line: bytes, anchor: datetime) -> float | None:
    """The POSIX time a line starts with (an ISO date-time, or ``HH:MM:SS`` nearest ``anchor``; UTC unless it
    ends in an offset), or None."""
    hit = _time_pattern().match(line)
    if hit is None:
        return None
    day_span, hour, minute, second, zone = hit[1:6]
    offset = zone_minutes(line[zone[0] : zone[1]]) if zone[0] >= 0 else 0
    if offset is None:
        return None
    try:
        day = date.fromisoformat(line[day_span[0] : day_span[1]].decode()) if day_span[0] >= 0 else None
        at = line_moment(
            day,
            int(line[hour[0] : hour[1]]),
            int(line[minute[0] : minute[1]]),
            int(line[second[0] : second[1]]),
            anchor,
            offset,
        )
    except (ValueError, OverflowError):
        return None
    return at.timestamp()


@dataclass(frozen=True)
class Boundary:
    """Where the baseline ends (POSIX seconds), and the incident's opening, which places a bare ``HH:MM:SS``."""

    baseline_end: float
    anchor: datetime


@dataclass
class Tally:
    """Masked lines and their counts over lines ``0 .. lines`` of a stretch (or of the log from its start)."""

    table: dict[bytes, list[int]] = field(default_factory=dict)
    lines: int = 0
    baseline_lines: int = 0
    overflow: int = 0  # lines whose masked form came after MAX_KEYS others

    def merge(self, other: Tally) -> None:
        """Add ``other``, the tally of the lines right after these."""
        table = self.table
        for key, row in other.table.items():
            mine = table.get(key)
            if mine is None:
                if len(table) >= MAX_KEYS:
                    self.overflow += row[BASE] + row[RECENT]
                    continue
                table[key] = [row[BASE], row[RECENT], row[FIRST] + self.lines, row[OFFSET], row[LAST] + self.lines]
            else:
                mine[BASE] += row[BASE]
                mine[RECENT] += row[RECENT]
                mine[LAST] = row[LAST] + self.lines
        self.lines += other.lines
        self.baseline_lines += other.baseline_lines
        self.overflow += other.overflow


def _time_near(lines: list[bytes], index: int, anchor: datetime) -> float | None:
    for at in range(index, max(-1, index - _LOOK_BACK), -1):
        found = line_time(lines[at], anchor)
        if found is not None:
            return found
    return None


class _Times:
    """A chunk's lines as a sequence of times for ``bisect`` (a line without one: the time before it, else 0)."""

    def __init__(self, lines: list[bytes], anchor: datetime) -> None:
        self.lines, self.anchor = lines, anchor

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> float:
        return _time_near(self.lines, index, self.anchor) or 0.0


def baseline_split(raw_lines: list[bytes], boundary: Boundary) -> int:
    """How many of the chunk's first lines are timed before the baseline's end (lines in time order)."""
    if not raw_lines:
        return 0
    last = _time_near(raw_lines, len(raw_lines) - 1, boundary.anchor)
    if last is None:
        return 0  # no time to tell by: none counts as baseline
    if last < boundary.baseline_end:
        return len(raw_lines)
    return bisect.bisect_left(_Times(raw_lines, boundary.anchor), boundary.baseline_end)


def _quick_split(chunk: bytes, lines: int, boundary: Boundary) -> int | None:
    """``baseline_split`` from the chunk's first and last lines alone, when their times settle it (most chunks lie
    wholly before or after the baseline's end); None when the lines must be looked at."""
    last = line_time(chunk[chunk.rfind(b"\n", 0, len(chunk) - 1) + 1 :], boundary.anchor)
    if last is not None and last < boundary.baseline_end:
        return lines
    first = line_time(chunk[: chunk.find(b"\n")], boundary.anchor)
    if last is not None and first is not None and first >= boundary.baseline_end:
        return 0
    return None


def _cut(keys: list[bytes]) -> list[bytes]:
    if max(map(len, keys)) <= MAX_KEY_BYTES:
        return keys
    return [key[:MAX_KEY_BYTES] for key in keys]


def _line_offsets(chunk: bytes) -> Any:
    """Each line's start in ``chunk`` (an array; only asked when a chunk has masked lines not seen before)."""
    import numpy as np

    newlines = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 0x0A)
    starts = np.empty(len(newlines), dtype=np.int64)
    starts[0:1] = 0
    starts[1:] = newlines[:-1] + 1
    return starts


def tally_chunk(chunk: bytes, offset: int, boundary: Boundary, into: Tally) -> None:
    """Add the lines of ``chunk`` (whole lines, at byte ``offset`` of the log, right after ``into``'s) to ``into``."""
    keys = mask_lines(chunk).split(b"\n")
    keys.pop()  # after the last newline
    if not keys:
        return
    keys = _cut(keys)
    split = _quick_split(chunk, len(keys), boundary)
    if split is None:
        split = baseline_split(chunk.split(b"\n", len(keys))[: len(keys)], boundary)
    counts = Counter(keys) if split == 0 else Counter(keys[split:])
    before = Counter(keys[:split]) if split else Counter()
    firsts = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1), strict=True))
    lasts = dict(zip(keys, range(len(keys)), strict=True))
    table, base = into.table, into.lines
    starts: Any = None
    for key, first in firsts.items():
        row = table.get(key)
        if row is None:
            if len(table) >= MAX_KEYS:
                into.overflow += counts[key] + before[key]
                continue
            if starts is None:
                starts = _line_offsets(chunk)
            table[key] = [before[key], counts[key], base + first, offset + int(starts[first]), base + lasts[key]]
        else:
            row[BASE] += before[key]
            row[RECENT] += counts[key]
            row[LAST] = base + lasts[key]
    into.lines += len(keys)
    into.baseline_lines += split
