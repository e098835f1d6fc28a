"""``resolve_incident``, ``silence_incident`` and ``unsilence_incident``: the approval flow of every act
(``approvals.flow``: the same form, both eras, bound to the act and its arguments, single use, timeout = no),
journal first. What is theirs: every outcome is an event in the incident's activity log with who answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated

import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp, NoSilences
from incident_desk.approvals import flow
from incident_desk.core import outcomes
from incident_desk.core.acts.approval import Approved, Entry
from incident_desk.core.acts.preview import (
    Preview,
    foreign_refusal,
    resolve_preview,
    silence_preview,
    unsilence_preview,
)
from incident_desk.core.incidents import DataError, Incident
from incident_desk.core.journal.activity import MAX_NOTE_CHARS, Act, Event, stamp, state_of
from incident_desk.core.journal.audit import AuditError
from incident_desk.core.neighbours.untrusted import masked_line
from incident_desk.core.outcomes import ActWords, Outcome
from incident_desk.core.sources.silences import SilenceError
from incident_desk.identity import principal
from incident_desk.protocol import client_features
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, act

log = structlog.get_logger(__name__)

IncidentId = Annotated[str, Field(description="Incident id, e.g. INC-1042")]


class ActReport(BaseModel):
    incident_id: str
    act: str = Field(description="resolve, silence or unsilence")
    outcome: str = Field(description="done when the act took effect, else why not (declined, timed_out, ...)")
    done: bool
    ticket: str | None
    actor: str
    reason: str | None = Field(description="Why the desk did not act, when it did not")
    silence_id: str | None = None
    until: datetime | None = Field(default=None, description="When the silence ends (Alertmanager's own state)")


class _Act:
    """One incident act's journal (the flow's recorder, writing activity events) and its report."""

    def __init__(self, app: DeskApp, ctx: Context, incident_id: str, act: Act, words: ActWords) -> None:
        self.app, self.ctx, self.incident_id, self.act, self.words = app, ctx, incident_id, act, words
        era = client_features.view(ctx).era

        async def write(entry: Entry) -> None:
            event = Event(
                desk=app.desk_name,
                incident_id=incident_id,
                act=act,
                outcome=entry.outcome,
                actor=entry.who,
                text=entry.detail,
                ticket=entry.ticket,
                protocol_era=era,
                nonce=entry.nonce,
            )
            await app.record_event(event)

        fields = {"incident": incident_id, "act": str(act)}
        self.record = flow.Recorder(
            write, principal.approver(ctx), said=("incident act", "incident act step"), fields=fields
        )

    @property
    def actor(self) -> str:
        return self.record.actor

    def report(self, outcome: Outcome, *, approver: str | None = None, **fields: object) -> ActReport:
        """The act's report; the actor is who answered (``approver``, which the flow passes, is the same)."""
        values: dict[str, object] = {"ticket": None, "reason": None, **fields}
        return ActReport.model_validate(
            {
                "incident_id": self.incident_id,
                "act": str(self.act),
                "outcome": str(outcome),
                "done": outcome == Outcome.DONE,
                "actor": self.actor,
                **values,
            }
        )

    async def approve(
        self,
        question: str,
        binding: dict[str, str],
        service: str | None,
        detail: str,
        *,
        preview: Callable[[], Awaitable[Preview]],
        because: str | None,
    ) -> Approved | CallToolResult | InputRequiredResult:
        """Ask through the flow with what the act will touch (``preview``, worked out again before it runs) and
        spend the approval (journalled with ``detail``): an approval to act on, or the result to return."""
        shown = await preview()
        asked = await flow.ask(
            self.ctx,
            self.app,
            self.record,
            self.words,
            question=question,
            preview=shown,
            binding=binding,
            target=self.incident_id,
            service=service,
            reason=binding.get("reason") or binding.get("resolution") or question,
            report=self.report,
            requested_because=because,
        )
        if not isinstance(asked, Approved):
            return asked
        if (changed := await flow.unchanged(self.record, self.words, asked, shown, await preview())) is not None:
            return changed
        if (replayed := await flow.spend(self.app, self.record, self.words, asked, service, detail)) is not None:
            return replayed
        return asked


TOOLS = ToolKinds(resolve_incident=act(), silence_incident=act(), unsilence_incident=act())


def register(server: MCPServer, app: DeskApp) -> None:
    async def _incident(incident_id: str, fresh: bool = False) -> Incident | CallToolResult:
        try:
            return await (app.fresh_incident(incident_id) if fresh else app.incident(incident_id))
        except DataError as exc:
            return results.error(str(exc))

    @TOOLS.tool(server)
    async def resolve_incident(
        incidentId: IncidentId,
        resolution: Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS, description="What resolved it")],
        ctx: Context,
        reason: flow.RequestReason = None,
    ) -> Annotated[CallToolResult, ActReport] | InputRequiredResult:
        """Mark an incident resolved, after a human approves in a form with a change ticket."""
        found = await _incident(incidentId)
        if isinstance(found, CallToolResult):
            return found
        acting = _Act(app, ctx, incidentId, Act.RESOLVE, outcomes.RESOLVE)
        shown = masked_line(resolution, MAX_NOTE_CHARS)  # the model's words: shown and kept masked
        question = f"Resolve {incidentId}? Resolution: {shown}"
        binding = {"tool": "resolve_incident", "incidentId": incidentId, "resolution": resolution}

        async def preview() -> Preview:
            standing = (await app.standings()).get(incidentId)
            return resolve_preview(found, state_of(standing, silenced=bool(found.silenced_by)))

        try:
            asked = await acting.approve(question, binding, found.service, shown, preview=preview, because=reason)
            if not isinstance(asked, Approved):
                return asked
            await acting.record(Outcome.DONE, ticket=asked.ticket, detail=shown)
        except AuditError as exc:
            return results.error(acting.words.journal_unwritable_text(exc))
        text = outcomes.RESOLVED.render(id=incidentId, ticket=asked.ticket, resolution=shown)
        return results.ok(text, acting.report(Outcome.DONE, ticket=asked.ticket))

    @TOOLS.tool(server)
    async def silence_incident(
        incidentId: IncidentId,
        minutes: Annotated[int, Field(ge=1, description="How long to silence its alert, in minutes (capped)")],
        reason: Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS, description="Why; kept as comment")],
        ctx: Context,
    ) -> Annotated[CallToolResult, ActReport] | InputRequiredResult:
        """Silence an Alertmanager incident's alert for some minutes (at most the desk's cap), after a human
        approves in a form with a change ticket."""
        found = await _incident(incidentId)
        if isinstance(found, CallToolResult):
            return found
        if not app.has_alerts(found):
            return results.error(f"{incidentId} comes from a folder, which has no alerts to silence")
        acting = _Act(app, ctx, incidentId, Act.SILENCE, outcomes.SILENCE)
        capped = min(minutes, app.settings.max_silence_minutes)
        alert = masked_line(dict(found.labels).get("alertname", found.title), 200)
        kept = masked_line(reason, MAX_NOTE_CHARS)  # the model's words: shown, sent as the comment, kept masked
        until = datetime.now(UTC) + timedelta(minutes=capped)
        question = (
            f"Silence {incidentId} ({alert} on {found.service}) for {capped} minutes? "
            f"Its alerts stay silent until {stamp(until)}Z."
        )
        binding = {"tool": "silence_incident", "incidentId": incidentId, "minutes": str(minutes), "reason": reason}

        async def preview() -> Preview:
            return silence_preview(found.labels, await app.alerts_silenced_by_labels(found))

        try:
            asked = await acting.approve(question, binding, found.service, kept, preview=preview, because=reason)
            if not isinstance(asked, Approved):
                return asked
            ends = datetime.now(UTC) + timedelta(minutes=capped)
            comment = f"{kept} (ticket {asked.ticket}; incident-desk {incidentId})"
            try:
                silence_id, _ = await app.silence(found, ends, acting.actor, comment)
            except (SilenceError, NoSilences) as exc:
                await acting.record(Outcome.FAILED, ticket=asked.ticket, detail=str(exc))
                return results.error(outcomes.ACT_FAILED[acting.words.verb].render(error=exc))
            await acting.record(Outcome.DONE, ticket=asked.ticket, detail=f"silence {silence_id} until {stamp(ends)}Z")
        except AuditError as exc:
            return results.error(acting.words.journal_unwritable_text(exc))
        text = outcomes.SILENCED.render(id=incidentId, until=stamp(ends), ticket=asked.ticket, silence_id=silence_id)
        if capped < minutes:
            text += f"\n{minutes} minutes asked; silences are capped at {capped} minutes (max_silence_minutes)"
        report = acting.report(Outcome.DONE, ticket=asked.ticket, silence_id=silence_id, until=ends)
        return results.ok(text, report)

    @TOOLS.tool(server)
    async def unsilence_incident(
        incidentId: IncidentId,
        ctx: Context,
        include_foreign: Annotated[
            bool,
            Field(description="Also lift silences someone else made (a maintenance silence may cover many alerts)"),
        ] = False,
        reason: flow.RequestReason = None,
    ) -> Annotated[CallToolResult, ActReport] | InputRequiredResult:
        """Lift the silences this desk made on an Alertmanager incident's alert (with include_foreign, anyone's),
        after a human approves in a form with a change ticket; the human sees every alert it unsilences."""
        found = await _incident(incidentId, fresh=True)
        if isinstance(found, CallToolResult):
            return found
        if not app.has_alerts(found):
            return results.error(f"{incidentId} comes from a folder, which has no alerts to silence")
        if not found.silenced_by:
            return results.error(f"{incidentId} is not silenced")
        acting = _Act(app, ctx, incidentId, Act.UNSILENCE, outcomes.UNSILENCE)
        binding = {"tool": "unsilence_incident", "incidentId": incidentId, "include_foreign": str(include_foreign)}
        try:
            targets = await app.silence_targets(found)
        except (SilenceError, NoSilences) as exc:
            return results.error(outcomes.ACT_FAILED[acting.words.verb].render(error=exc))
        foreign = [target for target in targets if not target.made_here]
        if foreign and not include_foreign:
            # Nobody is asked: lifting someone's maintenance silence is not what the call can mean by default.
            refusal = acting.words.refusal(foreign_refusal(foreign[0]))
            await acting.record(Outcome.REFUSED_FOREIGN, detail=refusal)
            return results.ok(refusal, acting.report(Outcome.REFUSED_FOREIGN, reason=refusal))
        ids = ", ".join(target.silence_id for target in targets)

        async def preview() -> Preview:
            fresh = await app.fresh_incident(incidentId)
            return unsilence_preview(await app.silence_targets(fresh))

        try:
            asked = await acting.approve(
                f"Lift the silence on {incidentId}?", binding, found.service, ids, preview=preview, because=reason
            )
            if not isinstance(asked, Approved):
                return asked
            try:
                for target in targets:
                    await app.expire_silence(found, target.silence_id)
            except (SilenceError, NoSilences) as exc:
                await acting.record(Outcome.FAILED, ticket=asked.ticket, detail=str(exc))
                return results.error(outcomes.ACT_FAILED[acting.words.verb].render(error=exc))
            await acting.record(Outcome.DONE, ticket=asked.ticket, detail=f"silence {ids} expired")
        except AuditError as exc:
            return results.error(acting.words.journal_unwritable_text(exc))
        text = outcomes.UNSILENCED.render(id=incidentId, silence_id=ids)
        return results.ok(text, acting.report(Outcome.DONE, ticket=asked.ticket, silence_id=ids))
