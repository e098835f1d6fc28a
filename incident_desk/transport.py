"""Running the server: stdio (the default) and Streamable HTTP. The only module that starts transports."""

from __future__ import annotations

import sys

import anyio
import structlog

from incident_desk import __version__, log
from incident_desk.settings import Settings

logger = structlog.get_logger(__name__)


def _sealing_keys(settings: Settings) -> list[bytes]:
    """The shared sealing key, when one is set; without it each process seals with its own ephemeral key."""
    if settings.sealing_key is not None:
        return [settings.sealing_key.get_secret_value().encode()]
    if settings.transport != "http":
        return []
    from incident_desk.core import credentials

    found = credentials.resolve_secret(None, settings.keyring_service, credentials.SEALING_KEY)
    if found.problem:
        logger.warning("sealing key lookup failed; using a process-local key", problem=found.problem)
    return [found.value.encode()] if found.value else []


def serve(settings: Settings) -> int:
    log.configure(settings.log_level, settings.log_format)
    from incident_desk.app import build_app
    from incident_desk.core.audit import AuditError
    from incident_desk.server import build_server

    try:
        app = build_app(settings, sealing_keys=_sealing_keys(settings))
    except AuditError as exc:
        sys.stderr.write(f"incident-desk: invalid setting audit_db: {exc}\n")
        return 2
    server = build_server(app)
    # Opens nothing that can block (see core.datafiles), so a FIFO in the data directory cannot stall the start.
    listing = app.desk.listing()
    logger.info(
        "incident-desk starting",
        version=__version__,
        transport=settings.transport,
        data=str(app.data_root),
        incidents=len(listing.incidents),
        skipped_entries=len(listing.problems),
        audit=str(settings.audit_path),
    )
    if settings.transport == "http":
        from incident_desk.http import serve_http

        return serve_http(server, app)
    anyio.run(server.run_stdio_async)
    return 0
