"""Each incident's activity log: the acts, notes and approval decisions the desk journalled for it.

No MCP imports. An event belongs to one desk (``desk_name``), so desks sharing a journal never see each other's.
The state an incident shows (open, acknowledged, silenced, resolved) is derived from its events and, for
silences, from the Alertmanager's own state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from incident_desk.core.journal.fields import FIELD_LIMITS, WORDS_FIELDS, cut, kept_words, storable
from incident_desk.core.neighbours.untrusted import masked_line
from incident_desk.core.outcomes import EVENT_OUTCOMES, Outcome

# The most characters of a note: long enough for a hand-off, short enough to read in a list of events. A longer
# one is refused with its length, never cut, so no one's note is silently shortened.
MAX_NOTE_CHARS = 2000
EVENT_LIMITS: dict[str, int] = {
    "desk": 200,
    "incident_id": 200,
    "actor": FIELD_LIMITS["approver"],
    "ticket": FIELD_LIMITS["ticket"],
    "text": FIELD_LIMITS["detail"],
    "protocol_era": FIELD_LIMITS["protocol_era"],
}
MAX_ACTIVITY_EVENTS = 500

IncidentState = Literal["open", "acknowledged", "silenced", "resolved"]
STATES: tuple[IncidentState, ...] = ("open", "acknowledged", "silenced", "resolved")


class Act(StrEnum):
    ACKNOWLEDGE = "acknowledge"
    NOTE = "note"
    RESOLVE = "resolve"
    SILENCE = "silence"
    UNSILENCE = "unsilence"
    POSTMORTEM = "postmortem"


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Event:
    """One activity row. ``id`` is set only on events read back from the journal."""

    desk: str
    incident_id: str
    act: Act
    outcome: Outcome
    actor: str
    text: str = ""
    ticket: str | None = None
    protocol_era: str = ""
    time: datetime = field(default_factory=_now)
    nonce: str | None = None
    id: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "act", Act(self.act))
        outcome = Outcome(self.outcome)
        if outcome not in EVENT_OUTCOMES:
            raise ValueError(f"{outcome!r} is not an incident event's outcome")
        object.__setattr__(self, "outcome", outcome)
        for name, limit in EVENT_LIMITS.items():
            value = getattr(self, name)
            if value is not None:
                value = kept_words(value) if self.id is None and name in WORDS_FIELDS else value
                object.__setattr__(self, name, cut(storable(value), limit))
        if self.time.tzinfo is None or self.time.utcoffset() is None:
            raise ValueError("event time must be timezone-aware")
        object.__setattr__(self, "time", self.time.astimezone(UTC))

    @property
    def took_effect(self) -> bool:
        return self.outcome == Outcome.DONE


@dataclass(frozen=True)
class Counted:
    """One row of either journal bearing on an act limit (``core.acts.limits``): ``act`` is ``restart`` for the
    audit journal's rows, else the incident act; ``service`` a restart's (None for an incident act); ``who`` the
    person the row names; ``nonce`` an approval row's single-use nonce."""

    time: datetime
    act: str
    outcome: Outcome
    who: str
    service: str | None = None
    nonce: str | None = None


def counted_from_row(row: Sequence[object]) -> Counted:
    """A selected row (time, act, outcome, who, service, nonce)."""
    time, act, outcome, who, service, nonce = row
    moment = time if isinstance(time, datetime) else datetime.fromisoformat(str(time))
    return Counted(
        moment.astimezone(UTC),
        str(act),
        Outcome(str(outcome)),
        str(who),
        None if service is None else str(service),
        None if nonce is None else str(nonce),
    )


@dataclass(frozen=True)
class Standing:
    """What the journal says of one incident: who acknowledged it, and whether it was resolved."""

    acknowledged: Event | None = None
    resolved: Event | None = None


def standings(events: Iterable[Event]) -> dict[str, Standing]:
    """Each incident's standing from its events that took effect, oldest first (the first acknowledgement and the
    last resolution count)."""
    found: dict[str, Standing] = {}
    for event in events:
        if not event.took_effect:
            continue
        current = found.get(event.incident_id, Standing())
        if event.act == Act.ACKNOWLEDGE and current.acknowledged is None:
            current = Standing(event, current.resolved)
        elif event.act == Act.RESOLVE:
            current = Standing(current.acknowledged, event)
        found[event.incident_id] = current
    return found


def state_of(standing: Standing | None, *, silenced: bool) -> IncidentState:
    if standing is not None and standing.resolved is not None:
        return "resolved"
    if silenced:
        return "silenced"
    if standing is not None and standing.acknowledged is not None:
        return "acknowledged"
    return "open"


def stamp(moment: datetime) -> str:
    """A time as the texts show it (the caller adds the ``Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def describe(event: Event) -> str:
    """One line of the activity log."""
    when = stamp(event.time) + "Z"
    ticket = f" under {masked_line(event.ticket)}" if event.ticket else ""
    text = f": {shown_words(event.text)}" if event.text else ""
    label = str(event.act) if event.took_effect else f"{event.act} {event.outcome}"
    return f"{when} {label} by {event.actor}{ticket}{text}"


def shown_words(text: str) -> str:
    """An event's words as one visible line: masked again (a row may predate masking), its newlines spaces."""
    return masked_line(text.replace("\n", " "), EVENT_LIMITS["text"])


def event_from_row(row: Sequence[object]) -> Event:
    """A selected row (id, desk, time, incident_id, act, outcome, actor, text, ticket, protocol_era, nonce)."""
    row_id, desk, time, incident_id, act, outcome, actor, text, ticket, era, nonce = row
    moment = time if isinstance(time, datetime) else datetime.fromisoformat(str(time))
    return Event(
        desk=str(desk),
        incident_id=str(incident_id),
        act=Act(str(act)),
        outcome=Outcome(str(outcome)),
        actor=str(actor),
        text=str(text or ""),
        ticket=None if ticket is None else str(ticket),
        protocol_era=str(era or ""),
        time=moment,
        nonce=None if nonce is None else str(nonce),
        id=int(str(row_id)),
    )


def format_activity(incident_id: str, events: Sequence[Event]) -> str:
    if not events:
        return f"No activity recorded for {incident_id} on this desk yet."
    return "\n".join(describe(event) for event in events)
