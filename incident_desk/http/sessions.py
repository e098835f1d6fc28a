"""Stateful HTTP sessions, bounded so that an idle session never keeps a new one out.

A client is its authenticated principal and its address (the real one behind a trusted proxy, see
``peers``). A session is *in use* while a request of it is in flight (until the last part of its answer is
sent), its client's event stream (GET) included, or while it is younger than ``HANDSHAKE_GRACE_SECONDS``
(between ``initialize`` and the client's next request it has nothing in flight, yet a client is there);
otherwise it is *idle*, however recently it was pinged.

- A client keeps at most ``per_client`` idle sessions: opening one more first closes that client's least recently
  used idle sessions down to ``per_client - 1``. Sessions in use are never closed to make room, so a team sharing
  one token and one address (a NAT, a bastion, the test machine) can run as many live clients as the desk has room
  for; each such session holds a connection, which ``http_max_connections`` bounds.
- The desk holds at most ``max_sessions`` in all: at that cap the desk's least recently used idle session is
  closed; only when every session is in use does a newcomer get 503.
- Closing a session is the client's own ``DELETE`` sent to the SDK, so its transport and server task end and
  its memory is freed; its id answers 404 from then on.

Sessions are seen in the SDK's answers (the ``mcp-session-id`` it hands out) and forgotten when the client
deletes them, when the SDK no longer knows them (404), or once idle as long as the SDK's own idle timeout, which
the desk sets to the same value.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from incident_desk.identity.principal import PRINCIPAL_HEADER, PRINCIPAL_KEY_HEADER

logger = logging.getLogger(__name__)

MCP_SESSION_HEADER = b"mcp-session-id"
MCP_PROTOCOL_HEADER = b"mcp-protocol-version"
# A real client follows `initialize` at once with `notifications/initialized` and its event stream.
HANDSHAKE_GRACE_SECONDS = 5.0

Owner = tuple[str, str]


@dataclass
class _Session:
    owner: Owner
    opened: float
    in_flight: int = 0
    last_active: float = 0.0


class SessionLimiter:
    """Counts each client's sessions and closes idle ones to make room (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str,
        per_client: int,
        max_sessions: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._app = app
        self._path = path
        self._per_client = per_client
        self._max_sessions = max_sessions
        self._idle_seconds = idle_seconds
        self._clock = clock
        self._sessions: dict[str, _Session] = {}  # least recently used first
        self._opening = 0  # requests that may open a session, not answered yet

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

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
        if _person(headers) != session.owner[0]:
            # A session belongs to the person who opened it: another token gets the SDK's "no such session".
            await _not_found(scope, receive, send)
            return
        session.in_flight += 1
        status = 0
        answered = False

        def finish() -> None:
            nonlocal answered
            if not answered:
                answered = True
                self._done(session_id, session)

        async def watching(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)
            if _last_body(message):
                finish()

        try:
            await self._app(scope, receive, watching)
        finally:
            finish()
            if status == 404 or (scope.get("method") == "DELETE" and 200 <= status < 300):
                self._sessions.pop(session_id, None)

    async def _open(self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]) -> None:
        """A request without a session: it may open one, once its client and the desk have room."""
        era = headers.get(MCP_PROTOCOL_HEADER, b"").decode("latin-1")
        if era and era not in HANDSHAKE_PROTOCOL_VERSIONS:  # 2026-07-28 requests never open a session
            await self._app(scope, receive, send)
            return
        client = scope.get("client")
        owner = (_person(headers), str(client[0]) if client else "")
        if not await self._make_room(owner, headers.get(b"host", b"")):
            await _desk_full(scope, receive, send, self._max_sessions)
            return
        opened: list[str] = []
        self._opening += 1
        answered = False

        def stop_opening() -> None:
            nonlocal answered
            if not answered:
                answered = True
                self._opening -= 1

        def finish() -> None:
            while opened:
                session_id = opened.pop()
                session = self._sessions.get(session_id)
                if session is not None:
                    self._done(session_id, session)

        async def watching(message: Message) -> None:
            if message["type"] == "http.response.start":
                if int(message["status"]) < 400:
                    for name, value in message.get("headers", []):
                        if name.lower() == MCP_SESSION_HEADER:
                            session_id = value.decode("latin-1")
                            self._sessions[session_id] = _Session(owner, opened=self._clock(), in_flight=1)
                            opened.append(session_id)
                stop_opening()
            await send(message)
            if _last_body(message):
                finish()

        try:
            await self._app(scope, receive, watching)
        finally:
            stop_opening()
            finish()

    def _done(self, session_id: str, session: _Session) -> None:
        """A request of the session ended: it is now the most recently used."""
        session.in_flight -= 1
        session.last_active = self._clock()
        if self._sessions.get(session_id) is session:
            del self._sessions[session_id]
            self._sessions[session_id] = session

    async def _make_room(self, owner: Owner, host: bytes) -> bool:
        """Close the owner's oldest idle sessions past its cap, and the desk's past the total; False if the desk is
        full of sessions in use."""
        self._expire()
        now = self._clock()
        idle = [key for key, session in self._sessions.items() if self._idle(session, now)]
        owned = [key for key in idle if self._sessions[key].owner == owner]
        while len(owned) >= self._per_client:
            logger.info("closed a client's least recently used idle session: it keeps %d", self._per_client)
            oldest = owned.pop(0)
            idle.remove(oldest)
            await self._close(oldest, host)
        if len(self._sessions) + self._opening < self._max_sessions:
            return True
        if not idle:
            logger.warning("refused a new session: all %d sessions are in use", self._max_sessions)
            return False
        logger.info("closed the desk's least recently used idle session: %d are open", self._max_sessions)
        await self._close(idle[0], host)
        return True

    def _idle(self, session: _Session, now: float) -> bool:
        return session.in_flight == 0 and now - session.opened >= HANDSHAKE_GRACE_SECONDS

    async def _close(self, session_id: str, host: bytes) -> None:
        """End the session in the SDK as its client's DELETE would: transport closed, server task finished.

        The request is built by hand as ASGI messages: Starlette has types for answering, not for making one.
        """
        self._sessions.pop(session_id, None)
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": self._path,
            "raw_path": self._path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", host), (MCP_SESSION_HEADER, session_id.encode("latin-1"))],
            "client": None,
            "server": None,
        }

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            return None

        await self._app(scope, receive, discard)

    def _expire(self) -> None:
        """Forget sessions idle longer than the SDK keeps them (it has closed them already)."""
        now = self._clock()
        expired = [
            key
            for key, session in self._sessions.items()
            if session.in_flight == 0 and now - session.last_active > self._idle_seconds
        ]
        for key in expired:
            del self._sessions[key]


def _last_body(message: Message) -> bool:
    """The answer is complete once its last body part is sent: the request no longer keeps its session in use,
    though the SDK's handler may still be tidying up (its client can already be sending the next request)."""
    return message["type"] == "http.response.body" and not message.get("more_body", False)


def _rpc_error(message: str, status: int, headers: dict[str, str] | None = None) -> JSONResponse:
    """A JSON-RPC error answer for a request the SDK never sees (the id is unknown, so null)."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


async def _desk_full(scope: Scope, receive: Receive, send: Send, max_sessions: int) -> None:
    message = (
        f"The desk holds as many sessions as it allows ({max_sessions}) and every one is in use: try again shortly"
    )
    await _rpc_error(message, 503, {"retry-after": "1"})(scope, receive, send)


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    await _rpc_error("Session not found", 404)(scope, receive, send)


def _person(headers: dict[bytes, bytes]) -> str:
    """Who a checked request speaks for, exactly: the OAuth owner key (the hashed issuer and subject) when the
    layer set one, else the principal it named (the static token's fingerprint); never the display label, which
    is shortened and made printable."""
    key = headers.get(PRINCIPAL_KEY_HEADER.encode())
    return (key or headers.get(PRINCIPAL_HEADER.encode(), b"")).decode("latin-1")
