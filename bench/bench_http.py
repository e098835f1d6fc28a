"""HTTP throughput of incident-desk against a minimal SDK server, as ratios in the same run.

Both serve Streamable HTTP on loopback through uvicorn (the desk with its bearer token, as a team desk runs);
10 and 50 concurrent clients call ``list_incidents`` on the desk and ``echo`` on the minimal server, with
stateful sessions and stateless, for a fixed time per round. Rounds interleave the two servers (and swap which
goes first) so machine noise hits both alike. Reported per configuration: calls/s and the server's CPU seconds
per call (from /proc, so Linux only), medians over rounds, desk/minimal ratios, and the 1-minute load average
(median over the configuration's rounds, read as each starts: the bench's own clients and servers count in it).
Run: .venv/bin/python bench/bench_http.py [rounds] [seconds per round]
"""

from __future__ import annotations

import asyncio
import compileall
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789abcdef"
PROTOCOL = "2025-11-25"
CLIENTS = (10, 50)
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    pid: int
    tool: str
    arguments: dict[str, Any]
    headers: dict[str, str]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@contextmanager
def _server(command: list[str], options: list[str], env: dict[str, str]) -> Iterator[tuple[str, int]]:
    port = _free_port()
    process = subprocess.Popen(
        [*command, str(port), *options], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"{command} did not start") from None
                time.sleep(0.1)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=10)


def _result(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response sent as JSON or as one server-sent event."""
    response.raise_for_status()
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                return dict(json.loads(line[5:]))
        raise RuntimeError("event stream without data")
    return dict(response.json())


async def _client(http: httpx2.AsyncClient, target: Target, stateful: bool, until: float, counts: list[int]) -> None:
    headers = {**target.headers, "mcp-protocol-version": PROTOCOL}
    if stateful:
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}},
        }
        opened = await http.post(target.url, json=initialize, headers=headers)
        _result(opened)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        notified = await http.post(
            target.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        notified.raise_for_status()
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": target.tool, "arguments": target.arguments},
    }
    while time.monotonic() < until:
        answer = _result(await http.post(target.url, json=call, headers=headers))
        if "result" not in answer or answer["result"].get("isError"):
            raise RuntimeError(f"{target.name}: {answer}")
        counts[0] += 1
    if stateful:
        (await http.delete(target.url, headers=headers)).raise_for_status()


async def _round(target: Target, clients: int, stateful: bool, seconds: float) -> tuple[float, float]:
    """Calls per second and server CPU seconds per call, over ``seconds`` of ``clients`` calling in a loop."""
    limits = httpx2.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as http:
        counts = [0]
        cpu_before = _cpu_seconds(target.pid)
        start = time.monotonic()
        until = start + seconds
        await asyncio.gather(*(_client(http, target, stateful, until, counts) for _ in range(clients)))
        elapsed = time.monotonic() - start
        cpu = _cpu_seconds(target.pid) - cpu_before
    return counts[0] / elapsed, cpu / max(counts[0], 1)


def main(rounds: int, seconds: float) -> None:
    # As an install does (pip byte-compiles; uv and Python write .pyc on first import): never time compiling the
    # desk's sources, which happens on every start where .pyc cannot be written (PYTHONDONTWRITEBYTECODE).
    compileall.compile_dir(ROOT / "incident_desk", quiet=1)
    scratch = Path(tempfile.mkdtemp(prefix="desk-bench-http-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    env.update(
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        INCIDENT_DESK_HTTP_TOKEN=TOKEN,
        INCIDENT_DESK_LOG_LEVEL="warning",
        INCIDENT_DESK_AUDIT_DB=str(scratch / "audit.sqlite3"),
    )
    minimal = [sys.executable, str(ROOT / "bench" / "minimal_server.py"), "--http"]
    desk = [sys.executable, "-m", "incident_desk", "--transport", "http", "--port"]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    results: dict[tuple[str, int, bool], list[tuple[float, float]]] = {}
    loads: dict[tuple[int, bool], list[float]] = {}
    with ExitStack() as stack:
        targets: dict[tuple[str, bool], Target] = {}
        for stateful in (True, False):
            mode = [] if stateful else ["--stateless"]
            url, pid = stack.enter_context(_server(minimal, mode, env))
            targets[("minimal", stateful)] = Target("minimal", url, pid, "echo", {"text": "x"}, {})
            url, pid = stack.enter_context(_server(desk, mode, env))
            targets[("desk", stateful)] = Target("desk", url, pid, "list_incidents", {}, auth)
        for (_, stateful), target in targets.items():  # warm up: first calls import what they need
            asyncio.run(_round(target, 2, stateful, 1.0))
        for number in range(rounds):
            for clients in CLIENTS:
                for stateful in (True, False):
                    order = ("minimal", "desk") if number % 2 == 0 else ("desk", "minimal")
                    loads.setdefault((clients, stateful), []).append(os.getloadavg()[0])
                    for name in order:
                        measured = asyncio.run(_round(targets[(name, stateful)], clients, stateful, seconds))
                        results.setdefault((name, clients, stateful), []).append(measured)
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cores; {rounds} interleaved rounds of {seconds:g} s")
    print(
        f"{'clients':>7} {'mode':>9} {'minimal calls/s':>16} {'desk calls/s':>13} {'ratio':>6} "
        f"{'minimal CPU ms/call':>20} {'desk CPU ms/call':>17} {'ratio':>6} {'load':>5}"
    )
    for clients in CLIENTS:
        for stateful in (True, False):
            base = results[("minimal", clients, stateful)]
            ours = results[("desk", clients, stateful)]
            base_rate = statistics.median(r[0] for r in base)
            our_rate = statistics.median(r[0] for r in ours)
            base_cpu = statistics.median(r[1] for r in base) * 1000
            our_cpu = statistics.median(r[1] for r in ours) * 1000
            kind = "stateful" if stateful else "stateless"
            print(
                f"{clients:>7} {kind:>9} {base_rate:>16.0f} {our_rate:>13.0f} {our_rate / base_rate:>6.2f} "
                f"{base_cpu:>20.2f} {our_cpu:>17.2f} {our_cpu / base_cpu:>6.2f} "
                f"{statistics.median(loads[(clients, stateful)]):>5.1f}"
            )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, float(sys.argv[2]) if len(sys.argv) > 2 else 4.0)
