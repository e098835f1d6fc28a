"""The search with helper processes: what it finds, its line numbers and its cursors equal the desk's own search
and the line-by-line reference, on the corpus cut into many small stretches; a helper killed or stopped mid-search,
a budget, a cancel flag and a timeline holding the helpers cost only speed; the helpers are used through MCP."""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from incident_desk.core import helper_pool as timeline_processes
from incident_desk.core.helper_pool import HELPERS
from incident_desk.core.redaction.face import SECRETS
from incident_desk.core.search import paging as logfile
from incident_desk.core.search import processes as search_processes
from incident_desk.core.search.engine import SearchResult, SearchSizes, search
from incident_desk.core.search.paging import Cursor
from incident_desk.core.search.pattern import compile_pattern
from incident_desk.core.search.runs import ROW
from tests.helpers import AppFactory, connect, pinging
from tests.test_search_corpus import PATTERNS, _corpus, _reference
from tests.test_timeline_responsive import big_timeline_desk

SIZES = SearchSizes(
    read_bytes=16 * 1024, first_window=1024, min_window=512, index_piece=2 * ROW, workers=0, stretch_bytes=16 * 1024
)
PLAIN = [
    b"10:01:00 payments-api ERROR pool exhausted waiters=12 latency_ms=840",
    b"10:01:01 payments-api INFO request served status=200 latency_ms=12",
    b"10:01:02 search-api WARN index segment merge running",
    b"10:01:03 gateway INFO using sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2 for upstream",
]


def _wait_for_helpers(count: int = 2) -> None:
    """Start ``count`` helpers and wait until they are ready (a search uses them only then)."""
    assert HELPERS.start(count, wait_seconds=60)


@pytest.fixture
def stretches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """What helpers found in each stretch in this test, in the order the search took them; ready helpers."""
    taken: list[Any] = []
    real = search_processes.clear_stretches

    def watched(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for stretch in real(*args, **kwargs):
            if stretch is not None:  # None: the helpers have their first stretches
                taken.append(stretch)
            yield stretch

    monkeypatch.setattr(search_processes, "clear_stretches", watched)
    HELPERS.failures = 0
    _wait_for_helpers()  # the helpers of the test before, when they are still there and idle
    yield taken


@pytest.fixture(scope="module", autouse=True)
def _helpers_end_with_the_module() -> Iterator[None]:
    yield
    HELPERS.end_all()


def _all(path: Path, pattern: str, *, processes: int, ignore_case: bool = False, **options: Any) -> list[Any]:
    """Every call's matches and cursor, following next_cursor from the start."""
    compiled = compile_pattern(pattern, ignore_case=ignore_case)
    steps: list[Any] = []
    cursor: Cursor | None = logfile.START
    while cursor is not None:
        step = search(path, compiled, cursor=cursor, processes=processes, **{"limit": 1000, "sizes": SIZES, **options})
        steps.append(([(line.number, line.text) for line in step.matches], step.next_cursor, step.stopped))
        assert step.next_cursor != cursor, "no progress"
        cursor = step.next_cursor
    return steps


def _found(steps: list[Any]) -> list[tuple[int, str]]:
    return [match for matches, _cursor, _stopped in steps for match in matches]


def _log(tmp_path: Path, copies: int, needles: dict[int, bytes]) -> Path:
    """Plain lines with ``needles`` at the given line indexes, and a last line without a newline."""
    lines = [PLAIN[index % len(PLAIN)] for index in range(copies)]
    for index, needle in needles.items():
        lines[index] = needle
    path = tmp_path / "log.txt"
    path.write_bytes(b"\n".join(lines) + b"\nlast line needle-xyz")
    return path


@pytest.mark.parametrize("redacting", [True, False], ids=["redacted", "raw"])
@pytest.mark.parametrize(("pattern", "ignore_case"), PATTERNS, ids=[p for p, _ in PATTERNS])
def test_a_helped_search_returns_what_the_reference_does(
    tmp_path: Path, stretches: list[Any], pattern: str, ignore_case: bool, redacting: bool
) -> None:
    log = _corpus(tmp_path / "log.txt")
    expected = _reference(log, pattern, ignore_case, redacting)
    redaction = SECRETS if redacting else None
    for limit in (1000, 7):
        helped = _all(log, pattern, processes=2, ignore_case=ignore_case, limit=limit, redaction=redaction)
        assert _found(helped) == expected
        alone = _all(log, pattern, processes=0, ignore_case=ignore_case, limit=limit, redaction=redaction)
        assert helped == alone, "the same matches, cursors and stops as the desk's own search"
    compiled = compile_pattern(pattern, ignore_case=ignore_case)
    has_literals = compiled.literal is not None or compiled.prefilter is not None
    if has_literals and (not redacting or compiled.mask_blind):
        assert len(stretches) > log.stat().st_size // SIZES.stretch_bytes, "the helpers read the log"
    else:
        assert not stretches, "only a pattern with literals is prefiltered by helpers"


def test_cursors_continue_across_stretches(tmp_path: Path, stretches: list[Any]) -> None:
    needles = {index: b"10:02:00 ledger ERROR needle-xyz %d" % index for index in range(50, 20_000, 997)}
    log = _log(tmp_path, 20_000, needles)
    helped = _all(log, "needle-xyz", processes=2, limit=3)
    assert len(stretches) > 40, "many stretches, most without a needle"
    assert helped == _all(log, "needle-xyz", processes=0, limit=3)
    assert [number for number, _text in _found(helped)] == [index + 1 for index in needles] + [20_001]
    assert len(helped) == len(needles) // 3 + 1, "each call stops at its third match and the next goes on from it"


def _stop_first_helper_once_asked(kill: bool) -> threading.Thread:
    """SIGSTOP the first helper; once a search has asked it for a stretch, SIGKILL it (or leave it stopped)."""
    helper = HELPERS._helpers[0]
    os.kill(helper.process.pid or 0, signal.SIGSTOP)

    def watch() -> None:
        deadline = time.monotonic() + 30
        while not helper.asked and time.monotonic() < deadline:
            time.sleep(0.001)
        if kill:
            os.kill(helper.process.pid or 0, signal.SIGKILL)

    watcher = threading.Thread(target=watch)
    watcher.start()
    return watcher


@pytest.mark.parametrize("kill", [True, False], ids=["killed", "stopped"])
def test_a_helper_killed_or_stopped_mid_search_costs_only_speed(
    tmp_path: Path, stretches: list[Any], monkeypatch: pytest.MonkeyPatch, kill: bool
) -> None:
    deadline = timeline_processes.STRETCH_SECONDS
    monkeypatch.setattr(timeline_processes, "STRETCH_SECONDS", 0.5)
    needles = {index: b"10:02:00 ledger ERROR needle-xyz %d" % index for index in (100, 9_000, 17_000)}
    log = _log(tmp_path, 20_000, needles)
    alone = _all(log, "needle-xyz|segment MERGE", processes=0, limit=1000)
    lost = HELPERS._helpers[0].process.pid
    watcher = _stop_first_helper_once_asked(kill)
    helped = _all(log, "needle-xyz|segment MERGE", processes=2, limit=1000)
    watcher.join()
    assert helped == alone
    assert HELPERS.failures == 1 and lost not in HELPERS.pids(), "the lost helper was left"
    assert len(stretches) < log.stat().st_size // SIZES.stretch_bytes, "the desk read the rest itself"
    # The search after it has the real deadline: a new helper on a loaded machine may take over 0.5 s a stretch.
    monkeypatch.setattr(timeline_processes, "STRETCH_SECONDS", deadline)
    _wait_for_helpers()
    stretches.clear()
    assert _all(log, "needle-xyz|segment MERGE", processes=2, limit=1000) == alone
    assert stretches and HELPERS.failures == 0, "new helpers took over"


def test_budgets_and_cancellation_stop_a_helped_search_where_it_resumes_exactly(
    tmp_path: Path, stretches: list[Any]
) -> None:
    needles = {index: b"10:02:00 ledger ERROR needle-xyz %d" % index for index in (10, 9_000, 15_000)}
    log = _log(tmp_path, 20_000, needles)
    expected = _found(_all(log, "needle-xyz", processes=0))
    quick = _all(log, "needle-xyz", processes=2, time_budget=0.0)
    assert {stopped for _m, _c, stopped in quick[:-1]} == {"time budget"}
    assert len(quick) > log.stat().st_size // SIZES.stretch_bytes // 2, "a stretch or so a call"
    assert _found(quick) == expected, "nothing lost"
    stretches.clear()
    short = _all(log, "needle-xyz", processes=2, byte_budget=100_000)
    assert _found(short) == expected and stretches
    assert short == _all(log, "needle-xyz", processes=0, byte_budget=100_000), "the same calls, stopped alike"
    assert {stopped for _m, _c, stopped in short[:-1]} == {"byte budget"}
    flag = threading.Event()
    flag.set()
    compiled = compile_pattern("needle-xyz")
    cancelled = search(log, compiled, limit=1000, cancelled=flag, sizes=SIZES, processes=2)
    assert cancelled.stopped == "cancelled" and cancelled.next_cursor is not None
    assert 0 < cancelled.scanned_bytes < log.stat().st_size // 2


def test_a_helped_search_looks_at_its_budget_between_stretches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stretches: list[Any]
) -> None:
    log = _log(tmp_path, 20_000, {})
    flag = threading.Event()
    real = search_processes.clear_stretches

    def cancelled_once_helped(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for stretch in real(*args, **kwargs):
            if stretch is not None:
                stretches.append(stretch)
                flag.set()  # the call is cancelled as the helpers' first answer comes
            yield stretch

    monkeypatch.setattr(search_processes, "clear_stretches", cancelled_once_helped)
    step = search(log, compile_pattern("needle-xyz"), limit=10, cancelled=flag, sizes=SIZES, processes=2)
    assert step.stopped == "cancelled" and step.next_cursor is not None and stretches
    assert step.scanned_bytes <= 4 * SIZES.stretch_bytes, "the desk's own reads and at most one of the helpers'"


def test_a_search_beside_a_timeline_holding_the_helpers_reads_alone(tmp_path: Path, stretches: list[Any]) -> None:
    log = _log(tmp_path, 20_000, {500: b"10:02:00 ledger ERROR needle-xyz"})
    with HELPERS.lent(2) as helpers:  # as a timeline's scan holds them
        assert len(helpers) == 2
        meanwhile = _all(log, "needle-xyz", processes=2)
    assert not stretches
    assert meanwhile == _all(log, "needle-xyz", processes=0)
    assert _all(log, "needle-xyz", processes=2) == meanwhile and stretches


def test_a_first_big_search_does_not_wait_for_helpers_to_start(tmp_path: Path, stretches: list[Any]) -> None:
    HELPERS.end_all()
    log = _log(tmp_path, 20_000, {500: b"10:02:00 ledger ERROR needle-xyz"})
    first = _all(log, "needle-xyz", processes=2)
    assert not stretches and HELPERS.pids(), "read alone while the helpers start"
    _wait_for_helpers()
    assert _all(log, "needle-xyz", processes=2) == first and stretches


def test_a_first_big_search_that_ends_early_starts_no_helper(tmp_path: Path) -> None:
    """The first 50 of a common pattern end in the log's first stretch: starting helpers would only take a core
    from it; and a long first search starts them only once it has its answer."""
    HELPERS.end_all()
    log = _log(tmp_path, 20_000, {500: b"10:02:00 ledger ERROR needle-xyz"})
    early = search(log, compile_pattern("ERROR"), limit=5, processes=2, sizes=SIZES)
    assert len(early.matches) == 5 and early.next_cursor is not None
    assert HELPERS.pids() == [], "a search that ended in its first stretch started helpers"
    started: list[list[int]] = []
    real_read = search_processes.helped_scan

    def watched(*args: Any, **kwargs: Any) -> bool:
        wanted = real_read(*args, **kwargs)
        started.append(HELPERS.pids())  # what runs while this search still reads
        return wanted

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("incident_desk.core.search.engine.helped_scan", watched)
        _all(log, "needle-xyz", processes=2)
    assert started and started[0] == [], "helpers started while the search that needed them read"
    assert HELPERS.pids(), "started once it had its answer"


def _result(shown: Any) -> tuple[list[Any], Any]:
    view = shown.structured_content or {}
    assert not shown.is_error and view["stopped"] == "end of log", shown
    return view["matches"], view["next_cursor"]


@pytest.mark.anyio
async def test_over_mcp_a_big_log_is_searched_with_helpers_and_the_loop_stays_free(
    make_app: AppFactory, tmp_path: Path, stretches: list[Any]
) -> None:
    from incident_desk.server import build_server

    data_dir, _levels = big_timeline_desk(tmp_path, 72)
    log = data_dir / "incidents" / "INC-BIG" / "log.txt"
    lines = log.read_bytes().count(b"\n")
    with log.open("ab") as handle:
        handle.write(b"2026-11-29T11:00:00Z ledger ERROR needle-xyz in the last line\n")
    HELPERS.end_all()
    app = make_app(data_dir=data_dir, search_processes=2, search_time_budget_seconds=60)
    ask = {"incidentId": "INC-BIG", "pattern": "needle-xyz|SEGMENT fault"}
    async with connect(build_server(app), "legacy") as client:
        first = _result(await client.call_tool("search_incident_log", ask))
        assert not stretches, "the first search read alone while the helpers started"
        _wait_for_helpers()
        async with pinging(client) as pings:
            helped = _result(await client.call_tool("search_incident_log", ask))
    assert helped == first
    assert [match["number"] for match in helped[0]] == [lines + 1]
    assert len(stretches) >= 2 and stretches[-1].end == log.stat().st_size, "the helpers read the whole log"
    assert statistics.median(pings) < 0.1 and max(pings) < 0.5, pings


def test_a_helped_result_is_a_search_result(tmp_path: Path, stretches: list[Any]) -> None:
    log = _log(tmp_path, 20_000, {})
    step = search(log, compile_pattern("needle-xyz"), limit=10, sizes=SIZES, processes=2)
    assert isinstance(step, SearchResult) and step.matches[-1].number == 20_001 and stretches
    assert step.scanned_bytes == step.total_bytes == log.stat().st_size


def test_a_helper_finds_the_first_candidate_line_and_the_newlines_before_it(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"10:00:00 api INFO a\n" * 100 + b"10:00:01 api INFO needle-xyz\n" + b"10:00:02 api INFO b\n" * 50)
    with path.open("rb") as handle:
        fd = handle.fileno()
        found = search_processes.clear_stretch(fd, 0, 3000, (b"needle-xyz",), False, 16 * 1024, 2 * ROW)
        assert (found.begin, found.end, found.clear_until, found.newlines, found.whole) == (0, 3009, 2000, 100, True)
        later = search_processes.clear_stretch(fd, 2010, 3000, (b"needle-xyz",), False, 16 * 1024, 2 * ROW)
        assert (later.begin, later.clear_until, later.newlines) == (2029, 3009, 49), "from the first line start on"
        os.truncate(path, 1000)
        assert not search_processes.clear_stretch(fd, 0, 3000, (b"needle-xyz",), False, 16 * 1024, 2 * ROW).whole


def helped_search_env(tmp_path: Path, **extra: str) -> tuple[dict[str, str], int]:
    """A desk's environment over INC-BIG, a 72 MiB log whose last line (its number returned) holds needle-xyz,
    searched with two helpers, its log at debug (which says when they read)."""
    from tests.helpers import child_env

    data_dir, _levels = big_timeline_desk(tmp_path, 72)
    log = data_dir / "incidents" / "INC-BIG" / "log.txt"
    with log.open("ab") as handle:
        handle.write(b"2026-11-29T11:00:00Z ledger ERROR needle-xyz in the last line\n")
    env = child_env(
        tmp_path / "audit.sqlite3",
        INCIDENT_DESK_DATA_DIR=str(data_dir),
        INCIDENT_DESK_SEARCH_TIME_BUDGET_SECONDS="60",
        INCIDENT_DESK_SEARCH_PROCESSES="2",
        INCIDENT_DESK_LOG_LEVEL="debug",
        **extra,
    )
    return env, log.read_bytes().count(b"\n")


async def search_until_helpers_read(client: Any, capfd: pytest.CaptureFixture[str]) -> Any:
    """Search INC-BIG for needle-xyz until the desk's log says helpers read part of it (the first search starts
    them and reads alone)."""
    from tests.helpers import until_logged

    async def search() -> Any:
        return await client.call_tool("search_incident_log", {"incidentId": "INC-BIG", "pattern": "needle-xyz"})

    return await until_logged(capfd, "search read with helpers", search, tries=40, pause=0.25)


@pytest.mark.subprocess
@pytest.mark.anyio
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the desk's helpers in /proc")
async def test_over_stdio_helpers_search_a_big_log_and_end_with_the_desk(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from mcp import Client, StdioServerParameters

    from tests.helpers import ROOT
    from tests.test_timeline_processes import _command, children, helpers_of, wait_until_gone

    env, last_line = helped_search_env(tmp_path)
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    async with Client(params, mode="legacy") as client:
        shown = await search_until_helpers_read(client, capfd)
        (desk,) = [pid for pid in children(os.getpid()) if b"incident_desk" in _command(pid)]
        helpers = helpers_of(desk)
    assert [match["number"] for match in _result(shown)[0]] == [last_line]
    assert len(helpers) == 2
    assert wait_until_gone([desk, *helpers]), "the helpers ended with the desk"


def _desk_with_needles(tmp_path: Path, mib: int) -> tuple[Path, list[int]]:
    """INC-BIG with a log of about ``mib`` MiB: a needle line at its middle (in a helper's stretch) and its last
    line; their line numbers."""
    data_dir, _levels = big_timeline_desk(tmp_path, mib // 2)
    log = data_dir / "incidents" / "INC-BIG" / "log.txt"
    half = log.read_bytes()
    needle = b"2026-11-29T11:00:00Z ledger ERROR needle-xyz %d\n"
    log.write_bytes(half + needle % 1 + half + needle % 2)
    lines = half.count(b"\n")
    return data_dir, [lines + 1, 2 * lines + 2]


@pytest.mark.anyio
@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="stops a helper with SIGSTOP")
async def test_a_stopped_helper_is_dropped_and_its_stretch_read_in_the_same_call(
    make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    """A helper SIGSTOPped before the search asks it: the search misses nothing in that same call (at main it waited
    out its budget for the helper and found nothing), and the next search is whole too (at main it waited out its
    budget again, draining the stopped helper)."""
    from incident_desk.server import build_server

    data_dir, needles = _desk_with_needles(tmp_path, 100)
    HELPERS.end_all()
    app = make_app(data_dir=data_dir, search_processes=2, search_time_budget_seconds=3)
    ask = {"incidentId": "INC-BIG", "pattern": "needle-xyz"}
    async with connect(build_server(app), era) as client:
        _wait_for_helpers()
        stopped = HELPERS._helpers[0].process.pid or 0
        os.kill(stopped, signal.SIGSTOP)
        try:
            first = await client.call_tool("search_incident_log", ask)
            second = await client.call_tool("search_incident_log", ask)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
    for answer in (first, second):
        matches, next_cursor = _result(answer)
        assert [match["number"] for match in matches] == needles and next_cursor is None
    assert stopped not in HELPERS.pids(), "the stopped helper was dropped"


def test_a_helper_still_busy_when_the_next_search_starts_is_left_out_not_waited_for(
    tmp_path: Path, stretches: list[Any]
) -> None:
    """A search whose budget ends while it waits for a stopped helper leaves that helper busy: the next search
    is lent the other one at once (at main it waited 2 s for the stopped one first, its whole budget here), and
    the stopped helper, resumed, is lent again once it has answered."""
    needles = {index: b"10:02:00 ledger ERROR needle-xyz %d" % index for index in (100, 9_000, 17_000)}
    log = _log(tmp_path, 20_000, needles)
    expected = _found(_all(log, "needle-xyz", processes=0))
    helper = HELPERS._helpers[0]
    os.kill(helper.process.pid or 0, signal.SIGSTOP)
    try:
        pattern = compile_pattern("needle-xyz")
        cut = search(log, pattern, limit=1000, sizes=SIZES, processes=2, time_budget=0.3)
        assert cut.stopped == "time budget" and helper.asked, "the budget ended while the search waited for it"
        stretches.clear()
        began = time.monotonic()
        whole = search(log, pattern, limit=1000, sizes=SIZES, processes=2, time_budget=1.5)
        took = time.monotonic() - began
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper.process.pid or 0, signal.SIGCONT)
    assert whole.stopped == "end of log", f"{whole.stopped} after {took:.1f}s"
    assert [(line.number, line.text) for line in whole.matches] == expected
    assert stretches, "the other helper was lent"
    assert helper.process.pid in HELPERS.pids(), "a busy helper is kept"
    _wait_for_helpers()  # resumed, it answers what it was asked and is lent again
    assert helper in HELPERS._helpers and not helper.asked
