"""An HTTP desk in this process: the ASGI app a served desk runs (``build_asgi``), its lifespan started, reached
through an httpx2 transport that streams, so a real ``mcp.Client`` gets server-sent events as they are sent
(approval questions, sampling requests, log notifications on an open call's stream).

Use it for what the HTTP app answers: statuses, headers, sessions, the tools in both eras. A desk process
(tests/http_desk.py) is still the way to test what only a process shows: the port it binds, signals, connection
caps and read deadlines (uvicorn's), its stdout and stderr, the keychain and environment the child reads.
httpx2's own ASGITransport would do for plain requests, but it answers only when the app's whole body is sent:
an open event stream would never answer.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from incident_desk.assembly import build_app
from incident_desk.http.serve import MCP_PATH, build_asgi
from incident_desk.server import build_server
from incident_desk.settings.model import load_settings
from tests.http_desk import HANDSHAKE, INITIALIZE, MCP_HEADERS

Scope = dict[str, Any]
Message = dict[str, Any]
ASGIApp = Callable[..., Any]
PEER = ("127.0.0.1", 40000)  # the client address the app sees


class _StreamedBody(httpx2.AsyncByteStream):
    """A response body handed on part by part; closing it tells the app the client went away."""

    def __init__(self, parts: MemoryObjectReceiveStream[bytes], gone: anyio.Event) -> None:
        self._parts = parts
        self._gone = gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._parts:
            yield part

    async def aclose(self) -> None:
        self._gone.set()
        self._parts.close()


class StreamingASGITransport(httpx2.AsyncBaseTransport):
    """Each request runs the app in ``tasks``; the response returns at its start and its body streams after."""

    def __init__(self, app: ASGIApp, tasks: TaskGroup, client: tuple[str, int] = PEER) -> None:
        self._app = app
        self._tasks = tasks
        self._client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = b"".join([part async for part in request.stream])  # type: ignore[union-attr]
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(name.lower(), value) for name, value in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port or 80),
            "client": self._client,
            "root_path": "",
        }
        started = anyio.Event()
        gone = anyio.Event()
        head: dict[str, Any] = {}
        send_part, parts = anyio.create_memory_object_stream[bytes](max_buffer_size=math.inf)
        request_sent = False

        async def receive() -> Message:
            nonlocal request_sent
            if not request_sent:
                request_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                head["status"] = message["status"]
                head["headers"] = message.get("headers", [])
                started.set()
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    try:
                        send_part.send_nowait(message["body"])
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        gone.set()
                if not message.get("more_body", False):
                    send_part.close()

        async def run() -> None:
            try:
                await self._app(scope, receive, send)
            except Exception as exc:
                head.setdefault("error", exc)
            finally:
                send_part.close()
                started.set()

        self._tasks.start_soon(run)
        await started.wait()
        if "status" not in head:
            raise httpx2.RemoteProtocolError(f"the app answered nothing: {head.get('error')!r}", request=request)
        return httpx2.Response(head["status"], headers=head["headers"], stream=_StreamedBody(parts, gone))


@asynccontextmanager
async def _lifespan(app: ASGIApp) -> AsyncIterator[None]:
    """The ASGI lifespan protocol, as uvicorn drives it (``lifespan="on"``): started before the first request,
    shut down after the last."""
    to_app, app_receives = anyio.create_memory_object_stream[Message](max_buffer_size=math.inf)
    app_sends, from_app = anyio.create_memory_object_stream[Message](max_buffer_size=math.inf)
    lifespan: Scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    async with to_app, app_receives, app_sends, from_app, anyio.create_task_group() as tasks:
        tasks.start_soon(app, lifespan, app_receives.receive, app_sends.send)
        await to_app.send({"type": "lifespan.startup"})
        started = await from_app.receive()
        assert started["type"] == "lifespan.startup.complete", started
        try:
            yield
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            with anyio.fail_after(10):
                stopped = await from_app.receive()
            assert stopped["type"] == "lifespan.shutdown.complete", stopped


class InProcessDesk:
    """A desk's HTTP app running in this process; ``url`` is its MCP endpoint, ``http()`` a client of it."""

    def __init__(self, app: ASGIApp, base_url: str, tasks: TaskGroup) -> None:
        self.app = app
        self.base_url = base_url
        self.url = f"{base_url}{MCP_PATH}"
        self._tasks = tasks

    def http(self, client: tuple[str, int] = PEER, **options: Any) -> httpx2.AsyncClient:
        """An httpx2 client whose requests reach this desk's app (pass it to ``streamable_http_client``)."""
        options.setdefault("timeout", 30)
        transport = StreamingASGITransport(self.app, self._tasks, client)
        return httpx2.AsyncClient(transport=transport, base_url=self.base_url, **options)


@asynccontextmanager
async def in_process_desk(token: str | None = None, **settings: object) -> AsyncIterator[InProcessDesk]:
    """The HTTP app of a desk with these settings (as ``load_settings`` takes them) and bearer ``token``, served
    in process until the block ends. Its address names port 8765 (nothing listens there)."""
    app = build_app(load_settings({"transport": "http", "port": 8765, **settings}))
    asgi = build_asgi(build_server(app), app, token=token)
    async with _lifespan(asgi), anyio.create_task_group() as requests:
        yield InProcessDesk(asgi, f"http://127.0.0.1:{app.settings.port}", requests)
        requests.cancel_scope.cancel()  # event streams still open when the block ends


async def open_session_in_process(http: httpx2.AsyncClient, url: str, **headers: str) -> httpx2.Response:
    """tests/http_desk.py's ``open_session`` for an in-process desk: a 2025-11-25 stateful session, handshake and
    all; the response carries its mcp-session-id when it opened."""
    opened = await http.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
    session_id = opened.headers.get("mcp-session-id")
    if opened.status_code == 200 and session_id:
        follow = {**MCP_HEADERS, **headers, "mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=initialized, headers=follow)).status_code == 202
    return opened
