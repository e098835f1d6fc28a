"""The server factory: build one MCPServer from settings and register the thin feature modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateSecurity

from incident_desk import __version__
from incident_desk.client_features import ClientLogLevels, install_logging
from incident_desk.core.audit import AuditJournal
from incident_desk.core.desk import Desk, bundled_sample_desk
from incident_desk.core.redact import redact
from incident_desk.settings import Settings

SERVER_NAME = "incident-desk"


@dataclass
class DeskApp:
    """What the feature modules share: settings, data, and the services built from them."""

    settings: Settings
    desk: Desk
    journal: AuditJournal
    sealing_keys: list[bytes] = field(default_factory=list)
    log_levels: ClientLogLevels = field(default_factory=ClientLogLevels)

    @property
    def data_root(self) -> Path:
        return self.desk.root

    def redactor(self, text: str) -> str:
        return redact(text) if self.settings.redact_secrets else text

    def services(self) -> list[str]:
        return self.desk.services(extra=list(self.settings.services))


def instructions() -> str:
    return (resources.files("incident_desk") / "data" / "instructions.md").read_text(encoding="utf-8")


def build_app(settings: Settings, sealing_keys: list[bytes] | None = None) -> DeskApp:
    root = settings.data_dir if settings.data_dir is not None else bundled_sample_desk()
    return DeskApp(
        settings=settings,
        desk=Desk(root),
        journal=AuditJournal(settings.audit_path),
        sealing_keys=sealing_keys or [],
    )


def build_server(app: DeskApp) -> MCPServer:
    # Imported here so importing the factory stays cheap for CLI subcommands that never serve.
    from incident_desk.features import completions, prompts, read_tools, resources_, restart, summarize

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
    )
    install_logging(server, app.log_levels)
    resources_.register(server, app)
    prompts.register(server, app)
    completions.register(server, app)
    read_tools.register(server, app)
    summarize.register(server, app)
    restart.register(server, app)
    return server
