"""What changed in the incident index between two looks, for the clients subscribed to ``incident://index``.

A look is the sources' listing at one moment plus the end of each silence muting an open incident. The index
changed when an incident opened, closed, or was silenced or unsilenced; a silence that ends within
``SILENCE_WARNING`` is told once, as the same update. A source that is down keeps its last incidents (its alerts did
not resolve because the desk could not ask) and is reported once when it goes down and once when it is back, never
on every look. Pure bookkeeping, no I/O: the caller looks and tells.

No MCP imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from incident_desk.core.incidents import Incident, Listing

SILENCE_WARNING = timedelta(minutes=15)
SOURCE_PROBLEM = "source "


@dataclass(frozen=True)
class WatchStep:
    """One look's outcome: why the index changed (empty: it did not), and the sources that went down or came
    back since the look before."""

    changes: tuple[str, ...] = ()
    went_down: Mapping[str, str] = field(default_factory=dict)
    came_back: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def down_sources(listing: Listing) -> dict[str, str]:
    """Each source the listing could not ask, by name, with why."""
    return {
        problem.entry.removeprefix(SOURCE_PROBLEM): problem.reason
        for problem in listing.problems
        if problem.entry.startswith(SOURCE_PROBLEM)
    }


class IndexWatch:
    """The last look, and what the next one changed. The first look after :meth:`reset` only sets the baseline."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._open: dict[str, Incident] | None = None
        self._down: dict[str, str] = {}
        self._ends: dict[str, datetime] = {}
        self._warned: set[str] = set()

    @property
    def has_baseline(self) -> bool:
        return self._open is not None

    def unknown_silences(self, listing: Listing) -> dict[str, Incident]:
        """The silences muting an open incident whose end this watch does not know yet, each with an incident it
        mutes (to ask that incident's Alertmanager)."""
        wanted: dict[str, Incident] = {}
        for incident in listing.incidents.values():
            if incident.is_open:
                for silence_id in incident.silenced_by:
                    if silence_id not in self._ends:
                        wanted.setdefault(silence_id, incident)
        return wanted

    def step(self, listing: Listing, silence_ends: Mapping[str, datetime], now: datetime) -> WatchStep:
        """Take a look (``silence_ends``: the ends just read for :meth:`unknown_silences`) and say what changed."""
        self._ends.update(silence_ends)
        down = down_sources(listing)
        current = {key: incident for key, incident in listing.incidents.items() if incident.is_open}
        if self._open is not None:
            for key, incident in self._open.items():
                if incident.source in down and key not in current:
                    current[key] = incident  # not asked, so not resolved
        went_down = {name: reason for name, reason in down.items() if name not in self._down}
        came_back = tuple(sorted(name for name in self._down if name not in down))
        self._down = down
        baseline = self._open is None
        changes = [] if self._open is None else _index_changes(self._open, current)
        self._open = current
        muting = {silence_id for incident in current.values() for silence_id in incident.silenced_by}
        self._ends = {silence_id: end for silence_id, end in self._ends.items() if silence_id in muting}
        self._warned &= muting
        for silence_id, end in sorted(self._ends.items()):
            if silence_id not in self._warned and now < end <= now + SILENCE_WARNING:
                self._warned.add(silence_id)
                changes.append(f"silence {silence_id} ends at {end.isoformat()}")
        if baseline:
            return WatchStep((), went_down, came_back)  # the subscriber reads the index as it is now
        return WatchStep(tuple(changes), went_down, came_back)


def _index_changes(before: Mapping[str, Incident], after: Mapping[str, Incident]) -> list[str]:
    changes = [f"new {key}" for key in sorted(after.keys() - before.keys())]
    changes += [f"resolved {key}" for key in sorted(before.keys() - after.keys())]
    for key in sorted(before.keys() & after.keys()):
        was, now = set(before[key].silenced_by), set(after[key].silenced_by)
        if now - was:
            changes.append(f"silenced {key}")
        elif was - now:
            changes.append(f"unsilenced {key}")
    return changes
