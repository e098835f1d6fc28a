"""Cold start and per-request latency of incident-desk over stdio, as ratios against a minimal SDK server.

Cold start is timed to the initialize answer and to the first tools/list answer (the desk registers its tools
on the first request after initialize, so the second is when a client can use it).

Both servers are spawned the way a desktop client spawns them and driven by mcp.Client in the same run, with
interleaved rounds so machine noise hits both alike. Run: .venv/bin/python bench/bench_stdio.py [rounds]
"""

from __future__ import annotations

import compileall
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
CALLS = 200


def _params(args: list[str], env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env=env)


async def _measure(
    params: StdioServerParameters, read_uri: str, tool: str, arguments: dict[str, Any]
) -> dict[str, float]:
    start = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        ready = time.perf_counter() - start
        await client.list_tools()
        listed = time.perf_counter() - start
        timings: dict[str, list[float]] = {"resources/read": [], "tools/call": []}
        for _ in range(CALLS):
            t = time.perf_counter()
            await client.read_resource(read_uri)
            timings["resources/read"].append(time.perf_counter() - t)
            t = time.perf_counter()
            await client.call_tool(tool, arguments)
            timings["tools/call"].append(time.perf_counter() - t)
    return {
        "cold start to initialized (s)": ready,
        # The desk registers its tools on the first request after initialize: this is when a client can use it.
        "cold start to tools listed (s)": listed,
        "resources/read median (ms)": statistics.median(timings["resources/read"]) * 1000,
        "tools/call median (ms)": statistics.median(timings["tools/call"]) * 1000,
    }


async def main(rounds: int) -> None:
    # As an install does (pip byte-compiles; uv and Python write .pyc on first import): never time compiling the
    # desk's sources, which happens on every start where .pyc cannot be written (PYTHONDONTWRITEBYTECODE).
    compileall.compile_dir(ROOT / "incident_desk", quiet=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    tmp = tempfile.mkdtemp(prefix="desk-bench-")
    env.update(INCIDENT_DESK_AUDIT_DB=f"{tmp}/audit.sqlite3", PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    env["INCIDENT_DESK_LOG_LEVEL"] = "warning"
    minimal = _params([str(ROOT / "bench" / "minimal_server.py")], env)
    desk = _params(["-m", "incident_desk"], env)
    results: dict[str, list[dict[str, float]]] = {"minimal": [], "desk": []}
    for _ in range(rounds):
        results["minimal"].append(await _measure(minimal, "note://index", "echo", {"text": "x"}))
        results["desk"].append(await _measure(desk, "incident://INC-1043/log", "list_incidents", {}))
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cores; {rounds} interleaved rounds, {CALLS} calls each")
    # The ratio of the medians, and the spread of the ratios within each round (the desk against the minimal
    # server started just before it), which shows how much the machine moved under the run.
    print(f"{'metric':34} {'minimal SDK':>12} {'incident-desk':>14} {'ratio':>7}  {'per-round ratios':>22}")
    for metric in results["minimal"][0]:
        base = statistics.median(r[metric] for r in results["minimal"])
        ours = statistics.median(r[metric] for r in results["desk"])
        per_round = [d[metric] / m[metric] for m, d in zip(results["minimal"], results["desk"], strict=True)]
        spread = f"{statistics.median(per_round):.2f} ({min(per_round):.2f}-{max(per_round):.2f})"
        print(f"{metric:34} {base:12.3f} {ours:14.3f} {ours / base:7.2f}  {spread:>22}")


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 5)
