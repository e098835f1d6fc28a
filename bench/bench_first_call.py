"""A fresh desk's first calls over stdio, as ratios against ripgrep in the same round, with the load beside them.

Each round spawns a fresh desk the way a desktop client does (handshake, then ``tools/list``) and asks, as its
very first call, either the first 50 matches of a common pattern (``ERROR``, against ``rg -n -m 50``) or a whole-
file search for a literal the log does not hold (following next_cursor to the end, against ``rg -n``). Round by
round the two kinds and ripgrep take turns, so a busy machine slows them alike; the log is read once before, so
the page cache is warm for everyone. Each kind is asked again of a fresh desk that waits ``SETTLE_SECONDS`` after
``tools/list`` (a person typing a question) before its first call. The log is bench_search.py's (1 GiB by default).
Run: .venv/bin/python bench/bench_first_call.py [rounds] [directory for the log] [log MiB]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import bench_search  # the same log, desk and ripgrep runner

ROOT = Path(__file__).resolve().parent.parent
MISSING = "absent-needle-q"
SETTLE_SECONDS = 2.0


def load() -> float:
    return os.getloadavg()[0]


def warm(log: Path) -> None:
    """Read the log once, so the page cache holds it for ripgrep and the desks alike."""
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)


def desk_params(desk: Path, tmp: Path, **settings: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    env.update(
        INCIDENT_DESK_AUDIT_DB=str(tmp / "audit.sqlite3"),
        INCIDENT_DESK_DATA_DIR=str(desk),
        INCIDENT_DESK_LOG_LEVEL="warning",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        **settings,
    )
    return StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)


async def first_call(params: StdioServerParameters, pattern: str, limit: int, settle: float) -> float:
    """Seconds of a fresh desk's first search (its calls summed when it follows cursors to the end)."""
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        await anyio.sleep(settle)
        seconds, _calls, _found = await bench_search.follow(client, pattern, limit, pages=limit != 50)
    return float(seconds)


async def main(rounds: int, directory: str | None, mebibytes: int) -> None:
    bench_search.LOG_BYTES = mebibytes << 20
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        tmp = Path(scratch)
        desk, lines = bench_search.make_desk(tmp)
        log = desk / "incidents" / bench_search.INCIDENT / "log.txt"
        warm(log)
        helped, alone = desk_params(desk, tmp), desk_params(desk, tmp, INCIDENT_DESK_SEARCH_PROCESSES="0")
        print(f"log {log.stat().st_size / 2**20:,.0f} MiB, {lines:,} lines; {os.cpu_count()} cores; {rounds} rounds")
        rows: dict[str, list[tuple[float, float, float]]] = {}
        for _ in range(rounds):
            later = f", {SETTLE_SECONDS:.0f} s after"
            first_50 = ("ERROR", 50, ("-n", "-m", "50", "ERROR"))
            whole = (MISSING, 1000, ("-n", MISSING))
            for label, params, (pattern, limit, rg_args), settle in (
                ("first 50 of ERROR", helped, first_50, 0.0),
                ("first 50 of ERROR" + later, helped, first_50, SETTLE_SECONDS),
                ("whole-file search", helped, whole, 0.0),
                ("whole-file search" + later, helped, whole, SETTLE_SECONDS),
                ("the same, search_processes = 0", alone, whole, SETTLE_SECONDS),
            ):
                before = load()
                rg = bench_search.rg_run(*rg_args, str(log))[0]
                ours = await first_call(params, pattern, limit, settle)
                rows.setdefault(label, []).append((ours, rg, (before + load()) / 2))
        print(f"{'a fresh desk first call':36} {'rg (s)':>8} {'desk (s)':>9} {'desk/rg':>8} {'load':>6}")
        for label, runs in rows.items():
            ours = statistics.median(run[0] for run in runs)
            rg = statistics.median(run[1] for run in runs)
            ratios = sorted(run[0] / run[1] for run in runs)
            spread = f"{ratios[0]:.2f}-{ratios[-1]:.2f}"
            average = statistics.mean(run[2] for run in runs)
            print(f"{label:36} {rg:8.3f} {ours:9.3f} {ours / rg:7.2f}x {average:6.1f}  (ratios {spread})")


if __name__ == "__main__":
    started = time.perf_counter()
    anyio.run(
        main,
        int(sys.argv[1]) if len(sys.argv) > 1 else 3,
        sys.argv[2] if len(sys.argv) > 2 else None,
        int(sys.argv[3]) if len(sys.argv) > 3 else 1024,
    )
    print(f"({time.perf_counter() - started:.0f} s)")
