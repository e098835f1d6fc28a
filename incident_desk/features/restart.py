"""``restart_service``: restarts nothing until a human approves, and journals every decision before answering."""

from __future__ import annotations

from typing import Annotated

import anyio
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp
from incident_desk.approvals import flow
from incident_desk.core.acts import approval, executor
from incident_desk.core.acts.actions import CommandAction, SimulateAction
from incident_desk.core.acts.approval import Approved
from incident_desk.core.acts.preview import Preview, restart_preview
from incident_desk.core.journal.audit import FIELD_LIMITS, AuditError, cut
from incident_desk.core.journal.locks import Holding, LockLost, ServiceBusy, this_replica
from incident_desk.core.outcomes import (
    RESTART,
    RESTART_BUSY,
    RESTART_EXECUTED,
    RESTART_FAILED,
    RESTART_LOCK_LOST,
    RESTART_SIMULATED,
    UNKNOWN_SERVICE,
    Outcome,
)
from incident_desk.protocol import client_features
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, restart

log = structlog.get_logger(__name__)


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


def _report(service: str, outcome: Outcome, **fields: object) -> RestartReport:
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
        service: str,
        ctx: Context,
        reason: flow.RequestReason = None,
    ) -> Annotated[CallToolResult, RestartReport] | InputRequiredResult:
        """Restart a service once a human approves it with a change ticket."""
        try:
            return await _decide_and_restart(ctx, service, reason)
        except AuditError as exc:
            # Nothing ran: every path that executes records its approval first, and that write failed here.
            log.error("audit journal write failed", service=cut(service, FIELD_LIMITS["service"]), error=str(exc))
            return results.error(RESTART.journal_unwritable_text(exc))

    def preview_of(service: str) -> Preview:
        action = app.settings.services.get(service, SimulateAction())
        return restart_preview(action.argv if isinstance(action, CommandAction) else None, None)

    async def _decide_and_restart(
        ctx: Context, service: str, reason: str | None
    ) -> Annotated[CallToolResult, RestartReport] | InputRequiredResult:
        client = client_features.view(ctx)
        record = flow.service_recorder(ctx, app, service, era=client.era)

        known = await app.known_services()
        if service not in known:
            await record(Outcome.REFUSED_UNKNOWN_SERVICE, detail="not a service of this desk")
            return results.error(UNKNOWN_SERVICE.render(service=service, known=", ".join(known)))

        async def busy_before_asking() -> CallToolResult | None:
            """A service another restart holds would turn the human's yes into a refusal: nobody is asked."""
            holder = await app.restart_lock_holder(service)
            if holder is None:
                return None
            detail = f"a restart was running, {holder.describe()}; nobody was asked"
            await record(Outcome.REFUSED_BUSY, detail=detail)
            return results.error(RESTART_BUSY.render(busy=ServiceBusy(service, holder)))

        def report(outcome: Outcome, **fields: object) -> RestartReport:
            return _report(service, outcome, **fields)

        shown = preview_of(service)
        asked = await flow.ask(
            ctx,
            app,
            record,
            RESTART,
            question=approval.question(service),
            preview=shown,
            binding={"tool": "restart_service", "service": service},
            target=service,
            service=service,
            reason=f"restart_service called for {service}",
            report=report,
            requested_because=reason,
            before_asking=busy_before_asking,
        )
        if not isinstance(asked, Approved):
            return asked
        if (changed := await flow.unchanged(record, RESTART, asked, shown, preview_of(service))) is not None:
            return changed

        # A second approved restart of a service is refused rather than run on top of the first: in this process
        # (SQLite), or on any replica sharing the PostgreSQL journal.
        try:
            async with app.restart_lock(service, f"{this_replica()} for {record.actor}") as holding:
                if (replayed := await flow.spend(app, record, RESTART, asked, service)) is not None:
                    return replayed
                return await _approved_restart(ctx, app, service, asked.ticket, record, holding)
        except ServiceBusy as busy:
            await record(
                Outcome.REFUSED_BUSY,
                ticket=asked.ticket,
                detail=f"a restart was running, {busy.holder.describe()}",
            )
            return results.error(RESTART_BUSY.render(busy=busy))
        except LockLost as lost:
            # The restart was cancelled (its command killed) and journalled as failed on the way out.
            return results.error(RESTART_LOCK_LOST.render(service=service, ticket=asked.ticket, lost=lost))


async def _approved_restart(
    ctx: Context, app: DeskApp, service: str, ticket: str, record: flow.Recorder, holding: Holding
) -> CallToolResult:
    """Run the configured action of an approved (and journalled) restart, and journal what became of it."""
    approver = record.actor
    action = app.settings.services.get(service, SimulateAction())

    async def progress(elapsed: float, message: str) -> None:
        await ctx.report_progress(elapsed, None, message)

    try:
        run = await executor.run_restart(service, action, on_progress=progress)
    except anyio.get_cancelled_exc_class():
        # The executor killed the command on the way out; without this row the journal would end at
        # "approved" and read as if the restart might have completed.
        why = "the call was cancelled" if holding.lost is None else f"the restart lock was lost ({holding.lost})"
        await record.quietly(Outcome.FAILED, ticket=ticket, detail=f"{why} while the restart ran; it was killed")
        raise
    # Command output is shown to the client and kept in the journal: it gets the same redaction as logs.
    from incident_desk.core.redaction.face import redact

    output = redact(run.output)
    if isinstance(action, SimulateAction):
        problem = await record.quietly(Outcome.SIMULATED, ticket=ticket, detail=output)
        # The first line keeps the RESTARTED prefix a client may match on, and says at once that nothing ran.
        text = RESTART_SIMULATED.render(service=service, ticket=ticket)
        report = _report(service, Outcome.SIMULATED, ticket=ticket, approver=approver, output=output)
        return _with_journal_problem(results.ok(text, report), problem)
    if run.succeeded:
        problem = await record.quietly(
            Outcome.EXECUTED, ticket=ticket, exit_status=run.exit_status, detail=output[-2000:]
        )
        text = RESTART_EXECUTED.render(service=service, ticket=ticket, seconds=f"{run.duration_seconds:.1f}")
        report = _report(
            service,
            Outcome.EXECUTED,
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
        Outcome.FAILED, ticket=ticket, exit_status=run.exit_status, detail=f"{why}\n{output[-2000:]}"
    )
    text = f"{RESTART_FAILED.render(service=service, ticket=ticket, why=why)}\n{output[-4000:]}".rstrip()
    failed = results.error(text)
    failed.structured_content = _report(
        service,
        Outcome.FAILED,
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
