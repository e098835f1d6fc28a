"""A timeline pass's running counts per (day, minute, level), added to chunk by chunk without Python per minute.

The kernel hands most of a chunk's counts over as arrays of counts per slot (``minute * 8 + level``) of one day;
they are added into one growing window of slots per day, so a chunk that spans the hour costs a few array
additions, not a dictionary update per minute. Lines read by RE2 alone come as keys and are kept by key. The
counts become keys (``YYYY-MM-DD``, ``HH:MM``, level word) only when the pass ends.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from incident_desk.core.timeline.kernel import ChunkLevels, Key, minute_text
from incident_desk.core.timeline.layout import LEVEL_WORDS
from incident_desk.core.timeline.zones import MINUTE_CODES


def _np() -> Any:
    import numpy

    return numpy


class MinuteCounts:
    """Counts by key plus, per day, a window of slots (its first slot and an array of counts)."""

    def __init__(self, counts: dict[Key, int]) -> None:
        self.by_key: Counter[Key] = Counter(counts)
        self.windows: dict[bytes, tuple[int, Any]] = {}
        self.seen: dict[bytes, Any] = {}  # per day, whether the arrays counted each minute (HH * 100 + MM)

    def fresh_minutes(self, found: ChunkLevels) -> set[tuple[bytes, bytes]]:
        """The (day, minute) pairs a chunk's counts touch that its arrays did not touch before (and those of its
        lines read by RE2): most chunks of a log bring none, and then no Python runs per minute."""
        np = _np()
        minutes = {(day, hour_minute) for day, hour_minute, _ in found.counts}
        for day, lowest, counts in found.tallies:
            slots = (np.flatnonzero(counts) + lowest) >> 3  # in order: each minute's slots are adjacent
            # Distinct by comparing neighbours (np.unique would sort again, and loads numpy.ma on first use).
            present = slots[np.concatenate(([True], slots[1:] != slots[:-1]))] if len(slots) else slots
            seen = self.seen.get(day)
            fresh = present if seen is None else present[~seen[present]]
            minutes.update((day, minute_text(minute)) for minute in fresh.tolist())
        return minutes

    def add_counts(self, counts: dict[Key, int]) -> None:
        """Counts already by key (a helper process's, for a stretch of the log)."""
        self.by_key.update(counts)

    def minutes(self) -> set[tuple[bytes, bytes]]:
        """The (day, minute) pairs counted so far."""
        return {(day, hour_minute) for day, hour_minute, _ in self.as_dict()}

    def add(self, found: ChunkLevels) -> None:
        np = _np()
        self.by_key.update(found.counts)
        for day, lowest, counts in found.tallies:
            if day not in self.seen:
                self.seen[day] = np.zeros(MINUTE_CODES, dtype=np.bool_)
            self.seen[day][(np.flatnonzero(counts) + lowest) >> 3] = True
            start, window = self.windows.get(day, (lowest, None))
            if window is None:
                self.windows[day] = (lowest, counts.astype(np.int64))
                continue
            low, high = min(start, lowest), max(start + len(window), lowest + len(counts))
            if (low, high) != (start, start + len(window)):
                grown = np.zeros(high - low, dtype=np.int64)
                grown[start - low : start - low + len(window)] = window
                start, window = low, grown
            window[lowest - start : lowest - start + len(counts)] += counts
            self.windows[day] = (start, window)

    def as_dict(self) -> dict[Key, int]:
        np = _np()
        merged = Counter(self.by_key)
        for day, (start, window) in self.windows.items():
            present = np.flatnonzero(window)
            for slot, count in zip((present + start).tolist(), window[present].tolist(), strict=True):
                merged[(day, minute_text(slot >> 3), LEVEL_WORDS[slot & 7])] += count
        return dict(merged)
