"""``show_incident_timeline``: an incident's log as lines per minute by level, with its markers, for a model
(a few lines of text with a sparkline) and for a host that renders MCP Apps (the ``ui://`` chart).

The tool and its view come as the SDK's Apps extension, which the server factory passes to ``MCPServer``;
``client_features`` hides the view's link from clients that did not declare the extension.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.apps import Apps, ResourceCsp
from mcp_types import CallToolResult

from incident_desk.app import DeskApp
from incident_desk.core.incidents import DataError
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, read
from incident_desk.protocol.tool_schemas import Answer
from incident_desk.timeline_view import Timeline, gather, render_text, view_html

VIEW_URI = "ui://incident-desk/timeline"


TOOLS = ToolKinds(show_incident_timeline=read(answer=Answer.FIELDS))


def extension(app: DeskApp) -> Apps:
    """The Apps extension holding the timeline tool and its view, for ``MCPServer(extensions=[...])``."""
    apps = Apps()
    apps.add_html_resource(
        VIEW_URI,
        view_html(),
        name="incident-timeline",
        title="Incident timeline",
        description="Log lines per minute stacked by level, with markers for opened, first error and restarts",
        csp=ResourceCsp(connect_domains=[], resource_domains=[]),
        prefers_border=True,
    )

    @TOOLS.tool(
        apps,
        resource_uri=VIEW_URI,
        visibility=["model", "app"],
        meta={"ui/resourceUri": VIEW_URI},  # the key older hosts still read
    )
    async def show_incident_timeline(
        incidentId: str,
    ) -> Annotated[CallToolResult, Timeline]:
        """An incident on one time axis: lines per minute by level, first error, metrics, changes, acts."""
        try:
            view = await gather(app, incidentId)
        except DataError as exc:
            return results.failed(exc)
        return results.ok(render_text(view), view)

    return apps
