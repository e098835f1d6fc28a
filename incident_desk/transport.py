"""Running the server: stdio (the default) and Streamable HTTP. The only module that starts transports."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading

import anyio
import structlog
from mcp.server.mcpserver import MCPServer

from incident_desk import __version__
from incident_desk.observability import log
from incident_desk.settings.model import Settings

logger = structlog.get_logger(__name__)

# How long in-flight requests get to wind down after SIGINT/SIGTERM before the process ends.
STOP_GRACE_SECONDS = 0.5


def _sealing_keys(settings: Settings) -> list[bytes]:
    """The shared sealing key, when one is set; without it each process seals with its own ephemeral key."""
    if settings.sealing_key is not None:
        return [settings.sealing_key.get_secret_value().encode()]
    if settings.transport != "http":
        return []
    from incident_desk.core import credentials

    found = credentials.resolve_secret(None, settings.keyring_service, credentials.SEALING_KEY)
    if found.problem:
        # A process-local key is all one desk needs; replicas behind a balancer need the shared one.
        replicated = settings.stateless or settings.replica_tag is not None
        log = logger.warning if replicated else logger.debug
        log("sealing key lookup failed; using a process-local key", problem=found.problem)
    return [found.value.encode()] if found.value else []


def serve(settings: Settings) -> int:
    log.configure(settings.log_level, settings.log_format)
    from incident_desk.settings.errors import unknown_environment_variables

    for warning in unknown_environment_variables(Settings.model_fields):
        logger.warning(warning)
    stop_tracing = None
    if settings.otlp_endpoint:
        from incident_desk.observability.tracing import start_tracing

        try:
            stop_tracing = start_tracing(settings.otlp_endpoint)
        except RuntimeError as exc:
            sys.stderr.write(f"incident-desk: {exc}\n")
            return 2
    try:
        return _serve(settings)
    finally:
        if stop_tracing is not None:
            stop_tracing()  # the spans still batched go out before the process ends


def _serve(settings: Settings) -> int:
    from incident_desk.assembly import build_app
    from incident_desk.core.journal.audit import AuditError
    from incident_desk.server import build_server, data_directory_counts

    try:
        app = build_app(settings, sealing_keys=_sealing_keys(settings))
    except AuditError as exc:
        sys.stderr.write(f"incident-desk: invalid setting audit_db: {exc}\n")
        return 2
    # Over stdio the client waits for the initialize answer before anything else; over HTTP the desk is
    # ready before it listens.
    server = build_server(app, defer_features=settings.transport != "http", learn_history=True)
    # The objects made by start-up imports (mostly the SDK's pydantic models) live as long as the process; a full
    # collection walking them stops every session while it runs, and a busy search triggers such collections.
    # Frozen, they are never walked again. No collection first: it would slow the start to free a few hundred
    # objects, which frozen cost nothing but their memory (figures in docs/performance.md). The command line
    # turned the collector off for the start (see cli.main); from here on it runs as usual.
    gc.freeze()
    gc.enable()
    starting = {
        "version": __version__,
        "transport": settings.transport,
        "data": str(app.data_root),
        "audit": settings.audit_location,
    }
    try:
        if settings.transport == "http":
            from incident_desk.http.serve import serve_http

            # Ready before it listens. The data directory only: the start never waits on an outside source.
            logger.info("incident-desk starting", **starting, **data_directory_counts(app))
            return serve_http(server, app)
        # Over stdio the client waits for the initialize answer: the data directory is first read (its titles
        # masked, which loads the redaction rules) with the first request after it (RegisterFeaturesOnFirstUse).
        logger.info("incident-desk starting", **starting)
        if sys.stdin.isatty():
            # Started by hand on a terminal, the desk looks hung: it is waiting for a client to speak MCP.
            logger.info(
                "waiting for an MCP client on stdin: a desktop client starts the desk itself (see `incident-desk "
                "config`); `incident-desk doctor` or `incident-desk demo` show it working; Ctrl-C or Ctrl-D stops it"
            )
        return anyio.run(_serve_stdio, server)
    finally:
        if app.memory is not None and not app.memory.stop():
            logger.warning("the incident memory was still writing when the desk stopped")
        app.journal.close()  # a PostgreSQL journal's pool says goodbye to the server; SQLite has nothing open


async def _serve_stdio(server: MCPServer) -> int:
    """Serve until stdin closes or SIGINT/SIGTERM arrives.

    Ctrl-C must stop the desk even while the client keeps stdin open. The SDK reads stdin in a worker thread
    that no cancellation reaches, so a signal cancels every request (restart commands are killed and journalled
    on the way out) and, if the stdin read still holds the process after a grace period, ends it.
    """
    from incident_desk.server import LoadSearchStackAfterHandshake

    stopped_by: list[int] = []
    async with anyio.create_task_group() as tasks:
        if sys.platform != "win32":  # asyncio has no signal handlers there; Ctrl-C raises KeyboardInterrupt
            tasks.start_soon(_stop_on_signal, tasks.cancel_scope, stopped_by)
        for layer in server.middleware:
            if isinstance(layer, LoadSearchStackAfterHandshake):
                tasks.start_soon(layer.after_start)
        await server.run_stdio_async()
        tasks.cancel_scope.cancel()
    return 128 + stopped_by[0] if stopped_by else 0


async def _stop_on_signal(scope: anyio.CancelScope, stopped_by: list[int]) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            logger.info("incident-desk stopping", signal=signal.Signals(signum).name)
            stopped_by.append(signum)
            watchdog = threading.Timer(STOP_GRACE_SECONDS, _exit_now, args=(128 + signum,))
            watchdog.daemon = True
            watchdog.start()
            scope.cancel()
            return


def _exit_now(status: int) -> None:
    """The blocked stdin read is all that is left: every decision was journalled when it was made."""
    sys.stderr.flush()
    os._exit(status)
