"""show_incident_timeline over stdio on a 1 GiB log: its time against its budget and against ``rg -c`` and
``wc -l`` on the same file, the span it covers, the desk's peak RSS growth, and ping latency while it scans
(interleaved rounds).

The log is bench_search's (generated, not committed). Two desks: the default budget (2 s: the call must stop at
it and say what span it covers) and a 60 s budget (the whole GiB in one pass). Each round's first call starts
with no summary of the log (a cold pass); a second call then finds the summary and reads only what is new.
Run from the checkout: .venv/bin/python -m bench.bench_timeline [rounds] [directory for the 1 GiB log]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPDeprecationWarning, StdioServerParameters

from bench.bench_search import INCIDENT, ROOT, child_pid, helper_pids, make_desk, memory_kib

# Every client here speaks the legacy era (mode="legacy"), where ping is part of the protocol; the SDK warns on
# every send_ping whatever the era, since 2026-07-28 removed it. The latency of a ping during the scan is the figure.
warnings.filterwarnings("ignore", message="ping is removed", category=MCPDeprecationWarning)


def cpu_seconds(pid: int) -> float:
    """The desk's CPU time so far (user and system, all its threads): what the scan costs whatever the load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wc_seconds(log: Path) -> float:
    """``wc -l`` on the log: a whole pass that counts lines in C. (``grep -c`` with output to /dev/null stops at
    its first match, so it is no baseline for a whole pass.)"""
    began = time.perf_counter()
    subprocess.run(["wc", "-l", str(log)], check=True, stdout=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
    return time.perf_counter() - began


RG_LEVELS = r"^\S+ \S+ (ERROR|FATAL|CRITICAL|WARNING|WARN|INFO|DEBUG|TRACE)\b"


def rg_seconds(log: Path) -> float:
    """``rg -c`` for the lines with a time, a source and a level: a whole pass of ripgrep over the log."""
    began = time.perf_counter()
    subprocess.run(["rg", "--no-config", "-c", RG_LEVELS, str(log)], check=False, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


async def ping_latencies(client: Client, stop: anyio.Event, into: list[float]) -> None:
    while not stop.is_set():
        began = time.perf_counter()
        await client.send_ping()
        into.append(time.perf_counter() - began)
        await anyio.sleep(0.05)


def all_cpu_seconds(pid: int) -> float:
    """The desk's CPU time and its helpers'."""
    return cpu_seconds(pid) + sum(cpu_seconds(helper) for helper in helper_pids(pid))


async def bench_desk(desk: Path, log: Path, rounds: int, budget: float, tmp: Path, processes: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    env.update(
        INCIDENT_DESK_AUDIT_DB=str(tmp / "audit.sqlite3"),
        INCIDENT_DESK_DATA_DIR=str(desk),
        INCIDENT_DESK_LOG_LEVEL="warning",
        INCIDENT_DESK_SEARCH_TIME_BUDGET_SECONDS=str(budget),
        **({"INCIDENT_DESK_TIMELINE_PROCESSES": processes} if processes else {}),
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    wc: list[float] = []
    rg: list[float] = []
    again_seconds: list[float] = []
    desk_seconds: list[float] = []
    desk_cpu: list[float] = []
    idle_pings: list[float] = []
    busy_pings: list[float] = []
    structured: dict[str, Any] = {}
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        pid = child_pid()
        rss_before = memory_kib(pid, "VmRSS")
        for _ in range(rounds):
            wc.append(wc_seconds(log))
            rg.append(rg_seconds(log))
            shutil.rmtree(tmp / "timeline-cache", ignore_errors=True)  # a cold pass
            for _ in range(5):
                began = time.perf_counter()
                await client.send_ping()
                idle_pings.append(time.perf_counter() - began)
            stop = anyio.Event()
            async with anyio.create_task_group() as group:
                group.start_soon(ping_latencies, client, stop, busy_pings)
                began, cpu_began = time.perf_counter(), all_cpu_seconds(pid)
                result = await client.call_tool("show_incident_timeline", {"incidentId": INCIDENT})
                desk_seconds.append(time.perf_counter() - began)
                desk_cpu.append(all_cpu_seconds(pid) - cpu_began)
                stop.set()
            assert not result.is_error, result
            structured = result.structured_content or {}
            began = time.perf_counter()
            again = await client.call_tool("show_incident_timeline", {"incidentId": INCIDENT})
            again_seconds.append(time.perf_counter() - began)
            assert not again.is_error, again
        peak = memory_kib(pid, "VmHWM")
        helper_peaks = [memory_kib(helper, "VmHWM") / 1024 for helper in helper_pids(pid)]
    return {
        "first": desk_seconds[0],
        "helper_peaks": helper_peaks,
        "wc": statistics.median(wc),
        "rg": statistics.median(rg),
        "again": statistics.median(again_seconds),
        "desk": statistics.median(desk_seconds),
        "desk_cpu": statistics.median(desk_cpu),
        "idle_ping_ms": statistics.median(idle_pings) * 1000,
        "busy_ping_ms": statistics.median(busy_pings) * 1000,
        "busy_ping_max_ms": max(busy_pings) * 1000,
        "rss_growth_mib": (peak - rss_before) / 1024,
        "covers": structured.get("covers", ""),
        "stopped": structured.get("stopped", ""),
    }


async def main(rounds: int, directory: str | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="desk-timeline-bench-", dir=directory))
    try:
        desk, lines = make_desk(tmp)
        log = desk / "incidents" / INCIDENT / "log.txt"
        print(f"generated {log.stat().st_size / 2**30:.2f} GiB, {lines:,} lines; {rounds} rounds (medians)")
        wc_seconds(log)  # warms the page cache
        print(f"python {sys.version.split()[0]} on {os.cpu_count()} cores")
        for processes, how in (("", "helper processes (default)"), ("0", "the desk's process alone")):
            for budget in (2.0, 60.0):
                r = await bench_desk(desk, log, rounds, budget, tmp, processes)
                print(
                    f"{how}, budget {budget:2.0f} s: desk {r['desk']:.2f} s (first call {r['first']:.2f} s), "
                    f"rg -c {r['rg']:.2f} s, wc -l {r['wc']:.2f} s, desk/rg {r['desk'] / r['rg']:.2f}x; "
                    f"stopped: {r['stopped']}; covers {r['covers']}; load {os.getloadavg()[0]:.2f}"
                )
                print(
                    f"  CPU time (all threads, helpers too) {r['desk_cpu']:.2f} s; "
                    f"asked again (summary found): {r['again']:.2f} s"
                )
                helpers = ", ".join(f"{peak:.0f}" for peak in r["helper_peaks"]) or "none"
                print(
                    f"  ping idle {r['idle_ping_ms']:.2f} ms, during the scan median {r['busy_ping_ms']:.2f} ms "
                    f"(max {r['busy_ping_max_ms']:.1f} ms); desk's peak RSS growth {r['rss_growth_mib']:.1f} MiB; "
                    f"helpers' peak RSS {helpers} MiB"
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else None)
