"""The server factory: build one MCPServer for a desk and register the thin feature modules on it.

Only the transports and ``doctor`` import this module; features never do.
"""

from __future__ import annotations

from importlib import resources

from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateSecurity

from incident_desk import __version__
from incident_desk.app import DeskApp
from incident_desk.client_features import HideAppViewsFromPlainClients
from incident_desk.client_logging import RequestLogContext, serve_set_level
from incident_desk.features import completions, prompts, read_tools, resources_, restart, summarize, timeline

SERVER_NAME = "incident-desk"
FEATURES = (resources_, prompts, completions, read_tools, summarize, restart)


def instructions() -> str:
    return (resources.files("incident_desk") / "data" / "instructions.md").read_text(encoding="utf-8")


def build_server(app: DeskApp) -> MCPServer:
    # The sealed 2026 round-trip state must outlive the longest wait for a human, or a slow approval would
    # fail with the SDK's bare "expired requestState" instead of the desk's own timeout text.
    ttl = max(app.settings.approval_timeout_seconds, app.settings.sampling_timeout_seconds) + 120
    sealing = (
        RequestStateSecurity(keys=app.sealing_keys, ttl=ttl)
        if app.sealing_keys
        else RequestStateSecurity.ephemeral(ttl=ttl)
    )
    server = MCPServer(
        SERVER_NAME,
        version=__version__,
        title="Incident desk",
        instructions=instructions(),
        request_state_security=sealing,
        middleware=[RequestLogContext(), HideAppViewsFromPlainClients()],
        extensions=[timeline.extension(app)],
    )
    serve_set_level(server, app.log_levels)
    for feature in FEATURES:
        feature.register(server, app)
    return server
