"""Restart decisions per second and their latency: SQLite vs PostgreSQL journal, 1 vs 2 replicas behind nginx.

One run, four set-ups, the same load: ``CLIENTS`` concurrent 2026-07-28 clients, each approving simulated restarts
of its own service for a fixed time (each decision: the input_required round trip, two journal commits, the
service lock). Ratios against the SQLite desk of the same run, and 2 replicas against 1 (both behind nginx).
Per set-up it also says where the machine's cores went (CPU seconds per wall second, from /proc, so Linux only):
the load generator (this process), the replicas, PostgreSQL (postmaster and its backends), nginx, and other work
on the machine; that, not the replicas, decides whether a second replica can add throughput.
Every set-up is up for the whole run and the rounds interleave them, so drifting load on a shared machine hits
each alike; ratios are the median of per-round ratios.
Needs Debian's PostgreSQL and nginx (as the tests do).
Run: .venv/bin/python bench/bench_team_desk.py [rounds, default 3] [seconds per set-up per round, default 10]
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.http_desk import Desk, run_desk  # noqa: E402
from tests.nginx_proxy import running_nginx  # noqa: E402 -- the tests' throwaway servers, on the path set above
from tests.postgres_cluster import PASSWORD, Cluster, running_cluster  # noqa: E402
from tests.restart_helpers import approve  # noqa: E402

CLIENTS = 10
SERVICES = {f"svc-{n:02d}": {"kind": "simulate"} for n in range(CLIENTS)}
TICKS = os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(root: int) -> float:
    """CPU seconds of a live process tree: each live process's own time plus that of its reaped children."""
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile: its time is in its parent's reaped-children counters
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    tree, frontier = set(), [root]
    while frontier:
        pid = frontier.pop()
        tree.add(pid)
        frontier.extend(child for child, parent in parents.items() if parent == pid and child not in tree)
    return sum(times.get(pid, 0) for pid in tree) / TICKS


def _machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:7]) - idle) / TICKS  # user nice system idle iowait irq softirq, not steal


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _nginx_cpu_seconds() -> float:
    """The nginx instances this run started (each master is a child of this process, with its workers)."""
    masters = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _is_nginx_child_of_this_process(entry)
    ]
    return sum(_tree_cpu_seconds(master) for master in masters)


def _is_nginx_child_of_this_process(entry: Path) -> bool:
    try:
        command, fields = (entry / "stat").read_text().rsplit(")", 1)
    except OSError:
        return False
    return command.endswith("(nginx") and int(fields.split()[1]) == os.getpid()


def _cpu_snapshot(desks: Sequence[Desk], cluster: Cluster) -> tuple[float, float, float, float, float]:
    """CPU seconds so far: generator, replicas, PostgreSQL, nginx, and the whole machine."""
    assert cluster.process is not None
    replicas = sum(_tree_cpu_seconds(desk.process.pid) for desk in desks)
    postgres = _tree_cpu_seconds(cluster.process.pid)
    return _own_cpu_seconds(), replicas, postgres, _nginx_cpu_seconds(), _machine_busy_seconds()


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


SQLITE, PG_DIRECT = "1 replica, SQLite, direct", "1 replica, PostgreSQL, direct"
ONE_BEHIND_NGINX, TWO_BEHIND_NGINX = "1 replica, PostgreSQL, nginx", "2 replicas, PostgreSQL, nginx"
SETUPS = (SQLITE, PG_DIRECT, ONE_BEHIND_NGINX, TWO_BEHIND_NGINX)


@dataclass
class Measured:
    """What one set-up did over every round: decisions, latencies, wall time, and CPU seconds by component."""

    decisions: int = 0
    wall: float = 0.0
    latencies: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=lambda: [0.0] * 5)  # generator, replicas, PostgreSQL, nginx, machine
    rates: list[float] = field(default_factory=list)  # decisions/s per round
    p50s: list[float] = field(default_factory=list)  # median latency per round


def _measure(url: str, seconds: float, desks: Sequence[Desk], cluster: Cluster, measured: Measured) -> None:
    before = _cpu_snapshot(desks, cluster)
    started = time.monotonic()
    latencies = anyio.run(_load, url, seconds)
    wall = time.monotonic() - started
    after = _cpu_snapshot(desks, cluster)
    for index, (start, end) in enumerate(zip(before, after, strict=True)):
        measured.cpu[index] += end - start
    measured.decisions += len(latencies)
    measured.wall += wall
    measured.latencies.extend(latencies)
    measured.rates.append(len(latencies) / wall)
    measured.p50s.append(statistics.median(latencies))


def _report(label: str, measured: Measured) -> None:
    generator, replicas, postgres, nginx, machine = (seconds / measured.wall for seconds in measured.cpu)
    p95 = statistics.quantiles(measured.latencies, n=20)[18]
    other = machine - generator - replicas - postgres - nginx
    print(
        f"{label:<30} {measured.decisions / measured.wall:6.1f} decisions/s  "
        f"p50 {statistics.median(measured.latencies) * 1000:5.0f} ms  p95 {p95 * 1000:5.0f} ms  "
        f"cores busy {machine:.2f} of {os.cpu_count()}: generator {generator:.2f}, replicas {replicas:.2f}, "
        f"PostgreSQL {postgres:.2f}, nginx {nginx:.2f}, other work {other:.2f}",
        flush=True,
    )


def _ratio(label: str, numerator: Measured, denominator: Measured) -> None:
    """Median over rounds of the per-round ratios (each round measures both set-ups back to back), and their range."""
    throughput = [a / b for a, b in zip(numerator.rates, denominator.rates, strict=True)]
    latency = [a / b for a, b in zip(numerator.p50s, denominator.p50s, strict=True)]
    print(
        f"{label}: throughput x{statistics.median(throughput):.2f} "
        f"(rounds {min(throughput):.2f}-{max(throughput):.2f}), "
        f"p50 latency x{statistics.median(latency):.2f} (rounds {min(latency):.2f}-{max(latency):.2f})"
    )


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    print(
        f"{CLIENTS} concurrent 2026-07-28 clients, simulated restarts; {rounds} rounds of {seconds:.0f} s per set-up, "
        "the set-ups interleaved (order reversed every other round) so the machine's other load hits each alike"
    )
    measured = {label: Measured() for label in SETUPS}
    with tempfile.TemporaryDirectory() as scratch_dir, running_cluster() as cluster, ExitStack() as stack:
        scratch = Path(scratch_dir)
        env = {"INCIDENT_DESK_SERVICES": json.dumps(SERVICES), "INCIDENT_DESK_LOG_LEVEL": "warning"}
        sqlite = stack.enter_context(run_desk(scratch, name="sqlite", **env))
        pg = {**env, "INCIDENT_DESK_AUDIT_DB_PASSWORD": PASSWORD}
        pg["INCIDENT_DESK_SEALING_KEY"] = "bench-sealing-key-shared-by-replicas-01"
        alone = stack.enter_context(
            run_desk(scratch, name="pg", INCIDENT_DESK_AUDIT_DB=cluster.new_database("bench_one"), **pg)
        )
        alone_balanced = stack.enter_context(running_nginx([alone.port, alone.port]))
        shared = cluster.new_database("bench_two")
        replicas = [
            stack.enter_context(run_desk(scratch, name=f"r{n}", INCIDENT_DESK_AUDIT_DB=shared, **pg)) for n in (1, 2)
        ]
        balanced = stack.enter_context(running_nginx([replica.port for replica in replicas]))
        targets: dict[str, tuple[str, list[Desk]]] = {
            SQLITE: (sqlite.url, [sqlite]),
            PG_DIRECT: (alone.url, [alone]),
            ONE_BEHIND_NGINX: (alone_balanced, [alone]),
            TWO_BEHIND_NGINX: (balanced, replicas),
        }
        for round_number in range(rounds):
            for label in SETUPS if round_number % 2 == 0 else tuple(reversed(SETUPS)):
                url, desks = targets[label]
                _measure(url, seconds, desks, cluster, measured[label])
    for label in SETUPS:
        _report(label, measured[label])
    print()
    _ratio("PostgreSQL / SQLite (1 replica, direct)", measured[PG_DIRECT], measured[SQLITE])
    _ratio("2 replicas / 1 replica (nginx, PostgreSQL)", measured[TWO_BEHIND_NGINX], measured[ONE_BEHIND_NGINX])


if __name__ == "__main__":
    main()
