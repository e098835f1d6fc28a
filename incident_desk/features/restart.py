"""``restart_service``: restarts nothing until a human approves, and journals every decision before answering."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp
from incident_desk.approvals import out_of_band
from incident_desk.core.acts import approval, executor
from incident_desk.core.acts.actions import SimulateAction
from incident_desk.core.journal.audit import FIELD_LIMITS, AuditError, Decision, DuplicateApproval, cut
from incident_desk.core.journal.locks import Holding, LockLost, ServiceBusy, this_replica
from incident_desk.core.outcomes import (
    REPLAYED,
    RESTART,
    RESTART_BUSY,
    RESTART_EXECUTED,
    RESTART_FAILED,
    RESTART_LOCK_LOST,
    RESTART_OUTCOME_OF,
    RESTART_SIMULATED,
    UNKNOWN_SERVICE,
    RestartOutcome,
)
from incident_desk.identity import principal
from incident_desk.protocol import client_features, client_logging
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.client_features import NoAnswerKind
from incident_desk.protocol.tool_kinds import ToolKinds, restart

log = structlog.get_logger(__name__)

# The journal outcome of a question that got no usable answer, by why.
_NO_ANSWER: dict[NoAnswerKind, RestartOutcome] = {
    "timed_out": RestartOutcome.TIMED_OUT,
    "disconnected": RestartOutcome.DISCONNECTED,
    "client_error": RestartOutcome.CLIENT_ERROR,
    "malformed": RestartOutcome.CLIENT_ERROR,
}


# The journal outcome of each out-of-band approval step.
_STEP_OUTCOME: dict[out_of_band.Step, RestartOutcome] = {
    "requested": RestartOutcome.APPROVAL_REQUESTED,
    "opened": RestartOutcome.PAGE_OPENED,
    "approved": RestartOutcome.APPROVED,
    "declined": RestartOutcome.DECLINED,
}


class RestartReport(BaseModel):
    service: str
    outcome: str = Field(description="Journal outcome: executed, simulated, failed, declined, cancelled, ...")
    restarted: bool = Field(description="True only when a restart command ran and succeeded")
    executed: bool = Field(description="Whether anything was executed at all")
    ticket: str | None
    approver: str | None
    exit_status: int | None
    output: str | None = Field(description="Tail of the restart command's output")
    reason: str | None = Field(description="Why the desk did not restart, when it did not")


class _Recorder:
    """Writes one decision per call, off the event loop, and shielded from cancellation so none is lost."""

    def __init__(self, ctx: Context, app: DeskApp, service: str, approver: str, era: str) -> None:
        self._ctx, self._app = ctx, app
        self._journal, self.approver, self._era = app.journal, approver, era
        # A service name comes from the client: it is journalled and logged cut, like every stored field.
        self._service = cut(service, FIELD_LIMITS["service"])

    async def __call__(
        self,
        outcome: RestartOutcome,
        *,
        ticket: str | None = None,
        exit_status: int | None = None,
        detail: str = "",
        nonce: str | None = None,
    ) -> None:
        decision = Decision(
            service=self._service,
            outcome=outcome,
            ticket=ticket,
            approver=self.approver,
            protocol_era=self._era,
            exit_status=exit_status,
            detail=detail,
            nonce=nonce,
        )
        with anyio.CancelScope(shield=True):
            await self._app.record_decision(decision)
        # The ticket as the journal keeps it (cut): a client-chosen text must not flood the logs.
        fields = {"service": self._service, "outcome": outcome, "ticket": decision.ticket, "era": self._era}
        log.info("restart decision", **fields)
        await client_logging.tell_client(self._ctx, self._app.log_levels, "info", "restart decision", **fields)

    async def step(self, row: out_of_band.StepRow) -> None:
        """An out-of-band approval's step, as ``row.who``. The page's steps come from its own request, maybe on its
        own thread and event loop: journal and log only, nothing sent to this call's client."""
        decision = Decision(
            service=self._service,
            outcome=_STEP_OUTCOME[row.step],
            ticket=row.ticket,
            approver=row.who or self.approver,
            protocol_era=self._era,
            detail=row.detail,
            nonce=row.nonce,
        )
        with anyio.CancelScope(shield=True):
            await self._app.record_decision(decision)
        log.info("restart approval step", service=self._service, outcome=decision.outcome, era=self._era)

    async def quietly(self, outcome: RestartOutcome, **fields: Any) -> str | None:
        """Record after the action ran: a journal failure is returned (and logged), never raised over the result."""
        try:
            await self(outcome, **fields)
        except AuditError as exc:
            log.error("audit journal write failed", service=self._service, outcome=outcome, error=str(exc))
            return str(exc)
        return None


def _report(service: str, outcome: RestartOutcome, **fields: object) -> RestartReport:
    values: dict[str, object] = {
        "restarted": False,
        "executed": False,
        "ticket": None,
        "approver": None,
        "exit_status": None,
        "output": None,
        "reason": None,
    }
    values.update(fields)
    return RestartReport.model_validate({"service": service, "outcome": outcome, **values})


TOOLS = ToolKinds(restart_service=restart())


def register(server: MCPServer, app: DeskApp) -> None:
    @TOOLS.tool(server)
    async def restart_service(
        service: Annotated[str, Field(description="Service name, e.g. payments-api")],
        ctx: Context,
    ) -> Annotated[CallToolResult, RestartReport] | InputRequiredResult:
        """Restart a service after a human approves in a form with a change ticket; refuses without approval."""
        try:
            return await _decide_and_restart(ctx, service)
        except AuditError as exc:
            # Nothing ran: every path that executes records its approval first, and that write failed here.
            log.error("audit journal write failed", service=cut(service, FIELD_LIMITS["service"]), error=str(exc))
            return results.error(RESTART.journal_unwritable_text(exc))

    async def _decide_and_restart(
        ctx: Context, service: str
    ) -> Annotated[CallToolResult, RestartReport] | InputRequiredResult:
        client = client_features.view(ctx)
        approver = principal.approver(ctx)
        record = _Recorder(ctx, app, service, approver, client.era)

        known = await app.known_services()
        if service not in known:
            await record(RestartOutcome.REFUSED_UNKNOWN_SERVICE, detail="not a service of this desk")
            return results.error(UNKNOWN_SERVICE.render(service=service, known=", ".join(known)))

        # Ask only when able: a journal that cannot take the answer, or a service another restart holds, would
        # turn the human's yes into a refusal. A journal that fails here raises AuditError: nothing is asked.
        await app.check_journal_writable()
        holder = await app.restart_lock_holder(service)
        if holder is not None:
            busy = ServiceBusy(service, holder)
            await record(
                RestartOutcome.REFUSED_BUSY, detail=f"a restart was running, {holder.describe()}; nobody was asked"
            )
            return results.error(RESTART_BUSY.render(busy=busy))

        form = client_features.ApprovalForm(approval.question(service), approval.FORM_SCHEMA)
        timeout = app.settings.approval_timeout_seconds
        binding = {"tool": "restart_service", "service": service}
        mode = app.settings.approval_for("restart", service)
        page_journalled = False  # the approval page wrote the decision's row itself
        try:
            if mode == "in-band":
                answer = await client_features.ask_approval(ctx, form, timeout=timeout, binding=binding)
            else:
                asked = await out_of_band.ask_out_of_band(
                    ctx,
                    app,
                    act="restart",
                    target=service,
                    question=approval.question(service),
                    reason=f"restart_service called for {service}",
                    requester=approver,
                    mode=mode,
                    binding=binding,
                    journal=record.step,
                    requester_key=principal.approver_key(ctx),
                )
                if isinstance(asked, out_of_band.PageAnswer):
                    record.approver = approver = asked.approver
                    answer, page_journalled = asked.answer, asked.journalled
                elif isinstance(asked, client_features.PendingShown):
                    report = _report(service, RestartOutcome.APPROVAL_REQUESTED, reason=asked.text)
                    return results.ok(asked.text, report)
                else:
                    answer = asked
        except anyio.get_cancelled_exc_class():
            await record.quietly(
                RestartOutcome.DISCONNECTED, detail="the call was cancelled while the question was open"
            )
            raise

        if isinstance(answer, client_features.Ask):
            return answer.result
        if isinstance(answer, client_features.NoChannel):
            refused = RestartOutcome.REFUSED_NO_CHANNEL
            await record(refused, detail=answer.reason)
            text = approval.no_channel_text(service)
            return results.ok(text, _report(service, refused, approver=approver, reason=answer.reason))
        if isinstance(answer, client_features.StaleRound):
            await record(RestartOutcome.REFUSED_STALE, detail=answer.reason)
            return results.error(RESTART.refusal(answer.reason))
        if isinstance(answer, client_features.NoAnswer):
            unanswered = _NO_ANSWER[answer.kind]
            await record(unanswered, detail=answer.reason)
            text = approval.timed_out_text(timeout) if answer.kind == "timed_out" else RESTART.refusal(answer.reason)
            return results.ok(text, _report(service, unanswered, approver=approver, reason=answer.reason))

        verdict = approval.decide(service, answer.action, answer.content)
        if not verdict.approved:
            refused = RESTART_OUTCOME_OF[verdict.outcome]
            if not page_journalled:
                await record(refused, ticket=verdict.ticket)
            report = _report(service, refused, ticket=verdict.ticket, approver=approver, reason=verdict.text)
            return results.ok(verdict.text, report)

        # A second approved restart of a service is refused rather than run on top of the first: in this process
        # (SQLite), or on any replica sharing the PostgreSQL journal.
        try:
            async with app.restart_lock(service, f"{this_replica()} for {approver}") as holding:
                nonce = None if page_journalled else answer.nonce
                return await _approved_restart(ctx, app, service, verdict, nonce, record, approver, holding)
        except ServiceBusy as busy:
            await record(
                RestartOutcome.REFUSED_BUSY,
                ticket=verdict.ticket,
                detail=f"a restart was running, {busy.holder.describe()}",
            )
            return results.error(RESTART_BUSY.render(busy=busy))
        except LockLost as lost:
            # The restart was cancelled (its command killed) and journalled as failed on the way out.
            return results.error(RESTART_LOCK_LOST.render(service=service, ticket=verdict.ticket, lost=lost))


async def _approved_restart(
    ctx: Context,
    app: DeskApp,
    service: str,
    verdict: approval.Verdict,
    nonce: str | None,
    record: _Recorder,
    approver: str,
    holding: Holding,
) -> CallToolResult:
    """Journal the approval (unless the approval page did: ``nonce`` None), run the configured action, journal what
    became of it."""
    try:
        # The approval is journalled before anything runs, and its nonce makes it single-use.
        if nonce is not None:
            await record(RestartOutcome.APPROVED, ticket=verdict.ticket, nonce=nonce)
    except DuplicateApproval:
        # A replayed answer is a refusal like any other: the journal must show the attempt.
        await record(RestartOutcome.REFUSED_STALE, ticket=verdict.ticket, detail=f"replayed approval {nonce}")
        return results.error(RESTART.refusal(REPLAYED))

    action = app.settings.services.get(service, SimulateAction())

    async def progress(elapsed: float, message: str) -> None:
        await ctx.report_progress(elapsed, None, message)

    ticket = verdict.ticket
    try:
        run = await executor.run_restart(service, action, on_progress=progress)
    except anyio.get_cancelled_exc_class():
        # The executor killed the command on the way out; without this row the journal would end at
        # "approved" and read as if the restart might have completed.
        why = "the call was cancelled" if holding.lost is None else f"the restart lock was lost ({holding.lost})"
        await record.quietly(RestartOutcome.FAILED, ticket=ticket, detail=f"{why} while the restart ran; it was killed")
        raise
    # Command output is shown to the client and kept in the journal: it gets the same redaction as logs.
    from incident_desk.core.redaction.face import redact

    output = redact(run.output)
    if isinstance(action, SimulateAction):
        problem = await record.quietly(RestartOutcome.SIMULATED, ticket=ticket, detail=output)
        # The first line keeps the RESTARTED prefix a client may match on, and says at once that nothing ran.
        text = RESTART_SIMULATED.render(service=service, ticket=ticket)
        report = _report(service, RestartOutcome.SIMULATED, ticket=ticket, approver=approver, output=output)
        return _with_journal_problem(results.ok(text, report), problem)
    if run.succeeded:
        problem = await record.quietly(
            RestartOutcome.EXECUTED, ticket=ticket, exit_status=run.exit_status, detail=output[-2000:]
        )
        text = RESTART_EXECUTED.render(service=service, ticket=ticket, seconds=f"{run.duration_seconds:.1f}")
        report = _report(
            service,
            RestartOutcome.EXECUTED,
            restarted=True,
            executed=True,
            ticket=ticket,
            approver=approver,
            exit_status=run.exit_status,
            output=output,
        )
        return _with_journal_problem(results.ok(text, report), problem)
    why = run.error or (
        f"timed out after {run.duration_seconds:.0f}s" if run.timed_out else f"exited with status {run.exit_status}"
    )
    problem = await record.quietly(
        RestartOutcome.FAILED, ticket=ticket, exit_status=run.exit_status, detail=f"{why}\n{output[-2000:]}"
    )
    text = f"{RESTART_FAILED.render(service=service, ticket=ticket, why=why)}\n{output[-4000:]}".rstrip()
    failed = results.error(text)
    failed.structured_content = _report(
        service,
        RestartOutcome.FAILED,
        executed=run.executed,
        ticket=ticket,
        approver=approver,
        exit_status=run.exit_status,
        output=output,
        reason=why,
    ).model_dump(mode="json")
    return _with_journal_problem(failed, problem)


def _with_journal_problem(result: CallToolResult, problem: str | None) -> CallToolResult:
    """After the action ran, a journal failure must not hide what happened: say both, as an error."""
    if problem is None:
        return result
    warning = TextContent(type="text", text=f"WARNING: the audit journal could not record this outcome: {problem}")
    return result.model_copy(update={"is_error": True, "content": [*result.content, warning]})
