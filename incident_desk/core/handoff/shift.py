"""What one shift hands the next: the handoff's parts, drawn from the journal and the sources, and its text.

The text's sections come in a fixed order, the product's contract: the on-call line, then ``Open incidents``,
``Silences`` (each ``ends {time}Z``, and ``ENDS THIS SHIFT`` when that is within the shift's hours), ``Acts``,
``Pending approvals``, ``Changes``, ``Resolved``. Every field that came from a person, a journal or a neighbour
is untrusted: the gatherer passes it through :func:`visible` (masked, one visible capped line) before it gets
here.

No MCP imports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from incident_desk.core.handoff.oncall import OnCall
from incident_desk.core.journal.activity import Act, Event, stamp
from incident_desk.core.journal.audit import Decision
from incident_desk.core.neighbours.untrusted import one_line
from incident_desk.core.outcomes import Outcome

DEFAULT_HOURS = 12
MAX_HOURS = 7 * 24
MAX_FIELD_CHARS = 300
MAX_LINES_PER_SECTION = 50
ENDS_THIS_SHIFT = "ENDS THIS SHIFT"
Masker = Callable[[str], str]
SECTIONS = ("Open incidents", "Silences", "Acts", "Pending approvals", "Changes", "Resolved")
# A restart's or an action's rows that say something happened (its approval and its refusals are steps).
DONE_DECISIONS = frozenset({Outcome.EXECUTED, Outcome.SIMULATED, Outcome.FAILED})
# Rows that leave an out-of-band approval open: anything else about the same act closes it.
STILL_PENDING = frozenset({Outcome.APPROVAL_REQUESTED, Outcome.PAGE_OPENED, Outcome.REFUSED_SELF_APPROVAL})


def visible(mask: Masker, text: str, cap: int = MAX_FIELD_CHARS) -> str:
    """Untrusted ``text`` as the handoff shows it: secrets masked, then one visible line of at most ``cap``."""
    return one_line(mask(text), cap)


@dataclass(frozen=True)
class Note:
    time: datetime
    actor: str
    text: str


@dataclass(frozen=True)
class OpenIncident:
    id: str
    service: str
    title: str
    state: str
    acknowledged_by: str | None = None
    last_note: Note | None = None


@dataclass(frozen=True)
class SilenceShown:
    incident_id: str
    silence_id: str
    ends: datetime | None
    created_by: str
    comment: str
    ends_this_shift: bool
    problem: str | None = None  # its end could not be read


@dataclass(frozen=True)
class ActDone:
    time: datetime
    what: str  # "restart payments-api", "action rollback on payments-api", "silence INC-1"
    outcome: str
    who: str
    ticket: str | None
    detail: str = ""


@dataclass(frozen=True)
class PendingApproval:
    time: datetime
    what: str
    requester: str


@dataclass(frozen=True)
class ChangeShown:
    time: datetime
    service: str
    summary: str
    source: str


@dataclass(frozen=True)
class ResolvedIncident:
    time: datetime
    incident_id: str
    who: str
    ticket: str | None
    fix: str


@dataclass(frozen=True)
class Handoff:
    at: datetime
    hours: int
    on_call: OnCall
    service_on_call: tuple[tuple[str, OnCall], ...] = ()
    open_incidents: tuple[OpenIncident, ...] = ()
    silences: tuple[SilenceShown, ...] = ()
    acts: tuple[ActDone, ...] = ()
    pending: tuple[PendingApproval, ...] = ()
    changes: tuple[ChangeShown, ...] = ()
    resolved: tuple[ResolvedIncident, ...] = ()
    problems: tuple[str, ...] = field(default=())  # what could not be read (a source, the journal, a change source)

    @property
    def since(self) -> datetime:
        return self.at - timedelta(hours=self.hours)


def on_call_line(found: OnCall, label: str = "On call") -> str:
    """``On call: {who} until {time}Z; next: {who}``, or what kept the calendar from saying."""
    if found.who is None and found.problem is not None:
        return f"{label}: unknown -- {found.problem}"
    who = found.who or "nobody"
    until = f" until {stamp(found.until)}Z" if found.until is not None else ""
    line = f"{label}: {who}{until}; next: {found.next_who or 'nobody within the calendar'}"
    if found.problem is not None and found.stale_since is not None:
        line += f" (from the copy read at {stamp(found.stale_since)}Z: {found.problem})"
    return line


def _incident_line(incident: OpenIncident) -> str:
    line = f"- {incident.id} [{incident.state}] {incident.service}: {incident.title}"
    if incident.acknowledged_by:
        line += f"; acknowledged by {incident.acknowledged_by}"
    if incident.last_note is not None:
        note = incident.last_note
        line += f"; last note {stamp(note.time)}Z by {note.actor}: {note.text}"
    return line


def _silence_line(silence: SilenceShown) -> str:
    if silence.ends is None:
        return f"- {silence.incident_id}: silence {silence.silence_id}, its end cannot be read: {silence.problem}"
    flag = f" {ENDS_THIS_SHIFT}" if silence.ends_this_shift else ""
    comment = f": {silence.comment}" if silence.comment else ""
    return (
        f"- {silence.incident_id}: silence {silence.silence_id} by {silence.created_by} ends "
        f"{stamp(silence.ends)}Z{flag}{comment}"
    )


def _act_line(act: ActDone) -> str:
    ticket = f" under {act.ticket}" if act.ticket else ""
    outcome = "" if act.outcome in ("done", "executed") else f" ({act.outcome})"
    detail = f": {act.detail}" if act.detail else ""
    return f"- {stamp(act.time)}Z {act.what} by {act.who}{ticket}{outcome}{detail}"


def _section(title: str, lines: Sequence[str]) -> list[str]:
    shown = list(lines[:MAX_LINES_PER_SECTION])
    if len(lines) > MAX_LINES_PER_SECTION:
        shown.append(f"- … and {len(lines) - MAX_LINES_PER_SECTION} more")
    return [title, *(shown or ["- none"])]


def render(handoff: Handoff) -> str:
    """The handoff's text, its sections in the contract's order."""
    lines = [on_call_line(handoff.on_call)]
    lines += [on_call_line(found, f"On call for {service}") for service, found in handoff.service_on_call]
    lines.append(f"Shift: {handoff.hours}h back from {stamp(handoff.at)}Z and {handoff.hours}h ahead")
    bodies: list[list[str]] = [
        [_incident_line(incident) for incident in handoff.open_incidents],
        [_silence_line(silence) for silence in handoff.silences],
        [_act_line(act) for act in handoff.acts],
        [f"- {stamp(p.time)}Z {p.what} requested by {p.requester}" for p in handoff.pending],
        [f"- {stamp(c.time)}Z {c.service}: {c.summary} ({c.source})" for c in handoff.changes],
        [
            f"- {stamp(r.time)}Z {r.incident_id} by {r.who}{f' under {r.ticket}' if r.ticket else ''}: {r.fix}"
            for r in handoff.resolved
        ],
    ]
    for title, body in zip(SECTIONS, bodies, strict=True):
        lines += ["", *_section(title, body)]
    if handoff.problems:
        lines += ["", *_section("Not read", [f"- {problem}" for problem in handoff.problems])]
    return "\n".join(lines)


def ends_this_shift(ends: datetime, at: datetime, hours: int) -> bool:
    return ends <= at + timedelta(hours=hours)


def acts_in_window(
    events: Iterable[Event], decisions: Iterable[Decision], since: datetime, mask: Masker
) -> list[ActDone]:
    """The incident acts that took effect and the restarts and actions that ran (or failed) since ``since``,
    oldest first."""
    done: list[ActDone] = []
    for event in events:
        if event.time >= since and event.took_effect and event.act != Act.POSTMORTEM:
            text = event.text.split("\nrequested because:", 1)[0]
            done.append(
                ActDone(
                    event.time,
                    visible(mask, f"{event.act} {event.incident_id}"),
                    str(event.outcome),
                    visible(mask, event.actor),
                    visible(mask, event.ticket) if event.ticket else None,
                    visible(mask, text),
                )
            )
    for decision in decisions:
        if decision.time >= since and decision.outcome in DONE_DECISIONS:
            done.append(
                ActDone(
                    decision.time,
                    visible(mask, _decision_what(decision)),
                    str(decision.outcome),
                    visible(mask, decision.approver),
                    visible(mask, decision.ticket) if decision.ticket else None,
                )
            )
    return sorted(done, key=lambda act: act.time)


def _decision_what(decision: Decision) -> str:
    """``restart {service}``, or ``action {name} on {service}`` for a runbook action's row."""
    if decision.detail.startswith("action "):
        name = decision.detail.removeprefix("action ").split(":", 1)[0].split()[0]
        return f"action {name} on {decision.service}"
    return f"restart {decision.service}"


def pending_approvals(
    events: Iterable[Event], decisions: Iterable[Decision], at: datetime, timeout: timedelta, mask: Masker
) -> list[PendingApproval]:
    """Out-of-band approvals requested within ``timeout`` of ``at`` that no later row of the same act closed."""
    rows: list[tuple[datetime, str, Outcome, str]] = [
        (event.time, f"{event.act} {event.incident_id}", event.outcome, event.actor) for event in events
    ]
    rows += [(d.time, _decision_what(d), d.outcome, d.approver) for d in decisions]
    open_requests: dict[str, tuple[datetime, str]] = {}
    for time, what, outcome, who in sorted(rows, key=lambda row: row[0]):
        if outcome == Outcome.APPROVAL_REQUESTED:
            open_requests[what] = (time, who)
        elif outcome not in STILL_PENDING:
            open_requests.pop(what, None)
    return [
        PendingApproval(time, visible(mask, what), visible(mask, who))
        for what, (time, who) in sorted(open_requests.items(), key=lambda item: item[1][0])
        if time + timeout > at
    ]


def resolved_in_window(events: Iterable[Event], since: datetime, mask: Masker) -> list[ResolvedIncident]:
    return [
        ResolvedIncident(
            event.time,
            event.incident_id,
            visible(mask, event.actor),
            visible(mask, event.ticket) if event.ticket else None,
            visible(mask, event.text.split("\nrequested because:", 1)[0]) or "no resolution given",
        )
        for event in sorted(events, key=lambda e: e.time)
        if event.act == Act.RESOLVE and event.took_effect and event.time >= since
    ]


def last_notes(events: Iterable[Event]) -> dict[str, Event]:
    """Each incident's newest note (or acknowledgement with a note)."""
    found: dict[str, Event] = {}
    for event in sorted(events, key=lambda e: e.time):
        if event.took_effect and event.text and event.act in (Act.NOTE, Act.ACKNOWLEDGE):
            found[event.incident_id] = event
    return found


def utc_now() -> datetime:
    return datetime.now(UTC)
