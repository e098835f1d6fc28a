"""No pattern stalls the desk: catastrophic patterns finish within budget while ping and other tools answer.

Each catastrophic pattern (nested, overlapping quantifiers) runs on a log crafted to trigger backtracking (lines
that almost match), in-process and over stdio, while a second task pings and lists incidents every 10 ms; every
answer must come within 100 ms. A search that must decode and redact every line (the most interpreter-bound one)
runs to its time budget the same way. A cancelled search stops scanning within 100 ms.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from incident_desk.core.redaction.face import SECRETS
from incident_desk.core.search import engine as log_search
from incident_desk.core.search import paging as logfile
from incident_desk.core.search.pattern import compile_pattern
from tests.helpers import ROOT, AppFactory, child_env, connect, pinging

pytestmark = [pytest.mark.anyio, pytest.mark.timing]

LOG_BYTES = 4 * 1024 * 1024
ANSWER_WITHIN = 0.1
TIME_BUDGET = 1.0

# Each issue-10 pattern, and a line that drives a backtracking engine into exponential time on it.
CATASTROPHIC = {
    r"(.|.)*\x00": b"x" * 5_000,
    r"(a|aa)+$": b"a" * 40 + b"!",
    r"(a|a)*b": b"a" * 40,
    r"(.*a){20}": b"a" * 19 + b"!",
    r"((a+))+$": b"a" * 40 + b"!",
    r"^(?:(\w+)\s?)*$": b"word " * 30 + b"!",
}
# Every line a candidate that must be decoded and redacted in Python (the pattern may match the mask), and none
# matches: the search that holds the interpreter most, all the way to the end of its log or its budget.
ALL_CANDIDATES = (r"REDACTED\] x", b"10:00:00 auth INFO token=abcdefgh12345678 refreshed for user 42")


def make_desk(root: Path, logs: dict[str, bytes], size: int = LOG_BYTES) -> Path:
    """A data directory with one incident per log, each log the given line repeated to ``size`` bytes."""
    for incident_id, line in logs.items():
        entry = root / "incidents" / incident_id
        entry.mkdir(parents=True)
        (entry / "incident.toml").write_text(
            'title="t"\nservice="svc"\nseverity="SEV1"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
        )
        (entry / "log.txt").write_bytes((line + b"\n") * (size // (len(line) + 1)))
    return root


def cases() -> dict[str, tuple[str, bytes]]:
    named = {f"INC-C{index}": (pattern, line) for index, (pattern, line) in enumerate(CATASTROPHIC.items())}
    named["INC-ALL"] = ALL_CANDIDATES
    return named


@pytest.fixture
def crafted_desk(tmp_path: Path) -> Path:
    return make_desk(tmp_path / "desk", {incident: line for incident, (_pattern, line) in cases().items()})


async def search_while_watched(client: Client, incident_id: str, pattern: str) -> tuple[Any, float, list[float]]:
    # A ping and a list_incidents call in turn, every 10 ms.
    asks = (client.send_ping, lambda: client.call_tool("list_incidents", {}))
    async with pinging(client, asks=asks, every=0.01) as latencies:
        await anyio.sleep(0.1)  # the probe is running before the search starts
        began = time.perf_counter()
        result = await client.call_tool("search_incident_log", {"incidentId": incident_id, "pattern": pattern})
        took = time.perf_counter() - began
        await anyio.sleep(0.1)
    return result, took, latencies


def assert_responsive(incident_id: str, pattern: str, result: Any, took: float, latencies: list[float]) -> None:
    assert not result.is_error, (pattern, result)
    assert took < TIME_BUDGET + 0.5, f"{pattern} took {took:.2f}s, over its {TIME_BUDGET}s budget"
    assert len(latencies) >= 5, "the probe did not run"
    assert max(latencies) < ANSWER_WITHIN, f"{pattern} on {incident_id}: slowest answer {max(latencies) * 1000:.0f} ms"


async def test_catastrophic_patterns_never_stall_the_desk_in_process(crafted_desk: Path, make_app: AppFactory) -> None:
    from incident_desk.server import build_server

    app = make_app(data_dir=crafted_desk, search_time_budget_seconds=TIME_BUDGET)
    async with connect(build_server(app), "legacy") as client:
        await client.call_tool("search_incident_log", {"incidentId": "INC-C0", "pattern": "warm-up", "limit": 1})
        for incident_id, (pattern, _line) in cases().items():
            result, took, latencies = await search_while_watched(client, incident_id, pattern)
            assert_responsive(incident_id, pattern, result, took, latencies)


@pytest.mark.subprocess
async def test_catastrophic_patterns_never_stall_the_desk_over_stdio(crafted_desk: Path, tmp_path: Path) -> None:
    env = child_env(
        tmp_path / "audit.sqlite3",
        INCIDENT_DESK_DATA_DIR=str(crafted_desk),
        INCIDENT_DESK_SEARCH_TIME_BUDGET_SECONDS=str(TIME_BUDGET),
        INCIDENT_DESK_LOG_LEVEL="warning",
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    async with Client(params, mode="legacy") as client:
        await client.call_tool("search_incident_log", {"incidentId": "INC-C0", "pattern": "warm-up", "limit": 1})
        for incident_id, (pattern, _line) in cases().items():
            result, took, latencies = await search_while_watched(client, incident_id, pattern)
            assert_responsive(incident_id, pattern, result, took, latencies)


async def test_a_search_at_its_time_budget_stops_and_resumes_exactly(tmp_path: Path) -> None:
    """Every line is a candidate, so the scan is slow enough to hit a small budget; paging on loses nothing."""
    line = ALL_CANDIDATES[1]
    log = tmp_path / "log.txt"
    log.write_bytes(b"".join(line.replace(b"42", b"%07d" % i) + b"\n" for i in range(60_000)))
    pattern = compile_pattern("user (\\d+)5$")
    first = log_search.search(log, pattern, limit=100_000, time_budget=0.05, redaction=SECRETS)
    assert first.stopped == "time budget" and first.next_cursor is not None
    numbers = [match.number for match in first.matches]
    cursor: logfile.Cursor | None = first.next_cursor
    calls = 1
    while cursor is not None:
        step = log_search.search(log, pattern, cursor=cursor, limit=100_000, time_budget=0.05, redaction=SECRETS)
        numbers += [match.number for match in step.matches]
        cursor = step.next_cursor
        calls += 1
    assert calls > 2
    assert numbers == [i + 1 for i in range(60_000) if i % 10 == 5]


async def test_a_cancelled_search_stops_scanning_within_100_ms(tmp_path: Path) -> None:
    root = make_desk(tmp_path / "desk", {"INC-ALL": ALL_CANDIDATES[1]}, size=32 * 1024 * 1024)
    cancelled = threading.Event()
    finished: list[float] = []
    outcome: list[log_search.SearchResult] = []

    def scan() -> None:
        path = root / "incidents" / "INC-ALL" / "log.txt"
        pattern = compile_pattern(ALL_CANDIDATES[0])
        result = log_search.search(path, pattern, limit=10, redaction=SECRETS, cancelled=cancelled)
        finished.append(time.perf_counter())
        outcome.append(result)

    worker = threading.Thread(target=scan)
    worker.start()
    await anyio.sleep(0.3)
    assert not finished, "the search ended before it could be cancelled: make the log bigger"
    cancelled_at = time.perf_counter()
    cancelled.set()
    worker.join(timeout=5)
    assert finished and finished[0] - cancelled_at < ANSWER_WITHIN
    assert outcome[0].stopped == "cancelled" and outcome[0].next_cursor is not None


async def test_a_search_cancelled_by_the_client_stops_within_100_ms(
    tmp_path: Path, make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from incident_desk.server import build_server

    root = make_desk(tmp_path / "desk", {"INC-ALL": ALL_CANDIDATES[1]}, size=32 * 1024 * 1024)
    real_search = log_search.search
    finished: list[tuple[float, str]] = []

    def recorded(*args: Any, **kwargs: Any) -> log_search.SearchResult:
        result = real_search(*args, **kwargs)
        finished.append((time.perf_counter(), result.stopped))
        return result

    monkeypatch.setattr(log_search, "search", recorded)
    app = make_app(data_dir=root, search_time_budget_seconds=30)
    async with connect(build_server(app), "legacy") as client:
        with anyio.move_on_after(0.5):
            await client.call_tool("search_incident_log", {"incidentId": "INC-ALL", "pattern": ALL_CANDIDATES[0]})
        cancelled_at = time.perf_counter()
        for _ in range(50):
            if finished:
                break
            await anyio.sleep(0.01)
        pong_began = time.perf_counter()
        await client.send_ping()
        pong = time.perf_counter() - pong_began
    assert finished, "the search thread went on scanning after the call was cancelled"
    (ended, stopped) = finished[0]
    assert stopped == "cancelled"
    assert ended - cancelled_at < ANSWER_WITHIN
    assert pong < ANSWER_WITHIN
