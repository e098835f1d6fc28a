"""``list_service_actions`` and ``run_service_action``: a service's runbook actions, each run only after a human
approves the exact command (and what its preview printed), journalled, locked and limited as a restart is."""

from __future__ import annotations

from typing import Annotated

import anyio
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp
from incident_desk.approvals import flow
from incident_desk.core.acts import executor, service_actions
from incident_desk.core.acts.actions import CommandAction
from incident_desk.core.acts.approval import Approved
from incident_desk.core.acts.links import strictest
from incident_desk.core.acts.preview import Preview
from incident_desk.core.acts.service_actions import ServiceAction
from incident_desk.core.journal.audit import FIELD_LIMITS, AuditError, cut
from incident_desk.core.journal.locks import Holding, LockLost, ServiceBusy, this_replica
from incident_desk.core.outcomes import (
    BAD_PARAMETER,
    NO_ACTION,
    RAN,
    RUN,
    RUN_BUSY,
    RUN_FAILED,
    RUN_LOCK_LOST,
    RUN_NOT_STARTED,
    RUN_TIMED_OUT,
    UNKNOWN_SERVICE,
    Outcome,
)
from incident_desk.protocol import client_features
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, read, restart

log = structlog.get_logger(__name__)

PREVIEW_LINES = 40  # of a preview command's masked output, shown in the question
OUTPUT_HEAD_CHARS = 4000  # of an action's masked output, in the answer


class ActionParameter(BaseModel):
    name: str
    accepts: str = Field(description="What values it takes: a pattern, choices or an integer range")
    description: str


WrittenOutParameter = Annotated[ActionParameter, results.written_out(ActionParameter)]


class ActionInfo(BaseModel):
    name: str
    description: str
    parameters: list[WrittenOutParameter]
    approval: str = Field(description="in-band, out-of-band or second-person")
    has_preview: bool


# Item schemas written out rather than referenced: see tool_results.written_out.
WrittenOutAction = Annotated[ActionInfo, results.written_out(ActionInfo)]


class ActionList(BaseModel):
    service: str
    actions: list[WrittenOutAction]


class ActionReport(BaseModel):
    service: str
    action: str
    outcome: str = Field(description="Journal outcome: executed, failed, declined, cancelled, ...")
    ran: bool = Field(description="True only when the action's command ran and succeeded")
    ticket: str | None = None
    approver: str | None = None
    exit_status: int | None = None
    output: str | None = Field(default=None, description="Head of the command's masked output")
    reason: str | None = Field(default=None, description="Why the desk did not run it, when it did not")


TOOLS = ToolKinds(list_service_actions=read(), run_service_action=restart())


def _command(service: str, action: ServiceAction, argv: list[str]) -> CommandAction:
    return CommandAction(argv=argv, timeout_seconds=action.timeout_seconds, pass_env=action.pass_env)


def register(server: MCPServer, app: DeskApp) -> None:
    @TOOLS.tool(server)
    async def list_service_actions(
        service: str,
    ) -> Annotated[CallToolResult, ActionList]:
        """A service's runbook actions and their parameters."""
        known = await app.known_services()
        if service not in known:
            return results.error(UNKNOWN_SERVICE.render(service=service, known=", ".join(known)))
        listed = ActionList(service=service, actions=[])
        for name, action in sorted(app.settings.service_actions.get(service, {}).items()):
            parameters = [
                ActionParameter(name=p, accepts=spec.described(), description=spec.description)
                for p, spec in sorted(action.parameters.items())
            ]
            mode = app.settings.approval_for(RUN.verb, service)
            mode = strictest(mode, action.approval)
            listed.actions.append(
                ActionInfo(
                    name=name,
                    description=action.description,
                    parameters=parameters,
                    approval=mode,
                    has_preview=action.preview_argv is not None,
                )
            )
        return results.ok(describe(listed), listed)

    @TOOLS.tool(server)
    async def run_service_action(
        service: str,
        action: Annotated[str, Field(description="from list_service_actions")],
        ctx: Context,
        parameters: Annotated[dict[str, str | int], Field(description='by name, e.g. {"version": "v41"}')]
        | None = None,
        reason: flow.RequestReason = None,
    ) -> Annotated[CallToolResult, ActionReport] | InputRequiredResult:
        """Run a service's runbook action once a human approves it with a change ticket."""
        try:
            return await _decide_and_run(ctx, service, action, parameters or {}, reason)
        except AuditError as exc:
            log.error("audit journal write failed", service=cut(service, FIELD_LIMITS["service"]), error=str(exc))
            return results.error(RUN.journal_unwritable_text(exc))

    async def _decide_and_run(
        ctx: Context, service: str, name: str, given: dict[str, str | int], because: str | None
    ) -> Annotated[CallToolResult, ActionReport] | InputRequiredResult:
        known = await app.known_services()
        if service not in known:
            return results.error(UNKNOWN_SERVICE.render(service=service, known=", ".join(known)))
        offered = app.settings.service_actions.get(service, {})
        action = offered.get(name)
        if action is None:
            names = ", ".join(sorted(offered)) or "none (restart_service restarts it)"
            return results.error(NO_ACTION.render(action=cut(name, 64), service=service, names=names))
        if (why := service_actions.refusal(action, given)) is not None:
            return results.error(BAD_PARAMETER.render(why=why))
        argv = service_actions.fill(action.argv, service, given)
        client = client_features.view(ctx)
        record = flow.service_recorder(ctx, app, service, era=client.era, action=name)

        def report(outcome: Outcome, **fields: object) -> ActionReport:
            return ActionReport.model_validate(
                {"service": service, "action": name, "outcome": outcome, "ran": False, **fields}
            )

        async def busy_before_asking() -> CallToolResult | None:
            """A service another restart or action holds would turn the human's yes into a refusal."""
            holder = await app.restart_lock_holder(service)
            if holder is None:
                return None
            await record(Outcome.REFUSED_BUSY, detail=f"{holder.describe()}; nobody was asked")
            return results.error(RUN_BUSY.render(busy=ServiceBusy(service, holder)))

        shown = await preview(service, action, argv, given)
        asked = await flow.ask(
            ctx,
            app,
            record,
            RUN,
            question=f"Run {name} on {service}? {action.description}",
            preview=shown,
            binding={"tool": "run_service_action", "service": service, "action": name},
            target=f"{name} on {service}",
            service=service,
            reason=f"run_service_action called for {name} on {service}",
            report=report,
            requested_because=because,
            before_asking=busy_before_asking,
            approval_mode=action.approval,
        )
        if not isinstance(asked, Approved):
            return asked
        try:
            async with app.restart_lock(service, f"{this_replica()} for {record.actor} ({name})") as holding:
                # What the human approved is the preview they saw: worked out again now, in both eras (a 2026
                # retry binds it too, but the preview may change between the retry and the run).
                now = await preview(service, action, argv, given)
                if (changed := await flow.unchanged(record, RUN, asked, shown, now)) is not None:
                    return changed
                if (refused := await flow.spend(app, record, RUN, asked, service)) is not None:
                    return refused
                return await _approved_run(service, name, action, argv, asked.ticket, record, holding)
        except ServiceBusy as busy:
            await record(Outcome.REFUSED_BUSY, ticket=asked.ticket, detail=busy.holder.describe())
            return results.error(RUN_BUSY.render(busy=busy))
        except LockLost as lost:
            # The command was killed, and the run journalled as failed, on the way out.
            return results.error(RUN_LOCK_LOST.render(action=name, service=service, ticket=asked.ticket, lost=lost))

    async def preview(service: str, action: ServiceAction, argv: list[str], given: dict[str, str | int]) -> Preview:
        """``Will run: [...]``, and with ``preview_argv`` its masked output: the approval binds to both."""
        lines = [f"Will run: {argv}"]
        if action.preview_argv is not None:
            preview_argv = service_actions.fill(action.preview_argv, service, given)
            run = await executor.run_restart(service, _command(service, action, preview_argv))
            output = await app.redacted(run.output)
            status = run.error or (f"exit {run.exit_status}" if run.exit_status else "")
            lines.append(f"Preview ({preview_argv}):" + (f" {status}" if status else ""))
            lines.extend(output.splitlines()[:PREVIEW_LINES])
        return Preview(tuple(lines), ("run", *lines))

    async def _approved_run(
        service: str,
        name: str,
        action: ServiceAction,
        argv: list[str],
        ticket: str,
        record: flow.Recorder,
        holding: Holding,
    ) -> CallToolResult:
        try:
            run = await executor.run_restart(service, _command(service, action, argv))
        except anyio.get_cancelled_exc_class():
            # The runner killed the command on the way out: without this row the journal would end at "approved".
            why = "the call was cancelled" if holding.lost is None else f"the restart lock was lost ({holding.lost})"
            await record.quietly(Outcome.FAILED, ticket=ticket, detail=f"{why} while the action ran; it was killed")
            raise
        output = await app.redacted(run.output)
        head = output[:OUTPUT_HEAD_CHARS]
        fields = {"ticket": ticket, "approver": record.actor, "exit_status": run.exit_status, "output": head}
        if run.succeeded:
            await record.quietly(Outcome.EXECUTED, ticket=ticket, exit_status=run.exit_status, detail=output[-2000:])
            text = RAN.render(action=name, service=service, ticket=ticket, seconds=f"{run.duration_seconds:.1f}")
            shown = ActionReport(service=service, action=name, outcome=Outcome.EXECUTED, ran=True, **fields)  # type: ignore[arg-type]
            return results.ok(f"{text}\n{head}".rstrip(), shown)
        named = {"action": name, "service": service, "ticket": ticket}
        # The executor's own words for a command without an exit status of its own, as restart_service says them.
        why = run.error or f"exit {run.exit_status}"
        if run.timed_out:
            text = RUN_TIMED_OUT.render(**named, seconds=f"{action.timeout_seconds:g}")
        elif not run.executed:
            text = RUN_NOT_STARTED.render(**named, launch_error=why)
        else:
            text = RUN_FAILED.render(**named, code=run.exit_status)
        await record.quietly(
            Outcome.FAILED, ticket=ticket, exit_status=run.exit_status, detail=f"{why}\n{output[-2000:]}"
        )
        failed = results.error(f"{text}\n{head}".rstrip())
        failed.structured_content = ActionReport(
            service=service,
            action=name,
            outcome=Outcome.FAILED,
            ran=False,
            reason=why,
            **fields,  # type: ignore[arg-type]
        ).model_dump(mode="json")
        return failed


def describe(listed: ActionList) -> str:
    """One line per action, then one per parameter: the text ``list_service_actions`` and runbooks show."""
    if not listed.actions:
        return f"{listed.service} has no runbook actions on this desk (restart_service restarts it)."
    lines: list[str] = []
    for action in listed.actions:
        preview = ", previewed" if action.has_preview else ""
        lines.append(f"- {action.name}: {action.description} (approval: {action.approval}{preview})")
        lines.extend(
            f"  - {p.name}: {p.accepts}" + (f" -- {p.description}" if p.description else "") for p in action.parameters
        )
    return "\n".join(lines)
