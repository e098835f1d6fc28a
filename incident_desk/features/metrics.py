"""``query_incident_metrics``: the service's Prometheus queries (and an alert's own expression) over the incident's
window, as sparklines with min/max/last for a model and as points for a program."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from incident_desk import what_changed
from incident_desk.app import DeskApp
from incident_desk.core.incidents import DataError
from incident_desk.core.neighbours.metrics import MetricsUnavailable
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, read

# Prometheus is a neighbour in the open world, but asking it changes nothing.


class IncidentMetrics(BaseModel):
    incident_id: str
    service: str
    start: datetime
    end: datetime
    step_seconds: float
    series: list[what_changed.WrittenOutSeries]
    problems: list[str] = Field(description="Queries Prometheus refused, each with its reason")
    notes: list[str]


def render_text(view: IncidentMetrics) -> str:
    lines = [
        f"{view.incident_id} {view.service}: metrics {view.start:%Y-%m-%d %H:%M}–{view.end:%H:%M} UTC, "
        f"step {view.step_seconds:g}s"
    ]
    lines += what_changed.series_lines(view.series) or ["no series in the window"]
    lines += [f"query {problem}" for problem in view.problems]
    lines += [f"note: {note}" for note in view.notes]
    return "\n".join(lines)


TOOLS = ToolKinds(query_incident_metrics=read(open_world=True))


def register(server: MCPServer, app: DeskApp) -> None:
    @TOOLS.tool(server)
    async def query_incident_metrics(
        incidentId: str,
        name: Annotated[str | None, Field(description="one query (or 'alert'); omit for all")] = None,
        minutes_before: Annotated[float, Field(ge=0, le=7 * 24 * 60)] = what_changed.DEFAULT_MINUTES_BEFORE,
        minutes_after: Annotated[
            float | None,
            Field(
                ge=1,
                le=7 * 24 * 60,
                description="omit for up to now",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, IncidentMetrics]:
        """Metrics around an incident: sparkline, min, max, last per series."""
        try:
            incident = await app.incident(incidentId)
            found = await what_changed.gather_metrics(
                app,
                incident,
                now=datetime.now(UTC),
                name=name,
                minutes_before=minutes_before,
                minutes_after=minutes_after,
            )
        except (DataError, MetricsUnavailable) as exc:
            return results.failed(exc)
        assert found.window is not None
        view = IncidentMetrics(
            incident_id=incident.id,
            service=incident.service,
            start=found.window.start,
            end=found.window.end,
            step_seconds=found.window.step_seconds,
            series=found.series,
            problems=found.problems,
            notes=found.notes,
        )
        return results.ok(render_text(view), view)
