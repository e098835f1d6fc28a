"""Resources: the incident index, each incident's raw log (a bounded tail window), each service's runbook."""

from __future__ import annotations

from functools import partial

from mcp.server.mcpserver import MCPServer

from incident_desk.app import DeskApp
from incident_desk.core.incidents import Listing, LogUnavailable, RunbookUnavailable, UnknownIncident, UnknownService
from incident_desk.core.journal.audit import format_decisions
from incident_desk.protocol import tool_results as results

# The index names at most this many open incidents (the first by id); a resource has no cursor, the tool does.
INDEX_MAX_IDS = 1_000


def index_text(current: Listing) -> str:
    """The open incidents' ids, sorted, one per line: the first ``INDEX_MAX_IDS``, then a line saying how many
    more there are and where to page through them."""
    ids = current.open_incident_ids()
    if len(ids) <= INDEX_MAX_IDS:
        return "\n".join(ids)
    cut = len(ids) - INDEX_MAX_IDS
    shown = "\n".join(ids[:INDEX_MAX_IDS])
    return f"{shown}\n({cut} more open incidents: call list_incidents with cursor={ids[INDEX_MAX_IDS - 1]} for them)"


def register(server: MCPServer, app: DeskApp) -> None:
    @server.resource(
        "incident://index",
        name="incident-index",
        description=f"Ids of open incidents, sorted: the first {INDEX_MAX_IDS:,}, then a line saying how many more",
        mime_type="text/plain",
    )
    async def incident_index() -> str:
        current = await app.listing()
        return await app.compute(partial(index_text, current))

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
