"""What one HTTP peer can hold: connections and the time to send a request (sessions: ``sessions.py``).

uvicorn alone has no header or body read timeout (a connection that never finishes its request is kept forever)
and its ``limit_concurrency`` counts such connections too, so a few thousand half-open sockets use up every
descriptor while normal requests time out. Here, each connection gets ``read_timeout`` seconds to deliver a whole
request (head and body) whenever it is waiting for one, and at most ``max_connections`` are kept: when a new one
arrives at the cap, the one that has waited longest for a request is closed; only when every connection is busy
serving a request does the newcomer get 503.

Repeated warnings here go through the standard library's logging, where ``log.RepeatLimiter`` rate-limits them
like uvicorn's own.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal

import h11

from incident_desk.protocol.library_hooks import uvicorn_h11_protocol

if TYPE_CHECKING:
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Protocol
else:
    _Protocol = object  # the real base is put under this class per server, by guarded_protocol

logger = logging.getLogger(__name__)

MCP_SESSION_HEADER = b"mcp-session-id"
MCP_PROTOCOL_HEADER = b"mcp-protocol-version"
# Written on the socket before uvicorn has parsed a request or called any app, so raw bytes, not a Starlette response.
_BUSY_BODY = b'{"error":"busy","message":"the desk has as many connections open as it allows; try again shortly"}'
_BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
    b"connection: close\r\ncontent-length: " + str(len(_BUSY_BODY)).encode() + b"\r\n\r\n" + _BUSY_BODY
)


@dataclass
class ConnectionTable:
    """The connections of one server: how many are open, and which are waiting for a request, oldest first."""

    max_connections: int
    read_timeout: float
    open: int = 0
    waiting: dict[GuardedH11Protocol, None] = field(default_factory=dict)


class GuardedH11Protocol(_Protocol):
    """uvicorn's h11 protocol with a request read deadline and a connection cap (see the module docstring)."""

    table: ClassVar[ConnectionTable]
    _counted = False
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        table = self.table
        if table.open >= table.max_connections:
            if not table.waiting:
                logger.warning("refused an HTTP connection: all %d connections are busy", table.max_connections)
                self.transport.write(_BUSY_RESPONSE)
                self.transport.close()
                return
            oldest = next(iter(table.waiting))
            logger.warning("closed the HTTP connection that waited longest: %d are open", table.max_connections)
            oldest._drop()
        table.open += 1
        self._counted = True
        self._follow_state()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_state()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_state()

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        super().connection_lost(exc)

    def _follow_state(self) -> None:
        """Waiting for a request (or the rest of one) starts the clock once; a whole request stops it."""
        if not self._counted or self.transport.is_closing():
            self._forget()
            return
        waiting = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
        if waiting and self._deadline is None:
            self.table.waiting[self] = None
            self._deadline = self.loop.call_later(self.table.read_timeout, self._drop)
        elif not waiting and self._deadline is not None:
            self.table.waiting.pop(self, None)
            self._deadline.cancel()
            self._deadline = None

    def _drop(self) -> None:
        """Close a connection that did not deliver its request in time, or that is the oldest idle one at the cap."""
        self._forget()
        if not self.transport.is_closing():
            self.transport.close()

    def _forget(self) -> None:
        self.table.waiting.pop(self, None)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._counted:
            self._counted = False
            self.table.open -= 1


def guarded_protocol(max_connections: int, read_timeout: float) -> type[asyncio.Protocol] | Literal["h11"]:
    """A protocol class for one server, with its own connection table (uvicorn's ``http=`` setting takes a class).

    uvicorn's plain ``"h11"`` when its h11 protocol no longer fits (``library_hooks.uvicorn_h11_protocol``).
    """
    base = uvicorn_h11_protocol()
    if base is None:
        return "h11"
    table = ConnectionTable(max_connections=max_connections, read_timeout=read_timeout)
    return type("DeskH11Protocol", (GuardedH11Protocol, base), {"table": table})
