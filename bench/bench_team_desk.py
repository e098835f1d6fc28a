"""Restart decisions per second and their latency: SQLite vs PostgreSQL journal, 1 vs 2 replicas behind nginx.

One run, four set-ups, the same load: ``CLIENTS`` concurrent 2026-07-28 clients, each approving simulated restarts
of its own service for ``SECONDS`` seconds (each decision: the input_required round trip, two journal commits, the
service lock). Ratios against the SQLite desk of the same run, and 2 replicas against 1 (both behind nginx).
Needs Debian's PostgreSQL and nginx (as the tests do). Run: .venv/bin/python bench/bench_team_desk.py [seconds]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.http_desk import run_desk  # noqa: E402
from tests.nginx_proxy import running_nginx  # noqa: E402 -- the tests' throwaway servers, on the path set above
from tests.postgres_cluster import PASSWORD, running_cluster  # noqa: E402
from tests.restart_helpers import approve  # noqa: E402

CLIENTS = 10
SERVICES = {f"svc-{n:02d}": {"kind": "simulate"} for n in range(CLIENTS)}


async def _load(url: str, seconds: float) -> list[float]:
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds

    async def worker(service: str) -> None:
        callbacks: dict[str, Any] = {"elicitation_callback": approve()}
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
            Client(streamable_http_client(url, http_client=http), mode="2026-07-28", **callbacks) as client,
        ):
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                result = await client.call_tool("restart_service", {"service": service})
                if result.is_error:
                    raise RuntimeError(f"decision failed: {result.content}")
                latencies.append(time.perf_counter() - started)

    async with anyio.create_task_group() as group:
        for service in SERVICES:
            group.start_soon(worker, service)
    return latencies


def _measure(label: str, url: str, seconds: float, results: dict[str, tuple[float, float, float]]) -> None:
    latencies = anyio.run(_load, url, seconds)
    quantiles = statistics.quantiles(latencies, n=20)
    results[label] = (len(latencies) / seconds, statistics.median(latencies) * 1000, quantiles[18] * 1000)
    rate, p50, p95 = results[label]
    print(f"{label:<32} {rate:8.1f} decisions/s   p50 {p50:6.1f} ms   p95 {p95:6.1f} ms", flush=True)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 15.0
    results: dict[str, tuple[float, float, float]] = {}
    print(f"{CLIENTS} concurrent 2026-07-28 clients, {seconds:.0f} s per set-up, simulated restarts")
    with tempfile.TemporaryDirectory() as scratch_dir, running_cluster() as cluster:
        scratch = Path(scratch_dir)
        env = {"INCIDENT_DESK_SERVICES": json.dumps(SERVICES), "INCIDENT_DESK_LOG_LEVEL": "warning"}
        with run_desk(scratch, name="sqlite", **env) as desk:
            _measure("1 replica, SQLite, direct", desk.url, seconds, results)
        url = cluster.new_database("bench_one")
        pg = {**env, "INCIDENT_DESK_AUDIT_DB": url, "INCIDENT_DESK_AUDIT_DB_PASSWORD": PASSWORD}
        with run_desk(scratch, name="pg", **pg) as desk:
            _measure("1 replica, PostgreSQL, direct", desk.url, seconds, results)
            with running_nginx([desk.port, desk.port]) as balanced:
                _measure("1 replica, PostgreSQL, nginx", balanced, seconds, results)
        with ExitStack() as stack:
            pg["INCIDENT_DESK_SEALING_KEY"] = "bench-sealing-key-shared-by-replicas-01"
            pg["INCIDENT_DESK_AUDIT_DB"] = cluster.new_database("bench_two")
            replicas = [stack.enter_context(run_desk(scratch, name=f"r{n}", **pg)) for n in (1, 2)]
            balanced = stack.enter_context(running_nginx([replica.port for replica in replicas]))
            _measure("2 replicas, PostgreSQL, nginx", balanced, seconds, results)
    sqlite, pg_direct = results["1 replica, SQLite, direct"], results["1 replica, PostgreSQL, direct"]
    one, two = results["1 replica, PostgreSQL, nginx"], results["2 replicas, PostgreSQL, nginx"]
    print()
    print(
        f"PostgreSQL / SQLite (1 replica, direct): throughput x{pg_direct[0] / sqlite[0]:.2f}, "
        f"p50 latency x{pg_direct[1] / sqlite[1]:.2f}"
    )
    print(
        f"2 replicas / 1 replica (nginx, PostgreSQL): throughput x{two[0] / one[0]:.2f}, "
        f"p50 latency x{two[1] / one[1]:.2f}"
    )


if __name__ == "__main__":
    main()
