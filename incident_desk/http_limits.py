"""What one HTTP peer can hold: connections, the time to send a request, and stateful sessions.

uvicorn alone has no header or body read timeout (a connection that never finishes its request is kept forever)
and its ``limit_concurrency`` counts such connections too, so a few thousand half-open sockets use up every
descriptor while normal requests time out. Here, each connection gets ``read_timeout`` seconds to deliver a whole
request (head and body) whenever it is waiting for one, and at most ``max_connections`` are kept: when a new one
arrives at the cap, the one that has waited longest for a request is closed; only when every connection is busy
serving a request does the newcomer get 503.

The SDK caps sessions globally; :class:`SessionLimiter` also caps them per client, so one token holder cannot
take every session and lock the rest of the team out.

Repeated warnings here go through the standard library's logging, where ``log.RepeatLimiter`` rate-limits them
like uvicorn's own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import h11
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from uvicorn.protocols.http.h11_impl import H11Protocol

from incident_desk.auth import PRINCIPAL_HEADER, ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

MCP_SESSION_HEADER = b"mcp-session-id"
MCP_PROTOCOL_HEADER = b"mcp-protocol-version"
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


class GuardedH11Protocol(H11Protocol):
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


def guarded_protocol(max_connections: int, read_timeout: float) -> type[GuardedH11Protocol]:
    """A protocol class for one server, with its own connection table (uvicorn's ``http=`` setting takes a class)."""
    table = ConnectionTable(max_connections=max_connections, read_timeout=read_timeout)
    return type("DeskH11Protocol", (GuardedH11Protocol,), {"table": table})


@dataclass
class _Session:
    owner: tuple[str, str]
    in_flight: int = 0
    last_active: float = 0.0


class SessionLimiter:
    """At most ``per_client`` stateful sessions per client: the authenticated principal and its address.

    A shared token names one principal for the whole team, so its address is part of who the client is (behind a
    proxy, uvicorn's trusted ``X-Forwarded-For`` handling supplies it). Sessions are seen in the SDK's answers
    (the ``mcp-session-id`` it hands out) and are forgotten when the client deletes them, when the SDK no longer
    knows them (404), or once idle as long as the SDK's own idle timeout, which the desk sets to the same value.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str,
        per_client: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._app = app
        self._path = path
        self._per_client = per_client
        self._idle_seconds = idle_seconds
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._opening: dict[tuple[str, str], int] = {}  # requests that may open a session, not answered yet

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != self._path:
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        session_id = headers.get(MCP_SESSION_HEADER, b"").decode("latin-1") or None
        if session_id is None:
            await self._open(scope, receive, send, headers)
            return
        session = self._sessions.get(session_id)
        if session is None:
            await self._app(scope, receive, send)
            return
        session.in_flight += 1
        status = 0

        async def watching(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self._app(scope, receive, watching)
        finally:
            session.in_flight -= 1
            session.last_active = self._clock()
            if status == 404 or (scope.get("method") == "DELETE" and 200 <= status < 300):
                self._sessions.pop(session_id, None)

    async def _open(self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]) -> None:
        """A request without a session: it may open one, if its client is under the cap."""
        era = headers.get(MCP_PROTOCOL_HEADER, b"").decode("latin-1")
        if era and era not in HANDSHAKE_PROTOCOL_VERSIONS:  # 2026-07-28 requests never open a session
            await self._app(scope, receive, send)
            return
        client = scope.get("client")
        owner = (headers.get(PRINCIPAL_HEADER.encode(), b"").decode("latin-1"), str(client[0]) if client else "")
        if self._count(owner) + self._opening.get(owner, 0) >= self._per_client:
            logger.warning("refused a new session: its client already holds %d", self._per_client)
            await _too_many_sessions(send, self._per_client, self._idle_seconds)
            return
        opened: list[str] = []
        self._opening[owner] = self._opening.get(owner, 0) + 1
        answered = False

        def stop_opening() -> None:
            nonlocal answered
            if not answered:
                answered = True
                self._opening[owner] -= 1
                if not self._opening[owner]:
                    del self._opening[owner]

        async def watching(message: Message) -> None:
            if message["type"] == "http.response.start":
                if int(message["status"]) < 400:
                    for name, value in message.get("headers", []):
                        if name.lower() == MCP_SESSION_HEADER:
                            session_id = value.decode("latin-1")
                            self._sessions[session_id] = _Session(owner, in_flight=1)
                            opened.append(session_id)
                stop_opening()
            await send(message)

        try:
            await self._app(scope, receive, watching)
        finally:
            stop_opening()
            for session_id in opened:
                session = self._sessions.get(session_id)
                if session is not None:
                    session.in_flight -= 1
                    session.last_active = self._clock()

    def _count(self, owner: tuple[str, str]) -> int:
        """Sessions ``owner`` holds now, forgetting those idle longer than the SDK keeps them."""
        now = self._clock()
        expired = [
            key
            for key, session in self._sessions.items()
            if session.in_flight == 0 and now - session.last_active > self._idle_seconds
        ]
        for key in expired:
            del self._sessions[key]
        return sum(1 for session in self._sessions.values() if session.owner == owner)


async def _too_many_sessions(send: Send, per_client: int, idle_seconds: float) -> None:
    message = (
        f"Too many open sessions for this client ({per_client}): end one (HTTP DELETE) or wait for an idle one "
        f"to expire (after {idle_seconds:g}s)"
    )
    body = ('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"' + message + '"}}').encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"retry-after", str(max(1, round(idle_seconds))).encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})
