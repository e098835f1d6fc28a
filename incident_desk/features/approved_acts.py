"""``resolve_incident``, ``silence_incident`` and ``unsilence_incident``: the human approval of ``restart_service``
(the same form, both eras, bound to the act and its arguments, single use, timeout = no), journal first.

The question and its answer go through ``client_features.ask_approval``; the verdict through ``core.approval``;
every outcome is an event in the incident's activity log with who answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated

import anyio
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp, NoSilences
from incident_desk.approvals import out_of_band
from incident_desk.core import outcomes
from incident_desk.core.acts import approval
from incident_desk.core.incidents import DataError, Incident
from incident_desk.core.journal.activity import MAX_NOTE_CHARS, Act, Event, stamp
from incident_desk.core.journal.audit import AuditError, DuplicateApproval
from incident_desk.core.outcomes import EVENT_OUTCOME_OF, ActWords, EventOutcome
from incident_desk.core.sources.silences import SilenceError
from incident_desk.identity import principal
from incident_desk.protocol import client_features
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.client_features import NoAnswerKind
from incident_desk.protocol.tool_kinds import ToolKinds, act

log = structlog.get_logger(__name__)

IncidentId = Annotated[str, Field(description="Incident id, e.g. INC-1042")]
# The journal outcome of a question that got no usable answer, by why.
_NO_ANSWER: dict[NoAnswerKind, EventOutcome] = {
    "timed_out": EventOutcome.TIMED_OUT,
    "disconnected": EventOutcome.DISCONNECTED,
    "client_error": EventOutcome.CLIENT_ERROR,
    "malformed": EventOutcome.CLIENT_ERROR,
}

# The journal outcome of each out-of-band approval step.
_STEP_OUTCOME: dict[out_of_band.Step, EventOutcome] = {
    "requested": EventOutcome.APPROVAL_REQUESTED,
    "opened": EventOutcome.PAGE_OPENED,
    "approved": EventOutcome.APPROVED,
    "declined": EventOutcome.DECLINED,
}


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


@dataclass(frozen=True)
class _Approved:
    ticket: str
    nonce: str
    journalled: bool = False  # the approval page already wrote the approval's row


class _Journal:
    """Writes the act's events as this actor, shielded from cancellation so none is lost."""

    def __init__(self, app: DeskApp, ctx: Context, incident_id: str, act: Act) -> None:
        self.app, self.incident_id, self.act = app, incident_id, act
        self.actor = principal.approver(ctx)
        self.era = client_features.view(ctx).era

    async def __call__(
        self, outcome: EventOutcome, *, ticket: str | None = None, text: str = "", nonce: str | None = None
    ) -> None:
        event = Event(
            desk=self.app.desk_name,
            incident_id=self.incident_id,
            act=self.act,
            outcome=outcome,
            actor=self.actor,
            text=text,
            ticket=ticket,
            protocol_era=self.era,
            nonce=nonce,
        )
        with anyio.CancelScope(shield=True):
            await self.app.record_event(event)
        log.info("incident act", incident=self.incident_id, act=str(self.act), outcome=str(outcome), ticket=ticket)

    async def step(self, row: out_of_band.StepRow) -> None:
        """An out-of-band approval's step, as ``row.who`` (the page's steps may come from its own thread and event
        loop: journal and log only)."""
        event = Event(
            desk=self.app.desk_name,
            incident_id=self.incident_id,
            act=self.act,
            outcome=_STEP_OUTCOME[row.step],
            actor=row.who or self.actor,
            text=row.detail,
            ticket=row.ticket,
            protocol_era=self.era,
            nonce=row.nonce,
        )
        with anyio.CancelScope(shield=True):
            await self.app.record_event(event)
        log.info("incident act step", incident=self.incident_id, act=str(self.act), outcome=str(event.outcome))

    def report(self, outcome: EventOutcome, **fields: object) -> ActReport:
        values: dict[str, object] = {"ticket": None, "reason": None, **fields}
        return ActReport.model_validate(
            {
                "incident_id": self.incident_id,
                "act": str(self.act),
                "outcome": str(outcome),
                "done": outcome == EventOutcome.DONE,
                "actor": self.actor,
                **values,
            }
        )


async def _approval(
    ctx: Context,
    app: DeskApp,
    journal: _Journal,
    words: ActWords,
    question: str,
    binding: dict[str, str],
    service: str | None,
) -> _Approved | CallToolResult | InputRequiredResult:
    """Ask the human (``restart_service``'s form and rules, in band or on the desk's page as the act's and the
    service's ``approval`` says); an approval, or the result to return as it is."""
    await app.check_journal_writable()
    form = client_features.ApprovalForm(question, approval.form_schema(words.what))
    timeout = app.settings.approval_timeout_seconds
    mode = app.settings.approval_for(words.verb, service)
    page_journalled = False  # the approval page wrote the decision's row itself
    try:
        if mode == "in-band":
            answer = await client_features.ask_approval(ctx, form, timeout=timeout, binding=binding)
        else:
            asked = await out_of_band.ask_out_of_band(
                ctx,
                app,
                act=words.verb,
                target=journal.incident_id,
                question=question,
                reason=binding.get("reason") or binding.get("resolution") or question,
                requester=journal.actor,
                mode=mode,
                binding=binding,
                journal=journal.step,
                requester_key=principal.approver_key(ctx),
            )
            if isinstance(asked, out_of_band.PageAnswer):
                journal.actor = asked.approver
                answer, page_journalled = asked.answer, asked.journalled
            elif isinstance(asked, client_features.PendingShown):
                pending = EventOutcome.APPROVAL_REQUESTED
                return results.ok(asked.text, journal.report(pending, reason=asked.text))
            else:
                answer = asked
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            try:
                await journal(EventOutcome.DISCONNECTED, text="the call was cancelled while the question was open")
            except AuditError as exc:
                log.error("audit journal write failed", error=str(exc))
        raise
    target = journal.incident_id
    if isinstance(answer, client_features.Ask):
        return answer.result
    if isinstance(answer, client_features.NoChannel):
        await journal(EventOutcome.REFUSED_NO_CHANNEL, text=answer.reason)
        refused = EventOutcome.REFUSED_NO_CHANNEL
        return results.ok(words.no_channel_text(target), journal.report(refused, reason=answer.reason))
    if isinstance(answer, client_features.StaleRound):
        await journal(EventOutcome.REFUSED_STALE, text=answer.reason)
        return results.error(words.refusal(answer.reason))
    if isinstance(answer, client_features.NoAnswer):
        outcome = _NO_ANSWER[answer.kind]
        await journal(outcome, text=answer.reason)
        text = words.timed_out_text(timeout) if answer.kind == "timed_out" else words.refusal(answer.reason)
        return results.ok(text, journal.report(outcome, reason=answer.reason))
    # The act's own text comes once it is done (a silence's id, say): the verdict's is not shown.
    verdict = approval.decide_act(words, answer.action, answer.content, lambda ticket: f"approved under {ticket}")
    if not verdict.approved:
        outcome = EVENT_OUTCOME_OF[verdict.outcome]
        if not page_journalled:
            await journal(outcome, ticket=verdict.ticket)
        return results.ok(verdict.text, journal.report(outcome, ticket=verdict.ticket, reason=verdict.text))
    assert verdict.ticket is not None
    return _Approved(ticket=verdict.ticket, nonce=answer.nonce, journalled=page_journalled)


async def _single_use(journal: _Journal, words: ActWords, approved: _Approved, text: str) -> str | None:
    """Journal the approval with its nonce before acting (unless the approval page did); a replayed answer is
    refused (the text to return)."""
    if approved.journalled:
        return None
    try:
        await journal(EventOutcome.APPROVED, ticket=approved.ticket, text=text, nonce=approved.nonce)
    except DuplicateApproval:
        await journal(EventOutcome.REFUSED_STALE, ticket=approved.ticket, text=f"replayed approval {approved.nonce}")
        return words.refusal(outcomes.REPLAYED)
    return None


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
    ) -> Annotated[CallToolResult, ActReport] | InputRequiredResult:
        """Mark an incident resolved, after a human approves in a form with a change ticket."""
        found = await _incident(incidentId)
        if isinstance(found, CallToolResult):
            return found
        journal = _Journal(app, ctx, incidentId, Act.RESOLVE)
        words = outcomes.RESOLVE
        try:
            asked = await _approval(
                ctx,
                app,
                journal,
                words,
                f"Resolve {incidentId}? Resolution: {resolution}",
                {"tool": "resolve_incident", "incidentId": incidentId, "resolution": resolution},
                found.service,
            )
            if not isinstance(asked, _Approved):
                return asked
            if (replayed := await _single_use(journal, words, asked, resolution)) is not None:
                return results.error(replayed)
            await journal(EventOutcome.DONE, ticket=asked.ticket, text=resolution)
        except AuditError as exc:
            return results.error(words.journal_unwritable_text(exc))
        text = outcomes.RESOLVED.render(id=incidentId, ticket=asked.ticket, resolution=resolution)
        return results.ok(text, journal.report(EventOutcome.DONE, ticket=asked.ticket))

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
        journal = _Journal(app, ctx, incidentId, Act.SILENCE)
        words = outcomes.SILENCE
        capped = min(minutes, app.settings.max_silence_minutes)
        alert = dict(found.labels).get("alertname", found.title)
        until = datetime.now(UTC) + timedelta(minutes=capped)
        question = (
            f"Silence {incidentId} ({alert} on {found.service}) for {capped} minutes? "
            f"Its alerts stay silent until {stamp(until)}Z."
        )
        binding = {"tool": "silence_incident", "incidentId": incidentId, "minutes": str(minutes), "reason": reason}
        try:
            asked = await _approval(ctx, app, journal, words, question, binding, found.service)
            if not isinstance(asked, _Approved):
                return asked
            if (replayed := await _single_use(journal, words, asked, reason)) is not None:
                return results.error(replayed)
            ends = datetime.now(UTC) + timedelta(minutes=capped)
            comment = f"{reason} (ticket {asked.ticket}; incident-desk {incidentId})"
            try:
                silence_id, _ = await app.silence(found, ends, journal.actor, comment)
            except (SilenceError, NoSilences) as exc:
                await journal(EventOutcome.FAILED, ticket=asked.ticket, text=str(exc))
                return results.error(outcomes.ACT_FAILED[words.verb].render(error=exc))
            await journal(EventOutcome.DONE, ticket=asked.ticket, text=f"silence {silence_id} until {stamp(ends)}Z")
        except AuditError as exc:
            return results.error(words.journal_unwritable_text(exc))
        text = outcomes.SILENCED.render(id=incidentId, until=stamp(ends), ticket=asked.ticket, silence_id=silence_id)
        if capped < minutes:
            text += f"\n{minutes} minutes asked; silences are capped at {capped} minutes (max_silence_minutes)"
        report = journal.report(EventOutcome.DONE, ticket=asked.ticket, silence_id=silence_id, until=ends)
        return results.ok(text, report)

    @TOOLS.tool(server)
    async def unsilence_incident(
        incidentId: IncidentId, ctx: Context
    ) -> Annotated[CallToolResult, ActReport] | InputRequiredResult:
        """Lift the silences on an Alertmanager incident's alert (made by the desk or anyone else), after a human
        approves in a form with a change ticket."""
        found = await _incident(incidentId, fresh=True)
        if isinstance(found, CallToolResult):
            return found
        if not app.has_alerts(found):
            return results.error(f"{incidentId} comes from a folder, which has no alerts to silence")
        if not found.silenced_by:
            return results.error(f"{incidentId} is not silenced")
        journal = _Journal(app, ctx, incidentId, Act.UNSILENCE)
        words = outcomes.UNSILENCE
        binding = {"tool": "unsilence_incident", "incidentId": incidentId}
        try:
            question = f"Lift the silence on {incidentId}?"
            asked = await _approval(ctx, app, journal, words, question, binding, found.service)
            if not isinstance(asked, _Approved):
                return asked
            ids = ", ".join(found.silenced_by)
            if (replayed := await _single_use(journal, words, asked, ids)) is not None:
                return results.error(replayed)
            try:
                for silence_id in found.silenced_by:
                    await app.expire_silence(found, silence_id)
            except (SilenceError, NoSilences) as exc:
                await journal(EventOutcome.FAILED, ticket=asked.ticket, text=str(exc))
                return results.error(outcomes.ACT_FAILED[words.verb].render(error=exc))
            await journal(EventOutcome.DONE, ticket=asked.ticket, text=f"silence {ids} expired")
        except AuditError as exc:
            return results.error(words.journal_unwritable_text(exc))
        text = outcomes.UNSILENCED.render(id=incidentId, silence_id=ids)
        return results.ok(text, journal.report(EventOutcome.DONE, ticket=asked.ticket, silence_id=ids))
