"""Resources: the incident index, each incident's raw log (a bounded tail window), each service's runbook."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from incident_desk.app import DeskApp
from incident_desk.core.incidents import LogUnavailable, RunbookUnavailable, UnknownIncident, UnknownService
from incident_desk.core.journal.audit import format_decisions
from incident_desk.protocol import tool_results as results


def register(server: MCPServer, app: DeskApp) -> None:
    @server.resource(
        "incident://index",
        name="incident-index",
        description="Ids of all open incidents",
        mime_type="text/plain",
    )
    async def incident_index() -> str:
        current = await app.listing()
        return "\n".join(current.open_incident_ids())

    @server.resource(
        "incident://{id}/log",
        name="incident-log",
        description="Raw log lines for one incident (the most recent window of a large log)",
        mime_type="text/plain",
    )
    async def incident_log(id: str) -> str:
        try:
            return await app.bounded_log_from_loop(id)
        except (UnknownIncident, LogUnavailable) as exc:
            raise results.resource_failure(exc) from None

    @server.resource(
        "runbook://{service}",
        name="runbook",
        description="The runbook of one service",
        mime_type="text/markdown",
    )
    async def runbook(service: str) -> str:
        try:
            return await app.runbook(service)
        except (UnknownService, RunbookUnavailable) as exc:
            raise results.resource_failure(exc) from None

    @server.resource(
        "audit://recent",
        name="audit-recent",
        description="The 50 most recent restart decisions from the audit journal, newest first",
        mime_type="text/plain",
    )
    async def audit_recent() -> str:
        decisions = await app.recent_decisions(50)
        return format_decisions(decisions)
