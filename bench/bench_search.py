"""Log search over stdio on a 1 GiB log, as ratios against grep on the same file, in interleaved rounds.

The log is generated (not committed) in a temporary directory: 1 GiB of deterministic service log lines (a
timestamp, one of five services, a level, one of nine messages with numbers; one line in 500 carries a bearer
token that redaction masks; a few carry non-ASCII text), then one needle line at the very end. The desk is
spawned over stdio as a client spawns it, redaction on (the default) and, separately, off. Each round times:

- each needle: the desk following next_cursor from the first line to the match on the last line (the sum of
  the calls, and how many), against ``grep -c needle`` (in the C locale, grep's fastest mode);
- the first 50 matches of a common pattern (``ERROR``) against ``grep -m 50``.

It ends with the desk's peak RSS growth (Linux: VmHWM at the end minus VmRSS before the first search).
Run: .venv/bin/python bench/bench_search.py [rounds] [directory for the 1 GiB log]
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
LOG_BYTES = 1 << 30
NEEDLES = ("OutOfMemoryError in worker-7", "kernel: segfault in ledger-sync", "needle-xyz")
COMMON = "ERROR"
INCIDENT = "INC-BENCH"


def generate_log(path: Path) -> int:
    """Write the 1 GiB log (a 1 MiB block of varied lines, repeated) and the needles' line; return its lines."""
    rng = random.Random(7)
    services = ["payments-api", "search-api", "auth", "ledger", "gateway"]
    levels = ["INFO"] * 20 + ["WARN"] * 3 + ["ERROR", "DEBUG"]
    messages = [
        "request served status=200 latency_ms={}",
        "cache miss key=user:{}",
        "retrying upstream call attempt={}",
        "connection pool usage {}%",
        "GC pause {}ms",
        "queue depth {}",
        "slow query took {}ms",
        "payment authorised amount={}",
        "pool exhausted waiters={}",
    ]
    lines: list[bytes] = []
    size = 0
    number = 0
    while size < 1 << 20:
        number += 1
        stamp = f"2026-11-29T10:{number % 60:02d}:{number * 7 % 60:02d}.{number % 1000:03d}Z"
        text = f"{stamp} {rng.choice(services)} {rng.choice(levels)} {rng.choice(messages).format(rng.randint(1, 999))}"
        if number % 500 == 0:
            text = f"{stamp} auth INFO login ok Authorization: Bearer eyZabc{number:08d}defghijk"
        elif number % 997 == 0:
            text = f"{stamp} search-api WARN requête lente pour « café » ({number} ms)"
        line = (text + "\n").encode()
        lines.append(line)
        size += len(line)
    block = b"".join(lines)
    written = 0
    with path.open("wb") as handle:
        while handle.tell() + len(block) <= LOG_BYTES:
            handle.write(block)
            written += len(lines)
        handle.write(f"2026-11-29T11:00:00.000Z ledger ERROR {' '.join(NEEDLES)}\n".encode())
    return written + 1


def make_desk(directory: Path) -> tuple[Path, int]:
    desk = directory / "desk"
    entry = desk / "incidents" / INCIDENT
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        'title="bench"\nservice="ledger"\nseverity="SEV2"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
    )
    return desk, generate_log(entry / "log.txt")


def grep_seconds(*args: str) -> float:
    """grep in the C locale, its fastest (byte-wise) mode; the desk matches UTF-8 text either way."""
    began = time.perf_counter()
    subprocess.run(["grep", *args], check=False, stdout=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
    return time.perf_counter() - began


async def follow(client: Client, pattern: str, limit: int, pages: bool) -> tuple[float, int, int]:
    """Seconds summed over the calls, the number of calls, and the matches; ``pages``: follow cursors to the end."""
    total, calls, matches = 0.0, 0, 0
    cursor: str | None = None
    while True:
        arguments: dict[str, Any] = {"incidentId": INCIDENT, "pattern": pattern, "limit": limit}
        if cursor:
            arguments["cursor"] = cursor
        began = time.perf_counter()
        result = await client.call_tool("search_incident_log", arguments)
        total += time.perf_counter() - began
        calls += 1
        assert not result.is_error, result
        matches += len(result.structured_content["matches"])
        cursor = result.structured_content["next_cursor"]
        if cursor is None or not pages:
            return total, calls, matches


def child_pid() -> int:
    """The desk this process spawned (Linux /proc): the bench's only child running incident_desk."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"incident_desk" in command:
                return int(entry.name)
    raise RuntimeError("desk process not found")


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


async def bench_desk(desk: Path, log: Path, rounds: int, redact: bool, tmp: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    env.update(
        INCIDENT_DESK_AUDIT_DB=str(tmp / "audit.sqlite3"),
        INCIDENT_DESK_DATA_DIR=str(desk),
        INCIDENT_DESK_LOG_LEVEL="warning",
        INCIDENT_DESK_REDACT_SECRETS="true" if redact else "false",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    timings: dict[str, list[float]] = {}
    calls: dict[str, int] = {}
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        pid = child_pid()
        rss_before = memory_kib(pid, "VmRSS")
        await follow(client, "warm-up", 1, pages=False)  # imports numpy, compiles; the file is already cached
        for _ in range(rounds):
            for needle in NEEDLES:
                timings.setdefault(f"grep -c {needle}", []).append(grep_seconds("-c", needle, str(log)))
                seconds, count, found = await follow(client, needle, 50, pages=True)
                assert found == 1, f"{needle}: {found} matches"
                timings.setdefault(f"desk {needle}", []).append(seconds)
                calls[needle] = count
            timings.setdefault("grep -m 50", []).append(grep_seconds("-m", "50", COMMON, str(log)))
            seconds, _count, found = await follow(client, COMMON, 50, pages=False)
            assert found == 50
            timings.setdefault("desk first 50", []).append(seconds)
        peak = memory_kib(pid, "VmHWM")
    return {"timings": timings, "calls": calls, "rss_growth_mib": (peak - rss_before) / 1024}


async def main(rounds: int, directory: str | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="desk-search-bench-", dir=directory))
    try:
        began = time.perf_counter()
        desk, lines = make_desk(tmp)
        log = desk / "incidents" / INCIDENT / "log.txt"
        size = log.stat().st_size
        print(f"generated {size / 2**30:.2f} GiB, {lines:,} lines in {time.perf_counter() - began:.1f} s at {tmp}")
        grep_seconds("-c", "warm the page cache", str(log))
        print(f"python {sys.version.split()[0]} on {os.cpu_count()} cores; {rounds} interleaved rounds (medians)")
        print(f"{'redaction':9} {'what':40} {'grep':>8} {'desk':>8} {'ratio':>6} {'calls':>5}")
        for redact in (True, False):
            result = await bench_desk(desk, log, rounds, redact, tmp)
            t = {name: statistics.median(values) for name, values in result["timings"].items()}
            label = "on" if redact else "off"
            for needle in NEEDLES:
                grep, ours = t[f"grep -c {needle}"], t[f"desk {needle}"]
                what = f"needle on the last line: {needle}"[:40]
                print(f"{label:9} {what:40} {grep:8.3f} {ours:8.3f} {ours / grep:6.2f} {result['calls'][needle]:5}")
            grep, ours = t["grep -m 50"], t["desk first 50"]
            print(f"{label:9} {'first 50 matches of ' + COMMON:40} {grep:8.4f} {ours:8.4f} {ours / grep:6.2f} {1:5}")
            print(f"{label:9} peak RSS growth of the desk: {result['rss_growth_mib']:.1f} MiB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else None)
