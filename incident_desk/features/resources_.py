"""Resources: the incident index, each incident's raw log (a bounded tail window), each service's runbook.

Named ``resources_`` to stay clear of :mod:`importlib.resources`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from incident_desk.core.audit import format_decisions
from incident_desk.core.desk import LogUnavailable, UnknownIncident, UnknownService
from incident_desk.core.logfile import read_tail
from incident_desk.server import DeskApp

T = TypeVar("T")


def read_log(app: DeskApp, incident_id: str, reader: Callable[[Path], T]) -> T:
    """Run ``reader`` on an incident's log; a log that vanished or cannot be read is a named domain error."""
    incident = app.desk.incident(incident_id)
    try:
        return reader(incident.log_path)
    except OSError as exc:
        raise LogUnavailable(incident_id, exc.strerror or exc.__class__.__name__) from None


def bounded_log(app: DeskApp, incident_id: str) -> str:
    """The tail window of an incident's log, with a note when older lines were left out."""
    window = read_log(
        app,
        incident_id,
        lambda path: read_tail(
            path,
            max_lines=app.settings.log_window_lines,
            max_bytes=app.settings.log_window_bytes,
            redactor=app.redactor,
        ),
    )
    if not window.truncated:
        return window.text
    return (
        f"[incident-desk: showing the last {window.shown_lines} lines ({window.shown_bytes} of "
        f"{window.total_bytes} bytes); page or search the rest with read_incident_log]\n{window.text}"
    )


def register(server: MCPServer, app: DeskApp) -> None:
    @server.resource(
        "incident://index",
        name="incident-index",
        description="Ids of all open incidents",
        mime_type="text/plain",
    )
    def incident_index() -> str:
        return "\n".join(app.desk.open_incident_ids())

    @server.resource(
        "incident://{id}/log",
        name="incident-log",
        description="Raw log lines for one incident (the most recent window of a large log)",
        mime_type="text/plain",
    )
    async def incident_log(id: str) -> str:
        try:
            return await anyio.to_thread.run_sync(bounded_log, app, id)
        except UnknownIncident as exc:
            raise ResourceNotFoundError(str(exc)) from None
        except LogUnavailable as exc:
            raise ResourceError(str(exc)) from None

    @server.resource(
        "runbook://{service}",
        name="runbook",
        description="The runbook of one service",
        mime_type="text/markdown",
    )
    def runbook(service: str) -> str:
        try:
            return app.desk.runbook(service)
        except UnknownService as exc:
            raise ResourceNotFoundError(str(exc)) from None

    @server.resource(
        "audit://recent",
        name="audit-recent",
        description="The 50 most recent restart decisions from the audit journal, newest first",
        mime_type="text/plain",
    )
    async def audit_recent() -> str:
        decisions = await anyio.to_thread.run_sync(app.journal.recent, 50)
        return format_decisions(decisions)
