"""Hostile HTTP peers, on loopback with ports chosen at run time: none of them needs a token to try.

Half-open connections and slow bodies, connection floods, /healthz pollers, two Authorization headers, a token in
the URL, and log floods: each bounded in count and time. Sessions per client: ``test_http_sessions.py``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx2
import pytest

from incident_desk.assembly import build_app
from incident_desk.http.serve import build_asgi
from incident_desk.server import build_server
from incident_desk.settings.model import load_settings
from tests.helpers import synthetic_incidents
from tests.http_desk import HANDSHAKE, INITIALIZE, MCP_HEADERS, TOKEN, run_desk
from tests.http_desk import open_session as _open_session

pytestmark = pytest.mark.http
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts descriptors in /proc")


def _descriptors(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def _closed_by_server(peer: socket.socket, deadline: float) -> bool:
    """Whether the server closes ``peer`` before ``deadline`` (after answering it or not)."""
    while True:
        peer.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            if not peer.recv(65536):
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


@pytest.mark.anyio
async def test_healthz_touches_no_data_file_however_many_incidents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Liveness is O(1): no listing, stat or open of the data directory, at 10 or at 5,000 incidents."""
    calls: dict[str, int] = {}

    def counting(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            # This desk's files only: a thread another test of this worker left behind may touch its own.
            target = args[0] if args else kwargs.get("path", ".")
            if kwargs.get("dir_fd") is not None or isinstance(target, int) or str(target).startswith(str(tmp_path)):
                calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        return call

    costs = []
    for count in (10, 5000):
        root = synthetic_incidents(tmp_path / f"desk-{count}", count)
        app = build_app(load_settings({"data_dir": root}))
        asgi = build_asgi(build_server(app), app, token=None)
        async with httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=asgi), base_url="http://127.0.0.1:8765"
        ) as http:
            calls.clear()
            with monkeypatch.context() as patched:
                for name in ("listdir", "scandir", "stat", "lstat", "open"):
                    patched.setattr(os, name, counting(name, getattr(os, name)))
                answers = [await http.get("/healthz") for _ in range(20)]
            costs.append(dict(calls))
        assert {answer.status_code for answer in answers} == {200}
        assert answers[0].json()["status"] == "ok"
    assert costs == [{}, {}]


@linux_only
def test_half_open_connections_and_slow_bodies_are_closed_and_never_crowd_out_requests(tmp_path: Path) -> None:
    limit, read_timeout, attackers = 40, 2.0, 300
    env = {"INCIDENT_DESK_HTTP_MAX_CONNECTIONS": str(limit), "INCIDENT_DESK_HTTP_READ_TIMEOUT_SECONDS": "2"}
    with run_desk(tmp_path, **env) as desk, ExitStack() as sockets:
        baseline = _descriptors(desk.process.pid)
        half_open: list[socket.socket] = []
        for number in range(attackers):
            peer = sockets.enter_context(socket.create_connection(("127.0.0.1", desk.port), timeout=5))
            if number % 2:
                peer.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")  # slow body
            else:
                peer.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
            half_open.append(peer)
        started = time.monotonic()
        answers = [httpx2.get(f"http://127.0.0.1:{desk.port}/healthz", timeout=5) for _ in range(5)]
        held = _descriptors(desk.process.pid)
        closed_by_server = sum(_closed_by_server(peer, started + read_timeout + 5) for peer in half_open)
        later = httpx2.get(f"http://127.0.0.1:{desk.port}/healthz", timeout=5)
        stderr = desk.stderr()
    assert [answer.status_code for answer in answers] == [200] * 5
    assert held <= baseline + limit + 5, f"{held} descriptors with {attackers} half-open peers (baseline {baseline})"
    assert closed_by_server == attackers
    assert later.status_code == 200
    assert stderr.count("closed the HTTP connection that waited longest") <= 6, "repeats are rate-limited"


def test_excess_connections_get_503_while_every_connection_is_busy(tmp_path: Path) -> None:
    with run_desk(tmp_path, INCIDENT_DESK_HTTP_MAX_CONNECTIONS="3") as desk, ExitStack() as streams:
        http = streams.enter_context(httpx2.Client(timeout=10))
        for _ in range(3):  # three long-lived SSE streams: three busy connections
            session_id = _open_session(http, desk.url).headers["mcp-session-id"]
            headers = {"Accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE}
            stream = streams.enter_context(http.stream("GET", desk.url, headers=headers))
            assert stream.status_code == 200
        busy = httpx2.get(f"http://127.0.0.1:{desk.port}/healthz", timeout=5)
        streams.close()
        deadline = time.monotonic() + 10
        while (free := httpx2.get(f"http://127.0.0.1:{desk.port}/healthz", timeout=5)).status_code != 200:
            assert time.monotonic() < deadline, "connections never freed up"
            time.sleep(0.1)
    assert busy.status_code == 503
    assert busy.headers["retry-after"] == "1"
    assert "try again shortly" in busy.json()["message"]
    assert free.status_code == 200


def _raw_request(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as peer:
        peer.sendall(request)
        answer = b""
        while chunk := peer.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and b"connection: close" not in answer.lower():
                break
        return answer


def test_two_authorization_headers_are_refused(tmp_path: Path) -> None:
    good, bad = f"Bearer {TOKEN}", "Bearer wrong-token"
    with run_desk(tmp_path, INCIDENT_DESK_HTTP_TOKEN=TOKEN) as desk:
        body = json.dumps(INITIALIZE)
        answers = []
        for first, second in ((bad, good), (good, bad), (good, good)):
            request = (
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{desk.port}\r\nAuthorization: {first}\r\n"
                f"Authorization: {second}\r\nAccept: application/json, text/event-stream\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
            )
            answers.append(_raw_request(desk.port, request.encode()))
        with httpx2.Client(headers={"Authorization": good}, timeout=10) as http:
            single = _open_session(http, desk.url)
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert b"send one Authorization header, not 2" in answer
    assert single.status_code == 200


def test_a_token_in_the_url_is_refused_and_never_logged(tmp_path: Path) -> None:
    innocent = "innocent-value-0123456789"
    with run_desk(tmp_path, "--log-level", "debug", INCIDENT_DESK_HTTP_TOKEN=TOKEN) as desk:
        base = f"http://127.0.0.1:{desk.port}"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        refused = [
            httpx2.post(f"{desk.url}?access_token={TOKEN}", json=INITIALIZE, headers=MCP_HEADERS, timeout=5),
            httpx2.post(f"{desk.url}?token={TOKEN}", json=INITIALIZE, headers={**MCP_HEADERS, **auth}, timeout=5),
            httpx2.get(f"{base}/healthz?api-key=anything", timeout=5),
            httpx2.get(f"{base}/healthz?q={TOKEN}", timeout=5),
            httpx2.get(f"{base}/{TOKEN}", timeout=5),
        ]
        allowed = httpx2.get(f"{base}/healthz?probe={innocent}", timeout=5)
        stderr = desk.stderr()
    assert [response.status_code for response in refused] == [400] * 5
    assert "credentials do not belong in the URL" in refused[0].json()["message"]
    assert allowed.status_code == 200
    assert "/healthz?[query withheld]" in stderr, "the access log is on at debug, and withholds queries"
    assert TOKEN not in stderr
    assert innocent not in stderr


def test_repeated_error_lines_are_rate_limited(tmp_path: Path) -> None:
    with run_desk(tmp_path) as desk:
        for _ in range(200):
            _raw_request(desk.port, b"NOT-HTTP\r\n\r\n")
        answer = httpx2.get(f"http://127.0.0.1:{desk.port}/healthz", timeout=5)
        stderr = desk.stderr()
    assert answer.status_code == 200
    assert 1 <= stderr.count("Invalid HTTP request received.") <= 5
