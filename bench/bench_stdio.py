"""Cold start and per-request latency of incident-desk over stdio, as ratios against a minimal SDK server.

Cold start is timed to the initialize answer and to the first tools/list answer (the desk registers its tools
on the first request after initialize, so the second is when a client can use it), in interleaved rounds: a
minimal server is spawned, then the desk, then the desk first, and so on.

Per request, the minimal server, the desk and a second minimal server (the control) run side by side and the
client sends one request to each in turn, reversing the order every time, so whatever the machine does in the
meantime falls on all three alike. The control against the baseline shows how far the method itself moves a
ratio. Both servers are spawned the way a desktop client spawns them and driven by mcp.Client.

Run: .venv/bin/python bench/bench_stdio.py [rounds] [calls]
"""

from __future__ import annotations

import compileall
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
BLOCK = 250  # requests per server in one block; the spread of the per-block ratios is reported

Request = Callable[[Client], Awaitable[object]]

# What each server is asked, per metric: (the minimal server's request, the desk's request).
METRICS: dict[str, tuple[Request, Request]] = {
    "resources/read p50 (ms): log window vs constant": (
        lambda client: client.read_resource("note://index"),
        lambda client: client.read_resource("incident://INC-1043/log"),
    ),
    "tools/call p50 (ms): list_incidents vs echo": (
        lambda client: client.call_tool("echo", {"text": "x"}),
        lambda client: client.call_tool("list_incidents", {}),
    ),
    "tools/call p50 (ms): read_incident_log vs echo": (
        lambda client: client.call_tool("echo", {"text": "x"}),
        lambda client: client.call_tool("read_incident_log", {"incidentId": "INC-1043"}),
    ),
}


@dataclass
class Server:
    name: str
    params: StdioServerParameters
    is_desk: bool
    client: Client | None = None
    latencies: dict[str, list[float]] = field(default_factory=dict)

    def request(self, metric: str) -> Request:
        return METRICS[metric][1 if self.is_desk else 0]


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    tmp = tempfile.mkdtemp(prefix="desk-bench-")
    env.update(
        INCIDENT_DESK_AUDIT_DB=f"{tmp}/audit.sqlite3",
        INCIDENT_DESK_LOG_LEVEL="warning",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    return env


def _params(args: list[str], env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env=env)


async def _cold_start(params: StdioServerParameters) -> tuple[float, float]:
    start = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        ready = time.perf_counter() - start
        await client.list_tools()
        return ready, time.perf_counter() - start


async def _per_request(servers: list[Server], calls: int) -> None:
    async with AsyncExitStack() as stack:
        for server in servers:
            server.client = await stack.enter_async_context(Client(server.params, mode="legacy"))
            await server.client.list_tools()
        for metric in METRICS:
            for server in servers:  # warm up: first reads, caches, the specialising interpreter
                assert server.client is not None
                for _ in range(50):
                    await server.request(metric)(server.client)
                server.latencies[metric] = []
            for turn in range(calls):
                for server in servers if turn % 2 == 0 else reversed(servers):
                    assert server.client is not None
                    started = time.perf_counter()
                    await server.request(metric)(server.client)
                    server.latencies[metric].append(time.perf_counter() - started)


def _spread(ratios: list[float]) -> str:
    """The median of several ratios and their range; a dash when there are none (fewer requests than a block)."""
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def _ratio(ours: list[float], base: list[float]) -> str:
    """The ratio of the medians, then the median and range of the per-block ratios."""
    blocks = [
        statistics.median(ours[i : i + BLOCK]) / statistics.median(base[i : i + BLOCK])
        for i in range(0, len(base) - BLOCK + 1, BLOCK)
    ]
    whole = statistics.median(ours) / statistics.median(base)
    return f"{whole:7.2f}  {_spread(blocks)}"


async def main(rounds: int, calls: int) -> None:
    # As an install does (pip byte-compiles; uv and Python write .pyc on first import): never time compiling the
    # desk's sources, which happens on every start where .pyc cannot be written (PYTHONDONTWRITEBYTECODE).
    compileall.compile_dir(ROOT / "incident_desk", quiet=1)
    env = _environment()
    minimal_args = [str(ROOT / "bench" / "minimal_server.py")]
    desk_args = ["-m", "incident_desk"]

    load_at_start = os.getloadavg()[0]
    starts: dict[str, list[tuple[float, float]]] = {"minimal": [], "desk": []}
    for round_number in range(rounds):
        # Which server starts first alternates, so a machine slowing down or warming up favours neither.
        order = ["minimal", "desk"] if round_number % 2 == 0 else ["desk", "minimal"]
        for name in order:
            starts[name].append(await _cold_start(_params(minimal_args if name == "minimal" else desk_args, env)))

    baseline = Server("minimal SDK", _params(minimal_args, env), is_desk=False)
    desk = Server("incident-desk", _params(desk_args, _environment()), is_desk=True)
    control = Server("control", _params(minimal_args, _environment()), is_desk=False)
    load_after_starts = os.getloadavg()[0]
    if calls:  # 0 measures the cold start alone
        await _per_request([baseline, desk, control], calls)

    print(
        f"python {sys.version.split()[0]} on {os.cpu_count()} cores; cold start: {rounds} interleaved rounds "
        f"(load {load_at_start:.2f} before, {load_after_starts:.2f} after); per request: {calls} requests to each "
        f"server, alternating, blocks of {BLOCK} (load {os.getloadavg()[0]:.2f} after)"
    )
    print(f"{'metric':48} {'minimal SDK':>11} {'desk':>8} {'ratio':>7}  {'per-round/block':>18}  {'control':>7}")
    for index, label in enumerate(("cold start to initialized (s)", "cold start to tools listed (s)")):
        base = [start[index] for start in starts["minimal"]]
        ours = [start[index] for start in starts["desk"]]
        spread = _spread([o / b for o, b in zip(ours, base, strict=True)])
        print(
            f"{label:48} {statistics.median(base):11.3f} {statistics.median(ours):8.3f} "
            f"{statistics.median(ours) / statistics.median(base):7.2f}  {spread:>18}  {'-':>7}"
        )
    for metric in METRICS if calls else ():
        base_ms = statistics.median(baseline.latencies[metric]) * 1000
        ours_ms = statistics.median(desk.latencies[metric]) * 1000
        control_ratio = statistics.median(control.latencies[metric]) / statistics.median(baseline.latencies[metric])
        print(
            f"{metric:48} {base_ms:11.3f} {ours_ms:8.3f} "
            f"{_ratio(desk.latencies[metric], baseline.latencies[metric])}  {control_ratio:7.2f}"
        )


if __name__ == "__main__":
    anyio.run(
        main,
        int(sys.argv[1]) if len(sys.argv) > 1 else 10,
        int(sys.argv[2]) if len(sys.argv) > 2 else 1500,
    )
