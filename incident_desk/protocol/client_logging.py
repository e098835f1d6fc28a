"""MCP logging: desk events forwarded to clients that ask for them, and request ids on every log line.

MCP logging is deprecated by 2026-07-28 but still what 2025 clients use to watch a server. The desk forwards its
own decision events (why a summary step was skipped, what became of a restart) to clients that ask: 2025 clients
by ``logging/setLevel``, 2026 clients by the per-request ``_meta`` log level the SDK already honours.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from incident_desk.protocol.eras import ROUND_TRIP_ERAS

if TYPE_CHECKING:  # the desk's app keeps the levels; the SDK is loaded by whoever serves (cli, tools, timeline)
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import EmptyResult, LoggingLevel, SetLevelRequestParams

_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_STDIO_CONNECTION = "stdio"


class ClientLogLevels:
    """The level each 2025 connection asked for; a connection that never asked gets no log notifications.

    stdio and in-memory transports carry one connection (no headers); Streamable HTTP names each stateful
    session. A stateless HTTP request has no connection to remember a level for, so setLevel there is a no-op.
    """

    MAX_CONNECTIONS = 10_000

    def __init__(self) -> None:
        self._levels: dict[str, str] = {}

    @staticmethod
    def connection_key(headers: Mapping[str, str] | None) -> str | None:
        if headers is None:
            return _STDIO_CONNECTION
        return headers.get("mcp-session-id")

    def set(self, key: str | None, level: str) -> None:
        if key is None:
            return
        self._levels.pop(key, None)
        self._levels[key] = level
        while len(self._levels) > self.MAX_CONNECTIONS:
            del self._levels[next(iter(self._levels))]  # forget the connection that set its level longest ago

    def wants(self, key: str | None, level: str) -> bool:
        asked = self._levels.get(key) if key is not None else None
        return asked is not None and _LEVELS.index(level) >= _LEVELS.index(asked)


class RequestLogContext:
    """Server middleware: bind the JSON-RPC request id and method to every structlog line of a request."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:
            return await call_next(ctx)
        # Tokens rather than bound_contextvars(), which first copies every bound variable to restore them: the
        # same effect, at a third of the cost on every request.
        tokens = structlog.contextvars.bind_contextvars(request_id=str(ctx.request_id), method=ctx.method)
        try:
            return await call_next(ctx)
        finally:
            structlog.contextvars.reset_contextvars(**tokens)


def serve_set_level(server: MCPServer, levels: ClientLogLevels) -> None:
    """Answer ``logging/setLevel`` by remembering the level per connection.

    mcp 2.3's MCPServer has no public hook for this request: it goes on the private low-level server
    (``library_hooks.sdk_add_request_handler``); revisit when the SDK grows a decorator for MCPServer.
    """

    from mcp_types import EmptyResult, SetLevelRequestParams

    from incident_desk.protocol.library_hooks import sdk_add_request_handler

    async def set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        headers = getattr(ctx.request, "headers", None)
        levels.set(ClientLogLevels.connection_key(headers), params.level)
        return EmptyResult()

    sdk_add_request_handler(server, "logging/setLevel", SetLevelRequestParams, set_level)


async def tell_client(ctx: Context, levels: ClientLogLevels, level: LoggingLevel, event: str, **fields: Any) -> None:
    """Forward one desk event to the client as ``notifications/message``, if the client asked for that level."""
    if ctx.protocol_version not in ROUND_TRIP_ERAS and not levels.wants(
        ClientLogLevels.connection_key(ctx.headers), level
    ):
        return
    from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

    data = {"event": event, **fields}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        try:
            await ctx.log(level, data, logger_name="incident-desk")
        except (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # a client that went away does not fail the tool that was telling it something
