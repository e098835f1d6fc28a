"""Log search over stdio on a 1 GiB log, as ratios against ``rg -n`` (and ``grep -n``) on the same file.

The log is generated (not committed) in a temporary directory: 1 GiB of deterministic service log lines (a
timestamp, one of five services, a level, one of nine messages with numbers; one line in 500 carries a bearer
token that redaction masks; a few carry non-ASCII text), then one needle line at the very end. The desk is
spawned over stdio as a client spawns it, redaction on (the default) and, separately, off. Each round, rg, grep
and the desk take turns on each pattern kind (interleaved, so a busy machine slows all three alike):

- a literal, the same ignoring case, an alternation, and a pattern with no required literal: the desk following
  next_cursor from the first line to the end of the log (the sum of the calls), against ``rg -n`` and
  ``grep -n`` (both number their lines, as the desk does; grep in the C locale, its fastest mode);
- the first 50 matches of a common pattern (``ERROR``) against ``rg -n -m 50``;
- the desk's first search of the log (a literal that is not there), which counts every run's newlines: the
  searches after it find the counts of unchanged runs remembered (``core.run_indexes``), as a desk searching one
  incident's log again and again does.

While each desk search runs, a second task pings the desk every 50 ms: the bench prints the median and the worst
ping answer time during the searches (the event loop must stay free). It ends with the desk's peak RSS growth
(Linux: VmHWM at the end minus VmRSS before the first search) and its helper processes' peak RSS, each apart
(``core.search_processes``: they prefilter a big log's stretches on the other core).
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
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
LOG_BYTES = 1 << 30
NEEDLES = ("OutOfMemoryError in worker-7", "kernel: segfault in ledger-sync", "needle-xyz")
# (label, pattern, ignore case): the kinds of the table; each matches only the needle line, or nothing.
KINDS = (
    ("literal", "needle-xyz", False),
    ("literal, ignore case", "NEEDLE-xyz", True),
    ("alternation", "needle-xyz|segfault in ledger", False),
    ("no required literal", r"x\d{5}y", False),
)
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


def rg_run(*args: str) -> tuple[float, int]:
    """``rg`` (Debian's ripgrep, no config file) with its output read through a pipe: seconds and lines printed."""
    began = time.perf_counter()
    done = subprocess.run(
        ["rg", "--no-config", *args], check=False, stdout=subprocess.PIPE, env={**os.environ, "LC_ALL": "C"}
    )
    return time.perf_counter() - began, done.stdout.count(b"\n")


async def follow(
    client: Client, pattern: str, limit: int, pages: bool, ignore_case: bool = False
) -> tuple[float, int, int]:
    """Seconds summed over the calls, the number of calls, and the matches; ``pages``: follow cursors to the end."""
    total, calls, matches = 0.0, 0, 0
    cursor: str | None = None
    while True:
        arguments: dict[str, Any] = {"incidentId": INCIDENT, "pattern": pattern, "limit": limit}
        if ignore_case:
            arguments["ignoreCase"] = True
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


async def ping_latencies(client: Client, stop: anyio.Event, into: list[float]) -> None:
    """Ping the desk every 50 ms until ``stop``, recording each answer's seconds (the legacy era's ping)."""
    warnings.filterwarnings("ignore", message="ping is removed")
    while not stop.is_set():
        began = time.perf_counter()
        await client.send_ping()
        into.append(time.perf_counter() - began)
        with anyio.move_on_after(0.05):
            await stop.wait()


async def follow_pinging(
    client: Client, pattern: str, pings: list[float], ignore_case: bool = False
) -> tuple[float, int, int]:
    """``follow`` to the end of the log while pinging the desk."""
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(ping_latencies, client, stop, pings)
        try:
            result = await follow(client, pattern, 50, pages=True, ignore_case=ignore_case)
        finally:
            stop.set()
    return result


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


def helper_pids(desk_pid: int) -> list[int]:
    """The desk's helper processes (spawned by multiprocessing), if it has started them."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if parent == desk_pid and b"spawn_main" in command:
                found.append(int(entry.name))
    return found


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
    pings: list[float] = []
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        pid = child_pid()
        rss_before = memory_kib(pid, "VmRSS")
        await follow(client, "ledger", 1, pages=False)  # a match in the first lines: imports numpy, compiles
        # The desk's first search of the whole log: it counts every run's newlines (later searches of the same
        # bytes reuse the counts), against rg on the same pattern just before.
        first_rg = rg_run("-n", "warm-up", str(log))[0]
        first = (await follow(client, "warm-up", 1, pages=False))[0]
        for _ in range(rounds):
            for label, pattern, ignore_case in KINDS:
                flags = ["-n", "-i"] if ignore_case else ["-n"]
                rg, expected = rg_run(*flags, pattern, str(log))
                timings.setdefault(f"rg {label}", []).append(rg)
                timings.setdefault(f"grep {label}", []).append(grep_seconds(*flags, "-E", pattern, str(log)))
                seconds, count, found = await follow_pinging(client, pattern, pings, ignore_case=ignore_case)
                assert found == expected, f"{label}: the desk found {found}, rg {expected}"
                timings.setdefault(f"desk {label}", []).append(seconds)
                calls[label] = count
            timings.setdefault(f"rg first 50 {COMMON}", []).append(rg_run("-n", "-m", "50", COMMON, str(log))[0])
            seconds, _count, found = await follow(client, COMMON, 50, pages=False)
            assert found == 50
            timings.setdefault(f"desk first 50 {COMMON}", []).append(seconds)
        peak = memory_kib(pid, "VmHWM")
        helper_peaks = [memory_kib(helper, "VmHWM") / 1024 for helper in helper_pids(pid)]
    return {
        "helper_peaks": helper_peaks,
        "timings": timings,
        "calls": calls,
        "rss_growth_mib": (peak - rss_before) / 1024,
        "pings": pings,
        "first": (first, first_rg),
    }


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
        print(f"{'redaction':9} {'what':28} {'rg -n':>7} {'grep -n':>7} {'desk':>7} {'desk/rg':>7} {'calls':>5}")
        for redact in (True, False):
            result = await bench_desk(desk, log, rounds, redact, tmp)
            timings = result["timings"]
            t = {name: statistics.median(values) for name, values in timings.items()}
            label = "on" if redact else "off"
            for kind, _pattern, _ignore_case in KINDS:
                rg, grep, ours = t[f"rg {kind}"], t[f"grep {kind}"], t[f"desk {kind}"]
                ratios = [d / r for d, r in zip(timings[f"desk {kind}"], timings[f"rg {kind}"], strict=True)]
                print(
                    f"{label:9} {kind:28} {rg:7.3f} {grep:7.3f} {ours:7.3f} {ours / rg:6.2f}x {result['calls'][kind]:5}"
                    f"   (per-round desk/rg {min(ratios):.2f}-{max(ratios):.2f})"
                )
            rg, ours = t[f"rg first 50 {COMMON}"], t[f"desk first 50 {COMMON}"]
            print(f"{label:9} {'first 50 of ' + COMMON:28} {rg:7.4f} {'':7} {ours:7.4f} {ours / rg:6.2f}x {1:5}")
            first, first_rg = result["first"]
            print(
                f"{label:9} {'first search of the log':28} {first_rg:7.3f} {'':7} {first:7.3f} {first / first_rg:6.2f}x"
                "     1   (literal `warm-up`, no match: every run counted)"
            )
            pings = result["pings"]
            print(
                f"{label:9} ping during the searches: median {statistics.median(pings) * 1000:.1f} ms, "
                f"max {max(pings) * 1000:.1f} ms ({len(pings)} pings)"
            )
            helpers = ", ".join(f"{peak:.0f}" for peak in result["helper_peaks"]) or "none"
            print(
                f"{label:9} peak RSS growth of the desk: {result['rss_growth_mib']:.1f} MiB; "
                f"its helper processes' peak RSS: {helpers} MiB"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else None)
