"""Acts that need no form: ``acknowledge_incident`` and ``add_incident_note``; and each incident's activity log
(``incident://{id}/activity`` and its twin ``get_incident_activity``). Every act is journalled with who did it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp
from incident_desk.core.acts import runs
from incident_desk.core.acts.runs import ActionRun
from incident_desk.core.incidents import DataError
from incident_desk.core.journal.activity import (
    MAX_ACTIVITY_EVENTS,
    MAX_NOTE_CHARS,
    Act,
    Event,
    format_activity,
    stamp,
)
from incident_desk.core.journal.audit import AuditError
from incident_desk.core.neighbours.untrusted import masked_line, masked_text
from incident_desk.core.outcomes import (
    ACKNOWLEDGED,
    ALREADY_ACKNOWLEDGED,
    NOT_ACKNOWLEDGED,
    NOTE_ADDED,
    NOTE_EMPTY,
    NOTE_NOT_ADDED,
    NOTE_TOO_LONG,
    Outcome,
)
from incident_desk.core.sources.silences import SilenceError
from incident_desk.identity import principal
from incident_desk.protocol import client_features
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, note, read

IncidentId = str


class ActivityEntry(BaseModel):
    time: datetime
    act: str = Field(description="acknowledge, note, resolve, silence, unsilence or postmortem")
    outcome: str = Field(description="done when the act took effect, else why it did not (declined, ...)")
    actor: str
    ticket: str | None
    text: str


WrittenOutActivityEntry = Annotated[ActivityEntry, results.written_out(ActivityEntry)]


class SilenceEntry(BaseModel):
    id: str
    until: datetime
    created_by: str
    comment: str


WrittenOutSilenceEntry = Annotated[SilenceEntry, results.written_out(SilenceEntry)]


class ActionRunEntry(BaseModel):
    time: datetime
    service: str
    action: str
    approver: str
    ticket: str | None
    ran: bool = Field(description="True when the action's command ran and exited 0")
    exit_status: int | None
    ending: str = Field(description="exit {code}, or why it has none (timed out, could not start)")


WrittenOutActionRunEntry = Annotated[ActionRunEntry, results.written_out(ActionRunEntry)]


class IncidentActivity(BaseModel):
    incident_id: str
    silences: list[WrittenOutSilenceEntry] = Field(
        default_factory=list, description="The silences muting its alert now, from its Alertmanager's own state"
    )
    events: list[WrittenOutActivityEntry] = Field(description="Oldest first")
    actions: list[WrittenOutActionRunEntry] = Field(
        default_factory=list,
        description="Runbook actions run on its service while it was open on this desk (run_service_action), "
        "oldest first",
    )


class AckReport(BaseModel):
    incident_id: str
    acknowledged: bool = Field(description="False when it had been acknowledged before")
    actor: str = Field(description="Who acknowledged it (first)")
    time: datetime


class NoteReport(BaseModel):
    incident_id: str
    actor: str
    time: datetime


def _entry(event: Event) -> ActivityEntry:
    return ActivityEntry(
        time=event.time,
        act=str(event.act),
        outcome=str(event.outcome),
        actor=event.actor,
        ticket=masked_line(event.ticket) if event.ticket else event.ticket,
        text=masked_text(event.text),
    )


def _run_entry(run: ActionRun) -> ActionRunEntry:
    return ActionRunEntry(
        time=run.time,
        service=run.service,
        action=run.action,
        approver=run.who,
        ticket=run.ticket,
        ran=run.ran,
        exit_status=run.exit_status,
        ending=run.ending,
    )


TOOLS = ToolKinds(acknowledge_incident=note(), add_incident_note=note(), get_incident_activity=read())


def register(server: MCPServer, app: DeskApp) -> None:
    async def _known(incident_id: str) -> str | None:
        """None when the incident exists, else the error text."""
        try:
            await app.incident(incident_id)
        except DataError as exc:
            return str(exc)
        return None

    @TOOLS.tool(server)
    async def acknowledge_incident(
        incidentId: IncidentId,
        ctx: Context,
        note: Annotated[str | None, Field(max_length=MAX_NOTE_CHARS)] = None,
    ) -> Annotated[CallToolResult, AckReport]:
        """Acknowledge an incident: journalled with who and when, no form."""
        if (problem := await _known(incidentId)) is not None:
            return results.error(problem)
        actor = principal.approver(ctx)
        try:
            standing = (await app.standings()).get(incidentId)
            if standing is not None and standing.acknowledged is not None:
                first = standing.acknowledged
                text = ALREADY_ACKNOWLEDGED.render(id=incidentId, actor=first.actor, time=stamp(first.time))
                return results.ok(
                    text, AckReport(incident_id=incidentId, acknowledged=False, actor=first.actor, time=first.time)
                )
            event = Event(
                desk=app.desk_name,
                incident_id=incidentId,
                act=Act.ACKNOWLEDGE,
                outcome=Outcome.DONE,
                actor=actor,
                text=note or "",
                protocol_era=client_features.view(ctx).era,
            )
            await app.record_event(event)
        except AuditError as exc:
            return results.error(NOT_ACKNOWLEDGED.render(error=exc))
        return results.ok(
            ACKNOWLEDGED.render(id=incidentId, actor=actor),
            AckReport(incident_id=incidentId, acknowledged=True, actor=actor, time=event.time),
        )

    @TOOLS.tool(server)
    async def add_incident_note(
        incidentId: IncidentId,
        text: Annotated[str, Field(description=f"The note, at most {MAX_NOTE_CHARS} characters")],
        ctx: Context,
    ) -> Annotated[CallToolResult, NoteReport]:
        """Add a note to an incident's activity log."""
        if len(text) > MAX_NOTE_CHARS:
            return results.error(NOTE_TOO_LONG.render(length=len(text), limit=MAX_NOTE_CHARS))
        if not text.strip():
            return results.error(NOTE_EMPTY.render())
        if (problem := await _known(incidentId)) is not None:
            return results.error(problem)
        actor = principal.approver(ctx)
        event = Event(
            desk=app.desk_name,
            incident_id=incidentId,
            act=Act.NOTE,
            outcome=Outcome.DONE,
            actor=actor,
            text=text,
            protocol_era=client_features.view(ctx).era,
        )
        try:
            await app.record_event(event)
        except AuditError as exc:
            return results.error(NOTE_NOT_ADDED.render(error=exc))
        return results.ok(
            NOTE_ADDED.render(id=incidentId, actor=actor),
            NoteReport(incident_id=incidentId, actor=actor, time=event.time),
        )

    async def _activity(incident_id: str) -> tuple[str, IncidentActivity]:
        """The activity log's text and structure; DataError, AuditError. Silences are read from the incident's
        Alertmanager (a silence made with amtool shows the same); one it cannot show is said, not hidden."""
        incident = await app.fresh_incident(incident_id)
        events = await app.activity(incident_id, MAX_ACTIVITY_EVENTS)
        lines, shown = [], []
        if incident.silenced_by:
            try:
                silences = await app.silences_of(incident)
            except SilenceError as exc:
                lines.append(f"silenced by {', '.join(incident.silenced_by)} (its end cannot be read: {exc})")
            else:
                for silence in silences:
                    shown.append(
                        SilenceEntry(
                            id=silence.id, until=silence.ends_at, created_by=silence.created_by, comment=silence.comment
                        )
                    )
                    lines.append(
                        f"silenced until {stamp(silence.ends_at)}Z by {silence.created_by} (silence {silence.id}): "
                        f"{silence.comment}"
                    )
        service_runs = await app.action_runs(incident, events)
        logged = runs.activity_lines(events, service_runs) or [format_activity(incident_id, events)]
        text = "\n".join([*lines, *logged])
        return text, IncidentActivity(
            incident_id=incident_id,
            silences=shown,
            events=[_entry(e) for e in events],
            actions=[_run_entry(run) for run in service_runs.runs],
        )

    @TOOLS.tool(server)
    async def get_incident_activity(incidentId: IncidentId) -> Annotated[CallToolResult, IncidentActivity]:
        """Who did what to an incident, oldest first, and the silences muting it."""
        try:
            text, structured = await _activity(incidentId)
        except (DataError, AuditError) as exc:
            return results.failed(exc)
        return results.ok(text, structured)

    @server.resource(
        "incident://{id}/activity",
        name="incident-activity",
        description="One incident's activity log on this desk (acknowledgements, notes, approvals, actions run), "
        "oldest first",
        mime_type="text/plain",
    )
    async def incident_activity(id: str) -> str:
        try:
            text, _ = await _activity(id)
        except (DataError, AuditError) as exc:
            raise results.resource_failure(exc) from None
        return text
