"""The timeline's helper processes: what they count equals a line-by-line reading and the desk's own count, on
hostile logs cut into stretches anywhere; a helper that dies, hangs or is busy costs only speed; the log changing
under them, a budget and a cancel flag stop a pass where one process would."""

from __future__ import annotations

import io
import os
import random
import shutil
import signal
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from incident_desk.core import helper_pool
from incident_desk.core.helper_pool import HELPERS
from incident_desk.core.timeline import chunks as timeline_chunks
from incident_desk.core.timeline import levels as timeline
from incident_desk.core.timeline.helped import count_stretch, stretch_counts
from tests.test_timeline_kernel import NOON, _as_counts, _hostile_line, _reference

CHUNK = 4096
CARRY = 64 * 1024


@pytest.fixture
def stretches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The stretches helpers counted in this test, in the order the pass took them; two helpers started and
    ready (a pass hands over to helpers only once they are)."""
    assert HELPERS.start(2, wait_seconds=60)
    taken: list[Any] = []
    real = stretch_counts

    def watched(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for stretch in real(*args, **kwargs):
            taken.append(stretch)
            yield stretch

    monkeypatch.setattr(timeline, "stretch_counts", watched)
    yield taken
    HELPERS.end_all()


def _log(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "log.txt"
    path.write_bytes(data)
    return path


def _scan(path: Path, **options: Any) -> timeline.LevelScan:
    options = {"chunk_bytes": CHUNK, "max_carry_bytes": CARRY, "stretch_bytes": 64 * 1024, **options}
    with path.open("rb") as handle:
        return timeline.scan_levels(handle, anchor=NOON, redactor=lambda text: text.replace("x", "*"), **options)


def _alone(path: Path, **options: Any) -> timeline.LevelScan:
    return _scan(path, processes=0, **options)


def _hostile(seed: int, lines: int) -> bytes:
    rng = random.Random(seed)
    return b"".join(_hostile_line(rng) for _ in range(lines))


def _same(helped: timeline.LevelScan, alone: timeline.LevelScan) -> None:
    assert helped.minutes == alone.minutes
    assert helped.first_error == alone.first_error
    assert (helped.scanned_lines, helped.unparsed_lines, helped.scanned_bytes, helped.stopped) == (
        alone.scanned_lines,
        alone.unparsed_lines,
        alone.scanned_bytes,
        alone.stopped,
    )
    assert helped.resume is not None and alone.resume is not None
    assert helped.resume.counts == {key: n for key, n in alone.resume.counts.items() if n}
    assert (helped.resume.offset, helped.resume.lines, helped.resume.first_error) == (
        alone.resume.offset,
        alone.resume.lines,
        alone.resume.first_error,
    )


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("stretch", [4096, 64 * 1024])
def test_helpers_count_as_a_line_by_line_reading(tmp_path: Path, stretches: list[Any], seed: int, stretch: int) -> None:
    data = _hostile(seed, 3000)
    path = _log(tmp_path, data)
    helped = _scan(path, processes=2, stretch_bytes=stretch)
    expected, unparsed, lines, first_error = _reference(data)
    assert _as_counts(helped) == expected
    assert (helped.unparsed_lines, helped.scanned_lines) == (unparsed, lines)
    assert (helped.first_error.line if helped.first_error else None) == first_error
    assert len(stretches) >= len(data) // stretch - 1, "the helpers counted the log, a stretch at a time"
    assert [s.begin for s in stretches[1:]] == [s.end for s in stretches[:-1]], "stretches join up"
    _same(helped, _alone(path))


def test_lines_longer_than_a_stretch_and_a_last_line_without_a_newline(tmp_path: Path, stretches: list[Any]) -> None:
    long_line = b"2026-11-29T10:03:00Z api ERROR " + b"x" * 200_000 + b"\n"  # longer than the carry: unparsed
    wide = b"2026-11-29T10:04:00Z api WARN " + b"y" * 20_000 + b"\n"  # over several stretches, counted
    data = _hostile(7, 1000) + long_line + _hostile(8, 500) + wide * 3 + _hostile(9, 500) + b"10:05:00 api INFO end"
    path = _log(tmp_path, data)
    helped = _scan(path, processes=2, stretch_bytes=8192)
    assert stretches, "the helpers counted most of the log"
    _same(helped, _alone(path))
    (end,) = [minute for minute in helped.minutes if minute.start == NOON.replace(hour=10, minute=5)]
    assert end.info >= 1 and helped.scanned_bytes == len(data)  # the last line, without its newline


def test_the_minute_limit_falls_where_one_process_puts_it(tmp_path: Path, stretches: list[Any]) -> None:
    data = b"".join(b"2026-11-29T%02d:%02d:00Z api INFO served\n" % divmod(minute, 60) for minute in range(600)) * 4
    path = _log(tmp_path, data)
    helped = _scan(path, processes=2, stretch_bytes=2048, max_minutes=100, chunk_bytes=1024)
    alone = _alone(path, max_minutes=100, chunk_bytes=1024)
    assert helped.stopped == alone.stopped == "minute limit" and stretches
    # Stretches and chunks end in different places, so the helped pass may stop further on; both count exactly
    # what they read and stay within the limit.
    assert helped.scanned_bytes >= alone.scanned_bytes and len(helped.minutes) <= 100
    expected, unparsed, lines, _ = _reference(data[: helped.scanned_bytes])
    assert _as_counts(helped) == expected and (helped.unparsed_lines, helped.scanned_lines) == (unparsed, lines)


def test_a_grown_log_is_counted_from_where_the_helped_pass_ended(tmp_path: Path, stretches: list[Any]) -> None:
    data = _hostile(11, 2000)
    path = _log(tmp_path, data)
    first = _scan(path, processes=2)
    with path.open("ab") as log:
        log.write(_hostile(12, 2000))
    with path.open("rb") as handle:
        again = timeline.scan_levels(
            handle, anchor=NOON, resume=first.resume, chunk_bytes=CHUNK, max_carry_bytes=CARRY, stretch_bytes=8192
        )
    expected, unparsed, lines, _ = _reference(path.read_bytes())
    assert _as_counts(again) == expected and (again.unparsed_lines, again.scanned_lines) == (unparsed, lines)
    assert again.first_error == first.first_error


def test_budgets_and_cancellation_stop_a_helped_pass_with_a_resume_point(tmp_path: Path, stretches: list[Any]) -> None:
    data = _hostile(13, 4000)
    path = _log(tmp_path, data)
    quick = _scan(path, processes=2, stretch_bytes=8192, time_budget=0.0)
    assert quick.stopped == "time budget"
    assert 0 < quick.scanned_bytes < len(data), "one stretch at least, then the budget"
    with path.open("rb") as handle:
        rest = timeline.scan_levels(handle, anchor=NOON, resume=quick.resume, chunk_bytes=CHUNK, max_carry_bytes=CARRY)
    expected, unparsed, lines, _ = _reference(data)
    assert _as_counts(rest) == expected and (rest.unparsed_lines, rest.scanned_lines) == (unparsed, lines)
    flag = threading.Event()
    flag.set()
    cancelled = _scan(path, processes=2, cancelled=flag)
    assert (cancelled.stopped, cancelled.scanned_bytes) == ("cancelled", 0)


def _stop_helpers_until_asked(kill: bool) -> threading.Thread:
    """Stop the first helper; once the pass has asked it for a count, kill it (or leave it stopped)."""
    pid = HELPERS.pids()[0]
    os.kill(pid, signal.SIGSTOP)
    helper = next(h for h in HELPERS._helpers if h.process.pid == pid)

    def watch() -> None:
        deadline = time.monotonic() + 30
        while not helper.asked and time.monotonic() < deadline:
            time.sleep(0.001)
        if kill:
            os.kill(pid, signal.SIGKILL)

    watcher = threading.Thread(target=watch)
    watcher.start()
    return watcher


def test_a_helper_killed_mid_pass_costs_only_speed(tmp_path: Path, stretches: list[Any]) -> None:
    data = _hostile(21, 6000)
    path = _log(tmp_path, data)
    _scan(path, processes=2)  # starts the helpers
    stretches.clear()
    killed = HELPERS.pids()[0]
    watcher = _stop_helpers_until_asked(kill=True)
    helped = _scan(path, processes=2)
    watcher.join()
    assert HELPERS.failures == 1
    assert len(stretches) < len(data) // (64 * 1024), "the desk counted the rest itself"
    _same(helped, _alone(path))
    assert HELPERS.start(2, wait_seconds=60)
    stretches.clear()
    _same(_scan(path, processes=2), helped)
    assert stretches and HELPERS.failures == 0 and killed not in HELPERS.pids(), "a new helper took its place"


@pytest.mark.timing  # a half-second deadline on helper processes, wall clock
def test_a_hung_helper_is_left_after_its_stretch_deadline(
    tmp_path: Path, stretches: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(helper_pool, "STRETCH_SECONDS", 0.5)
    data = _hostile(22, 6000)
    path = _log(tmp_path, data)
    _scan(path, processes=2)
    hung = HELPERS.pids()[0]
    watcher = _stop_helpers_until_asked(kill=False)
    began = time.monotonic()
    helped = _scan(path, processes=2)
    watcher.join()
    assert time.monotonic() - began < 5
    _same(helped, _alone(path))
    assert HELPERS.failures == 1 and hung not in HELPERS.pids()
    with pytest.raises(ProcessLookupError):
        os.kill(hung, 0)


def test_stopped_helpers_hold_a_pass_no_longer_than_its_time_budget(tmp_path: Path, stretches: list[Any]) -> None:
    data = _hostile(28, 6000)
    path = _log(tmp_path, data)
    for pid in HELPERS.pids():
        os.kill(pid, signal.SIGSTOP)
    began = time.monotonic()
    held = _scan(path, processes=2, time_budget=0.5)
    assert time.monotonic() - began < 3
    assert held.stopped == "time budget" and not stretches
    assert 0 < held.scanned_bytes < len(data), "its first chunk (to its last whole line) here, then the budget"
    expected, unparsed, lines, _ = _reference(data[: held.scanned_bytes])
    assert _as_counts(held) == expected and (held.unparsed_lines, held.scanned_lines) == (unparsed, lines)


def test_a_second_pass_meanwhile_counts_alone(tmp_path: Path, stretches: list[Any]) -> None:
    path = _log(tmp_path, _hostile(23, 2000))
    with HELPERS.lent(2) as helpers:
        assert len(helpers) == 2
        meanwhile = _scan(path, processes=2)
    assert not stretches
    _same(meanwhile, _alone(path))


def test_after_three_lost_passes_in_a_row_the_desk_counts_alone(tmp_path: Path, stretches: list[Any]) -> None:
    path = _log(tmp_path, _hostile(24, 2000))
    for _ in range(helper_pool.GIVE_UP_AFTER):
        HELPERS.failed("a test's")
    with HELPERS.lent(2) as helpers:
        assert helpers == []
    _same(_scan(path, processes=2), _alone(path))
    assert not stretches


@pytest.mark.timing  # a half-second deadline on helper processes, wall clock
def test_an_idle_helper_ends_and_the_next_pass_starts_another(
    tmp_path: Path, stretches: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(helper_pool, "IDLE_SECONDS", 0.5)
    HELPERS.end_all()
    assert HELPERS.start(2, wait_seconds=60)
    path = _log(tmp_path, _hostile(26, 2000))
    first = _scan(path, processes=2)
    started = HELPERS.pids()
    assert len(started) == 2
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert HELPERS.pids() == []
    stretches.clear()
    assert HELPERS.start(2, wait_seconds=60)
    _same(_scan(path, processes=2), first)
    assert stretches and HELPERS.failures == 0 and not set(HELPERS.pids()) & set(started)


def test_helpers_still_starting_take_over_from_where_the_desk_has_counted(
    tmp_path: Path, stretches: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_timeline_responsive import _block

    block, per_block = _block()
    copies = (24 << 20) // len(block)
    path = _log(tmp_path, block * copies)
    HELPERS.end_all()
    assert not HELPERS.start(2)  # started, not ready yet: held before they load numpy
    starting = HELPERS.pids()
    for pid in starting:
        os.kill(pid, signal.SIGSTOP)
    counted_here = threading.Event()
    real = timeline_chunks.counted_chunks

    def watched(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for number, event in enumerate(real(*args, **kwargs)):
            if number == 20:
                counted_here.set()
            yield event

    monkeypatch.setattr(timeline, "counted_chunks", watched)
    result: list[timeline.LevelScan] = []
    scan = threading.Thread(target=lambda: result.append(_scan(path, processes=2, pause_seconds=0.002)))
    scan.start()
    assert counted_here.wait(60)
    for pid in starting:
        os.kill(pid, signal.SIGCONT)
    scan.join()
    (helped,) = result
    assert stretches and stretches[0].begin > 0, "the desk counted the start, the helpers the rest"
    assert stretches[-1].end == len(block) * copies
    assert helped.stopped == "end of log" and helped.scanned_lines == 4000 * copies
    totals = Counter({level: sum(getattr(m, level) for m in helped.minutes) for level in per_block})
    assert totals == Counter({level: count * copies for level, count in per_block.items()})


def test_a_log_truncated_under_the_helpers_is_counted_where_it_now_ends(
    tmp_path: Path, stretches: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _hostile(27, 8000)
    path = _log(tmp_path, data)
    cut = data.index(b"\n", len(data) // 3) + 1
    watched = vars(timeline)["stretch_counts"]  # the fixture's watcher, which this one wraps

    def truncating(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for number, stretch in enumerate(watched(*args, **kwargs)):
            if number == 0:
                os.truncate(path, cut)  # logrotate's copytruncate, say, with a little written since
            yield stretch

    monkeypatch.setattr(timeline, "stretch_counts", truncating)
    cut_short = _scan(path, processes=2, stretch_bytes=4096)
    assert cut_short.stopped == "end of log" and stretches
    assert cut_short.scanned_bytes < len(data), "it stopped where the helpers' stretches ended"
    with path.open("rb") as handle:
        afresh = timeline.scan_levels(handle, anchor=NOON, resume=cut_short.resume, chunk_bytes=CHUNK)
    expected, unparsed, lines, _ = _reference(data[:cut])
    assert _as_counts(afresh) == expected and (afresh.unparsed_lines, afresh.scanned_lines) == (unparsed, lines)


def test_a_log_cut_short_under_a_helper_is_not_taken_as_whole(tmp_path: Path) -> None:
    path = _log(tmp_path, b"10:00:00 api INFO a\n" * 100)
    with path.open("rb") as handle:
        fd = handle.fileno()
        whole = count_stretch(fd, 0, 2000, False, CHUNK, CARRY)
        assert (whole.begin, whole.end, whole.lines, whole.parsed, whole.whole) == (0, 2000, 100, 100, True)
        assert count_stretch(fd, 25, 1000, False, CHUNK, CARRY).begin == 40, "from the first line start after"
        os.truncate(path, 1000)
        assert not count_stretch(fd, 0, 2000, False, CHUNK, CARRY).whole


def test_a_log_that_is_no_file_is_counted_alone(stretches: list[Any]) -> None:
    data = _hostile(25, 3000)
    scan = timeline.scan_levels(io.BytesIO(data), anchor=NOON, processes=2, stretch_bytes=4096)
    assert _as_counts(scan) == _reference(data)[0]
    assert not stretches


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux: from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _command(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def helped_desk_env(tmp_path: Path, **extra: str) -> tuple[dict[str, str], dict[str, int]]:
    """The environment of a desk over a data directory whose INC-BIG has a 72 MiB log (over two stretches),
    counted by two helpers, its log at debug (which says when they counted); and the log's counts per level."""
    from tests.helpers import child_env
    from tests.test_timeline_responsive import big_timeline_desk

    data_dir, expected = big_timeline_desk(tmp_path, 72)
    env = child_env(
        tmp_path / "audit.sqlite3",
        INCIDENT_DESK_DATA_DIR=str(data_dir),
        INCIDENT_DESK_SEARCH_TIME_BUDGET_SECONDS="60",
        INCIDENT_DESK_TIMELINE_PROCESSES="2",
        INCIDENT_DESK_LOG_LEVEL="debug",
        **extra,
    )
    return env, expected


def level_totals(shown: Any) -> dict[str, int]:
    view = shown.structured_content or {}
    assert not shown.is_error and view["stopped"] == "end of log", shown
    return {level: sum(minute[level] for minute in view["minutes"]) for level in ("error", "warn", "info", "debug")}


def helpers_of(desk: int) -> list[int]:
    """The desk's timeline helpers: spawned by multiprocessing (``--multiprocessing-fork`` when frozen)."""
    return [pid for pid in children(desk) if b"spawn_main" in _command(pid) or b"multiprocessing-fork" in _command(pid)]


def wait_until_gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(pid) for pid in pids)


async def call_until_helpers_count(client: Any, capfd: pytest.CaptureFixture[str], cache: Path) -> Any:
    """Ask for INC-BIG's timeline, counted afresh each time (its summary removed), until the desk's log says
    helpers counted part of it: the first call starts them, and counts alone while they load numpy."""
    from tests.helpers import until_logged

    async def afresh() -> Any:
        shutil.rmtree(cache, ignore_errors=True)
        return await client.call_tool("show_incident_timeline", {"incidentId": "INC-BIG"})

    return await until_logged(capfd, "timeline counted by helpers", afresh, tries=20)


@pytest.mark.subprocess
@pytest.mark.anyio
@pytest.mark.timing
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the desk's helpers in /proc")
async def test_over_stdio_helpers_count_a_big_log_and_end_with_the_desk(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from mcp import Client, StdioServerParameters

    from tests.helpers import ROOT, pinging

    env, expected = helped_desk_env(tmp_path)
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    async with Client(params, mode="legacy") as client, pinging(client) as pings:
        shown = await call_until_helpers_count(client, capfd, tmp_path / "timeline-cache")
        (desk,) = [pid for pid in children(os.getpid()) if b"incident_desk" in _command(pid)]
        helpers = helpers_of(desk)
    assert level_totals(shown) == expected
    assert len(helpers) == 2
    assert statistics.median(pings) < 0.1 and max(pings) < 0.5, pings
    assert wait_until_gone([desk, *helpers]), "the helpers ended with the desk"
