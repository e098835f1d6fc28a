"""The runbook actions a service ran, read back from the audit journal: what an incident's activity log and its
postmortem show beside the incident's own events.

An action's rows are the audit journal's rows of its service, each detail starting ``action <name>``. A restart's
rows hold the restart command's output, which could start the same way, so a run counts only after an approval row
of the same action and ticket: no restart row begins that way (its details are the desk's own words). Everything
read back is masked and made one line before it is shown. No MCP imports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from incident_desk.core.acts.service_actions import ACTION_NAME
from incident_desk.core.journal.activity import Act, Event, describe, stamp
from incident_desk.core.journal.audit import Decision
from incident_desk.core.neighbours.untrusted import one_line
from incident_desk.core.outcomes import Outcome

PREFIX = "action "
MAX_SHOWN_CHARS = 200  # of a name, a ticket or why a run failed, in one activity line
RUN_OUTCOMES = frozenset({Outcome.EXECUTED, Outcome.FAILED})


def detail(action: str, text: str) -> str:
    """The journal detail of one of ``action``'s rows: its name first, so the row can be told from a restart's."""
    return f"{PREFIX}{action}: {text}" if text else f"{PREFIX}{action}"


def action_of(text: str) -> str | None:
    """The action a row's detail names, or None (a restart's row)."""
    if not text.startswith(PREFIX):
        return None
    name = text[len(PREFIX) :].split("\n", 1)[0].split(":", 1)[0]
    return name if ACTION_NAME.fullmatch(name) else None


def _told(text: str, name: str) -> str:
    """What the row says after its action's name: for a failed run, why (the desk's own words, first line)."""
    rest = text[len(PREFIX) + len(name) :].removeprefix(": ")
    return rest.split("\n", 1)[0]


@dataclass(frozen=True)
class ActionRun:
    """One run of a runbook action: who approved it, under which ticket, and how it ended."""

    time: datetime
    service: str
    action: str
    who: str
    ticket: str | None
    ran: bool
    exit_status: int | None
    ending: str  # ``exit 0``, ``exit 3``, ``timed out after 120s; the command was killed``, ...

    def describe(self) -> str:
        """One line of the activity log, in its events' shape: time, what, by whom, under which ticket, how."""
        label = f"action {self.action} on {self.service}" + ("" if self.ran else " failed")
        ticket = f" under {self.ticket}" if self.ticket else ""
        return f"{stamp(self.time)}Z {label} by {self.who}{ticket}: {self.ending}"


def action_runs(decisions: Iterable[Decision], mask: Callable[[str], str]) -> list[ActionRun]:
    """The runs among one service's ``decisions`` (oldest first), each after its own action's approval; every text
    read back masked (``mask``: the desk's redactor) and made one line."""

    def shown(text: str) -> str:
        return one_line(mask(text), MAX_SHOWN_CHARS)

    approved: dict[str | None, str | None] = {}  # the action each ticket's last approval was for
    found: list[ActionRun] = []
    for row in decisions:
        name = action_of(row.detail)
        if row.outcome == Outcome.APPROVED:
            approved[row.ticket] = name
            continue
        if row.outcome not in RUN_OUTCOMES or name is None or approved.get(row.ticket) != name:
            continue
        ran = row.outcome == Outcome.EXECUTED
        told = _told(row.detail, name)
        ending = f"exit {row.exit_status}" if ran or not told else told
        found.append(
            ActionRun(
                time=row.time,
                service=shown(row.service),
                action=name,
                who=shown(row.approver),
                ticket=None if row.ticket is None else shown(row.ticket),
                ran=ran,
                exit_status=row.exit_status,
                ending=shown(ending),
            )
        )
    return found


@dataclass(frozen=True)
class ServiceRuns:
    """An incident's service's action runs while it was open; ``cut`` when only the journal's newest rows of the
    service were read (the older runs are then not all there, and the log says so)."""

    service: str
    runs: list[ActionRun]
    cut: bool = False

    def note(self) -> str | None:
        if not self.cut:
            return None
        service = one_line(self.service, MAX_SHOWN_CHARS)
        return f"(only the newest journal rows of {service} were read: older actions may be missing)"


def between(runs: Sequence[ActionRun], start: datetime, end: datetime | None) -> list[ActionRun]:
    """The runs from ``start`` on, up to ``end`` (when the incident was resolved) if given."""
    return [run for run in runs if run.time >= start and (end is None or run.time <= end)]


def resolved_at(events: Sequence[Event]) -> datetime | None:
    """When the incident was last resolved on this desk, from its events; None while it is not."""
    return max((e.time for e in events if e.took_effect and e.act == Act.RESOLVE), default=None)


def activity_lines(events: Sequence[Event], service_runs: ServiceRuns) -> list[str]:
    """The incident's events and its service's action runs as one log, oldest first."""
    dated = [(event.time, describe(event)) for event in events]
    dated += [(run.time, run.describe()) for run in service_runs.runs]
    lines = [line for _, line in sorted(dated, key=lambda pair: pair[0].astimezone(UTC))]
    note = service_runs.note()
    return [note, *lines] if note is not None else lines
