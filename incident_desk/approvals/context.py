"""What the approval page shows of the incident behind an approval: read through the DeskApp when the page is shown.

The pending approval carries only its act and target (text); the incident is looked up here, so the page shows its
state now rather than when the question was asked. The target is the incident for the incident acts, and the
service for a restart or an action: then the newest open incident of that service, when there is one.

Everything here runs in a worker thread of whichever event loop serves the page (the loopback page has its own), so
it uses the DeskApp's synchronous reads only. Log lines are masked by the desk's redaction before they are cut.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from incident_desk.app import DeskApp
from incident_desk.core.incidents import Incident
from incident_desk.core.journal.activity import standings, state_of
from incident_desk.core.neighbours.untrusted import one_line
from incident_desk.core.search.paging import read_tail

log = structlog.get_logger(__name__)

ERROR_LINES = 5
LINE_CHARS = 160  # one line at desktop width; the page's CSS ends it with an ellipsis on a phone
TAIL_LINES = 2000
TAIL_BYTES = 256 * 1024
ERROR_WORDS = ("ERROR", "FATAL", "CRITICAL")


@dataclass(frozen=True)
class IncidentView:
    """The incident as the page shows it; ``problem`` says why its log could not be read."""

    id: str
    title: str
    state: str
    errors: tuple[str, ...] = ()
    problem: str | None = None


def _incident_for(app: DeskApp, target: str) -> Incident | None:
    incidents = app.sources.listing().incidents
    if target in incidents:
        return incidents[target]
    of_service = [i for i in incidents.values() if i.service == target and i.is_open]
    return max(of_service, key=lambda i: i.opened, default=None)


def _state(app: DeskApp, incident: Incident) -> str:
    events = app.journal.activity(incident.id, 500, ("acknowledge", "resolve"))
    return state_of(standings(reversed(events)).get(incident.id), silenced=bool(incident.silenced_by))


def _error_lines(app: DeskApp, incident_id: str) -> tuple[str, ...]:
    """The last few error lines of the log's tail, masked, each one visible line."""
    window = app.read_log(
        incident_id, lambda handle: read_tail(handle, max_lines=TAIL_LINES, max_bytes=TAIL_BYTES, redactor=app.redactor)
    )
    errors = [line for line in window.text.splitlines() if any(word in line for word in ERROR_WORDS)]
    return tuple(one_line(line.strip(), LINE_CHARS) for line in errors[-ERROR_LINES:])


def incident_view(app: DeskApp, target: str) -> IncidentView | None:
    """The incident behind ``target``, or None when there is none (a service with no open incident)."""
    incident = _incident_for(app, target)
    if incident is None:
        return None
    title = one_line(incident.title, 200)
    try:
        state = _state(app, incident)
    except Exception as exc:  # the page still shows the act; the state is a courtesy
        log.warning("approval page could not read the incident's state", incident=incident.id, error=str(exc))
        state = "unknown"
    try:
        return IncidentView(incident.id, title, state, _error_lines(app, incident.id))
    except Exception as exc:  # a log that cannot be read must not hide the question
        problem = one_line(app.redactor(str(exc)), 200)
        return IncidentView(incident.id, title, state, problem=f"its log could not be read: {problem}")
