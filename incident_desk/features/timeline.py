"""``show_incident_timeline``: an incident's log as lines per minute by level, with its markers, for a model
(a few lines of text with a sparkline) and for a host that renders MCP Apps (the ``ui://`` chart).

The server factory passes ``client_features.AppsAdvertised`` to ``MCPServer``, which is what the handshake
advertises (MCP Apps has no settings); the tool and its view are registered with the other features, as the SDK
registers an extension's contributions, so a stdio desk's ``initialize`` waits for neither (docs/performance.md).
``client_features`` hides the view's link from clients that did not declare the extension.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.apps import Apps, ResourceCsp
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from incident_desk.app import DeskApp
from incident_desk.core.incidents import DataError
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, read
from incident_desk.protocol.tool_schemas import Answer
from incident_desk.timeline_view import Timeline, gather, render_text, view_html

VIEW_URI = "ui://incident-desk/timeline"


TOOLS = ToolKinds(show_incident_timeline=read(answer=Answer.FIELDS))


def register(server: MCPServer, app: DeskApp) -> None:
    """The timeline tool and its view, added as ``MCPServer`` adds an extension's tools and resources."""
    apps = _contributions(app)
    for tool in apps.tools():  # checks that the tool's view is there
        server.add_tool(tool.fn, meta=tool.meta, **tool.kwargs)
    for resource in apps.resources():
        server.add_resource(resource.resource)
    TOOLS.publish(server)


def _contributions(app: DeskApp) -> Apps:
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
