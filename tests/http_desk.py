"""An HTTP desk started as a child process on a loopback port chosen at run time, for the tests that need one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2

from tests.helpers import ROOT, child_env, free_port

TOKEN = "test-token-0123456789abcdef"  # the bearer token the HTTP tests configure
HANDSHAKE = "2025-11-25"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "peer", "version": "1"}},
}


@dataclass
class Desk:
    url: str
    port: int
    stderr_path: Path
    process: subprocess.Popen[bytes]

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def logged_decisions(self) -> list[tuple[str, str | None]]:
        """The restart decisions this desk logged itself (outcome, ticket), in order: which replica decided what."""
        events = [json.loads(line) for line in self.stderr().splitlines() if line.startswith("{")]
        return [(event["outcome"], event["ticket"]) for event in events if event.get("event") == "restart decision"]


def desk_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return child_env(tmp_path / "audit.sqlite3", **extra)


@contextmanager
def run_desk(tmp_path: Path, *args: str, name: str = "desk", **env: str) -> Iterator[Desk]:
    port = free_port()
    host = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
    stderr_path = tmp_path / f"{name}-{port}.log"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "incident_desk",
                "--transport",
                "http",
                "--port",
                str(port),
                "--log-format",
                "json",
                *args,
            ],
            cwd=ROOT,
            env=desk_env(tmp_path, **env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx2.get(f"http://{host}:{port}/healthz", timeout=1).status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"desk did not start: {stderr_path.read_text()}")
                time.sleep(0.1)
            yield Desk(f"http://{host}:{port}/mcp", port, stderr_path, process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            stdout = process.stdout.read() if process.stdout else b""
            if process.stdout:
                process.stdout.close()
            assert stdout == b"", f"the HTTP desk wrote to stdout: {stdout[:200]!r}"


def open_session(http: httpx2.Client, url: str, **headers: str) -> httpx2.Response:
    """A 2025-11-25 stateful session, handshake and all; the response carries its mcp-session-id when it opened."""
    opened = http.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
    session_id = opened.headers.get("mcp-session-id")
    if opened.status_code == 200 and session_id:
        follow = {**MCP_HEADERS, **headers, "mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(url, json=initialized, headers=follow).status_code == 202
    return opened


def ping(http: httpx2.Client, url: str, session_id: str) -> int:
    """The HTTP status of a ping in a session: 200 while it is open, 404 once the desk has closed it."""
    headers = {**MCP_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": HANDSHAKE}
    return http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers).status_code
