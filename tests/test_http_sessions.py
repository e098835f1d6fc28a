"""Stateful HTTP sessions: an idle session never keeps a new one out, and who a client is cannot be forged.

Real desks as child processes on loopback, driven by ``mcp.Client`` over Streamable HTTP and by raw httpx for the
header checks; one in-process test looks inside the SDK to see that closed sessions are really gone.
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import anyio
import httpx2
import pytest
from starlette.types import Message, Receive, Scope, Send

from incident_desk.assembly import build_app
from incident_desk.http import sessions as http_sessions
from incident_desk.http.peers import ClientAddress, forwarded_hops
from incident_desk.http.serve import build_asgi
from incident_desk.http.sessions import HANDSHAKE_GRACE_SECONDS
from incident_desk.server import build_server
from incident_desk.settings.model import load_settings
from tests.helpers import text_of
from tests.http_desk import HANDSHAKE, INITIALIZE, MCP_HEADERS, TOKEN, open_session, ping, run_desk
from tests.load_runs import bearer_client, clients_sharing_one_token

pytestmark = [pytest.mark.anyio, pytest.mark.http]

AUTH = {"Authorization": f"Bearer {TOKEN}"}
PAST_GRACE = HANDSHAKE_GRACE_SECONDS + 0.5  # sessions opened before this sleep are no longer in their handshake


async def _works(url: str) -> str:
    """A new client's whole life: connect, call a tool, read a resource; the tool's text."""
    async with bearer_client(url) as client:
        listing = await client.call_tool("list_incidents", {})
        await client.read_resource("incident://INC-1043/log")
    assert not listing.is_error
    return text_of(listing)


async def test_never_closed_sessions_never_keep_a_new_client_out(tmp_path: Path) -> None:
    """20 sessions left open (more than the default 16): a new client connects, the 5 oldest idle ones are closed."""
    with (
        run_desk(tmp_path, INCIDENT_DESK_HTTP_TOKEN=TOKEN) as desk,
        httpx2.Client(headers=AUTH, timeout=10) as leaker,
    ):
        opened = [open_session(leaker, desk.url) for _ in range(20)]
        assert [response.status_code for response in opened] == [200] * 20
        leaked = [response.headers["mcp-session-id"] for response in opened]
        time.sleep(PAST_GRACE)
        listing = await _works(desk.url)
        statuses = [ping(leaker, desk.url, session_id) for session_id in leaked]
        stderr = desk.stderr()
    assert "INC-1043" in listing
    assert statuses == [404] * 5 + [200] * 15, "the client keeps 15 idle sessions and the new one"
    assert "closed a client's least recently used idle session: it keeps 16" in stderr


async def test_pinging_idle_sessions_does_not_keep_a_new_client_out(tmp_path: Path) -> None:
    with (
        run_desk(tmp_path, INCIDENT_DESK_HTTP_TOKEN=TOKEN) as desk,
        httpx2.Client(headers=AUTH, timeout=10) as pinger,
    ):
        held = [open_session(pinger, desk.url).headers["mcp-session-id"] for _ in range(20)]
        stop = threading.Event()
        answers: dict[str, set[int]] = {session_id: set() for session_id in held}

        def keep_pinging() -> None:
            with httpx2.Client(headers=AUTH, timeout=10) as http:
                while not stop.is_set():
                    for session_id in held:
                        answers[session_id].add(ping(http, desk.url, session_id))

        thread = threading.Thread(target=keep_pinging)
        thread.start()
        try:
            await anyio.sleep(PAST_GRACE)
            listing = await _works(desk.url)
            await anyio.sleep(0.5)
        finally:
            stop.set()
            thread.join()
    assert "INC-1043" in listing
    closed = [session_id for session_id in held if 404 in answers[session_id]]
    # At most one session has a ping in flight when the new client arrives (a session is idle again once its answer
    # is sent, before its client sends the next ping); every idle one past 15 is closed.
    assert 4 <= len(closed) <= 5, answers
    assert all(answers[session_id] == {200} for session_id in held if session_id not in closed)


async def test_sessions_in_use_are_never_closed_and_ended_ones_are_forgotten(tmp_path: Path) -> None:
    """Past its idle cap a client keeps every session it is using; DELETE and the idle timeout still end sessions."""
    env = {
        "INCIDENT_DESK_HTTP_TOKEN": TOKEN,
        "INCIDENT_DESK_HTTP_MAX_SESSIONS_PER_CLIENT": "2",
        "INCIDENT_DESK_HTTP_SESSION_IDLE_SECONDS": "8",
    }
    with (
        run_desk(tmp_path, **env) as desk,
        httpx2.Client(headers=AUTH, timeout=10) as http,
        ExitStack() as streams,
    ):
        live = [open_session(http, desk.url).headers["mcp-session-id"] for _ in range(4)]
        for session_id in live:  # each client listens on its event stream: its session is in use
            headers = {"Accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE}
            assert streams.enter_context(http.stream("GET", desk.url, headers=headers)).status_code == 200
        idle = [open_session(http, desk.url).headers["mcp-session-id"] for _ in range(3)]
        time.sleep(PAST_GRACE)
        with anyio.fail_after(30):
            listing = await _works(desk.url)
        live_after = [ping(http, desk.url, session_id) for session_id in live]
        idle_after = [ping(http, desk.url, session_id) for session_id in idle]
        ended = http.delete(desk.url, headers={"mcp-session-id": idle[-1]})
        after_delete = ping(http, desk.url, idle[-1])
        streams.close()
        time.sleep(9)  # longer than the idle timeout, with nothing in flight
        expired = [ping(http, desk.url, session_id) for session_id in live]
    assert "INC-1043" in listing
    assert live_after == [200] * 4, "sessions with a client listening are never closed to make room"
    assert idle_after == [404, 404, 200], "the client keeps one idle session (cap 2) and the new one"
    assert ended.status_code == 200 and after_delete == 404
    assert expired == [404] * 4, "the SDK expired the idle sessions"


async def test_ten_clients_sharing_one_token_for_3_seconds(tmp_path: Path) -> None:
    """The path of bench/bench_load.py's 50 clients for 30 seconds, briefly: half long-lived, half reconnecting."""
    await clients_sharing_one_token(tmp_path, clients=10, seconds=3)


def test_at_the_desk_cap_the_least_recently_used_idle_session_makes_room(tmp_path: Path) -> None:
    """Three sessions in all: a newcomer on another address closes the desk's oldest idle session, not its own."""
    with (
        run_desk(tmp_path, INCIDENT_DESK_HTTP_MAX_SESSIONS="3") as desk,
        httpx2.Client(timeout=10) as first,
        httpx2.Client(timeout=10, transport=httpx2.HTTPTransport(local_address="127.0.0.2")) as second,
    ):
        held = [open_session(first, desk.url).headers["mcp-session-id"] for _ in range(3)]
        time.sleep(PAST_GRACE)
        ping(first, desk.url, held[0])  # now the most recently used
        newcomer = open_session(second, desk.url)
        statuses = [ping(first, desk.url, session_id) for session_id in held]
        stderr = desk.stderr()
    assert newcomer.status_code == 200
    assert statuses == [200, 404, 200]
    assert "closed the desk's least recently used idle session: 3 are open" in stderr


async def test_bad_host_and_origin_are_refused_before_the_session_count(tmp_path: Path) -> None:
    """With the desk full of sessions in use, a foreign Host still gets 421 and a foreign Origin 403."""
    env = {"INCIDENT_DESK_HTTP_MAX_SESSIONS": "2", "INCIDENT_DESK_HTTP_MAX_SESSIONS_PER_CLIENT": "1"}
    with run_desk(tmp_path, **env) as desk, httpx2.Client(timeout=10) as http, ExitStack() as streams:
        for _ in range(2):
            session_id = open_session(http, desk.url).headers["mcp-session-id"]
            headers = {"Accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE}
            assert streams.enter_context(http.stream("GET", desk.url, headers=headers)).status_code == 200
        time.sleep(PAST_GRACE)
        bad_host = http.post(desk.url, json=INITIALIZE, headers={**MCP_HEADERS, "Host": "evil.example"})
        bad_origin = http.post(desk.url, json=INITIALIZE, headers={**MCP_HEADERS, "Origin": "http://evil.example"})
        full = http.post(desk.url, json=INITIALIZE, headers=MCP_HEADERS)
    assert bad_host.status_code == 421
    assert bad_origin.status_code == 403
    assert full.status_code == 503, "the desk is full of sessions in use: the count would have refused them too"
    assert full.json()["error"]["message"].startswith("The desk holds as many sessions as it allows (2)")


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted-peer", "trusted-proxy"])
async def test_forwarded_headers_count_only_from_trusted_proxies(tmp_path: Path, trusted: bool) -> None:
    """Idle cap 1: which sessions a new one closes shows whom the desk took each client for."""
    env = {"INCIDENT_DESK_HTTP_TOKEN": TOKEN, "INCIDENT_DESK_HTTP_MAX_SESSIONS_PER_CLIENT": "1"}
    if trusted:
        env["INCIDENT_DESK_TRUSTED_PROXIES"] = '["127.0.0.0/30"]'
    with run_desk(tmp_path, **env) as desk, httpx2.Client(headers=AUTH, timeout=10) as http:
        first = open_session(http, desk.url, **{"X-Forwarded-For": "10.0.0.1"}).headers["mcp-session-id"]
        second = open_session(http, desk.url, Forwarded='for="10.0.0.2:5000"').headers["mcp-session-id"]
        time.sleep(PAST_GRACE)
        # The leftmost hop is the client's own claim; the proxy appended the address it saw, which is what counts.
        third = open_session(http, desk.url, **{"X-Forwarded-For": "10.0.0.2, 10.0.0.1, 127.0.0.2"})
        statuses = [ping(http, desk.url, session_id) for session_id in (first, second)]
    assert third.status_code == 200
    if trusted:
        assert statuses == [404, 200], "10.0.0.1 kept no idle session; 10.0.0.2 is another client"
    else:
        assert statuses == [404, 404], "every session came from 127.0.0.1, whatever the headers said"


def test_client_address_reads_forwarded_headers_only_from_trusted_peers() -> None:
    trusted = [ipaddress.ip_network("10.9.0.0/16"), ipaddress.ip_network("::1/128")]

    def client_of(peer: str, *headers: tuple[bytes, bytes]) -> str:
        seen: list[str] = []

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            seen.append(scope["client"][0])

        async def nothing() -> Message:
            return {}

        async def ignore(message: Message) -> None:
            return None

        scope: Scope = {"type": "http", "client": (peer, 1234), "headers": list(headers)}
        asyncio.run(ClientAddress(app, trusted)(scope, nothing, ignore))
        return seen[0]

    xff = (b"x-forwarded-for", b"192.0.2.7, 10.9.1.1")
    assert client_of("203.0.113.5", xff) == "203.0.113.5", "an untrusted peer's header is ignored"
    assert client_of("10.9.0.1", xff) == "192.0.2.7", "trusted hops are skipped from the right"
    assert client_of("10.9.0.1", (b"x-forwarded-for", b"198.51.100.1, 192.0.2.7")) == "192.0.2.7"
    assert client_of("10.9.0.1", (b"x-forwarded-for", b"10.9.3.3, 10.9.4.4")) == "10.9.3.3", "all trusted: farthest"
    assert client_of("10.9.0.1") == "10.9.0.1", "no header: the proxy itself"
    assert client_of("::1", (b"forwarded", b'for="[2001:db8::5]:443";proto=https'), xff) == "2001:db8::5"
    both = [(b"forwarded", b"for=192.0.2.1, for=198.51.100.2;by=x"), (b"x-forwarded-for", b"1.1.1.1")]
    assert forwarded_hops(both) == ["192.0.2.1", "198.51.100.2"], "Forwarded wins over X-Forwarded-For"
    assert forwarded_hops([(b"X-Forwarded-For", b"192.0.2.1:8080,  2001:db8::1 ")]) == ["192.0.2.1", "2001:db8::1"]


async def test_closed_sessions_leave_nothing_behind_in_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """200 sessions opened and abandoned at an idle cap of 4: the SDK holds at most 4, and no server task each."""
    monkeypatch.setattr(http_sessions, "HANDSHAKE_GRACE_SECONDS", 0.0)
    app = build_app(load_settings({"transport": "http", "http_max_sessions_per_client": 4}))
    server = build_server(app)
    asgi = build_asgi(server, app, token=None)
    transport = httpx2.ASGITransport(app=asgi, client=("127.0.0.1", 40000))
    async with (
        server.session_manager.run(),
        httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http,
    ):
        baseline_tasks = len(asyncio.all_tasks())
        held = []
        for _ in range(200):
            opened = await http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
            assert opened.status_code == 200
            held.append(opened.headers["mcp-session-id"])
            follow = {**MCP_HEADERS, "mcp-session-id": held[-1], "mcp-protocol-version": HANDSHAKE}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post("/mcp", json=initialized, headers=follow)).status_code == 202
        await anyio.sleep(0.2)  # closed sessions' server tasks finish
        in_sdk = set(server.session_manager._server_instances)
        tasks = len(asyncio.all_tasks()) - baseline_tasks
    assert in_sdk == set(held[-4:])
    assert tasks <= 4 * 3, f"{tasks} tasks left for 4 sessions"


async def test_a_session_whose_answer_is_sent_is_idle_while_its_handler_tidies_up() -> None:
    """The SDK may still be tidying up a request after its answer left, while the client already sends the next one:
    that session is idle again and makes room like any other (it once counted as in use until the tidy-up ended)."""
    now = [0.0]
    tidying = anyio.Event()
    closed: list[str] = []
    opened = iter(f"s{number}" for number in range(10))

    async def sdk(scope: Scope, receive: Receive, send: Send) -> None:
        session_id = dict(scope["headers"]).get(b"mcp-session-id", b"").decode()
        if scope["method"] == "DELETE":
            closed.append(session_id)
        headers = [] if session_id else [(b"mcp-session-id", next(opened).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}", "more_body": False})
        if scope["method"] == "POST" and session_id == "s0":
            await tidying.wait()

    limiter = http_sessions.SessionLimiter(
        sdk, path="/mcp", per_client=1, max_sessions=10, idle_seconds=600, clock=lambda: now[0]
    )

    async def request(session_id: str = "", method: str = "POST") -> None:
        headers = [(b"x-incident-desk-principal", b"alice")] + (
            [(b"mcp-session-id", session_id.encode())] if session_id else []
        )
        scope = {"type": "http", "path": "/mcp", "method": method, "headers": headers, "client": ("10.0.0.7", 5000)}

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            return None

        await limiter(scope, receive, send)

    await request()
    now[0] = HANDSHAKE_GRACE_SECONDS + 1
    async with anyio.create_task_group() as group:
        group.start_soon(request, "s0")  # answered at once, then the handler tidies up until told
        await anyio.sleep(0.05)
        await request()
        tidying.set()
    assert closed == ["s0"], "the answered session was idle: the client's new session took its place"
    assert limiter.open_sessions == 1
