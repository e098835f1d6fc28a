"""A skim split between two threads: the second half of what is left is skimmed ahead while the first is.

The runs the second thread passes are passed by the scan itself afterwards, in order and with its own checks, so
a split skim finds, numbers and stops exactly where one thread would. These tests force the split on a small log
(reads of 16 KiB, split from 64 KiB) and compare every answer with a reference and with the same search unsplit:
literals on either side of the split, in its first run, at the end; long and undecodable lines past it; a byte
budget, a cancellation and a read error in the second half.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from incident_desk.core.search import engine as log_search
from incident_desk.core.search import skim as log_skim
from incident_desk.core.search.engine import SearchSizes, search
from incident_desk.core.search.paging import MAX_LINE_BYTES, START, Cursor
from incident_desk.core.search.pattern import compile_pattern

SECOND = "log-skim-ahead"  # the second thread's name
SPLIT = SearchSizes(read_bytes=16 * 1024, first_window=1024, min_window=512, workers=0, split_bytes=64 * 1024)
ONE_THREAD = SearchSizes(read_bytes=16 * 1024, first_window=1024, min_window=512, workers=0, split_bytes=0)


class Split:
    """How many skims were split, where the second half began, and how many runs the second thread passed."""

    def __init__(self) -> None:
        self.begins: list[int] = []
        self.passed = 0


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> Iterator[Split]:
    """Two cores to share, whatever the machine, and each split recorded."""
    seen = Split()
    monkeypatch.setattr(log_skim, "_cores_to_share", lambda: True)
    real_init = log_skim._Ahead.__init__
    real_queued = log_skim._Ahead._queued

    def init(self: log_skim._Ahead, *args: Any) -> None:
        real_init(self, *args)
        seen.begins.append(self.begins)

    def queued(self: log_skim._Ahead) -> Iterator[tuple[int, int, int | None]]:
        for found in real_queued(self):
            seen.passed += 1
            yield found

    monkeypatch.setattr(log_skim._Ahead, "__init__", init)
    monkeypatch.setattr(log_skim._Ahead, "_queued", queued)
    yield seen
    assert not [thread for thread in threading.enumerate() if thread.name == SECOND], "a thread outlived"


@pytest.fixture
def ahead_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan reads nothing while a second thread runs, so that thread skims all of its half first: what the
    scan then finds queued does not depend on how the machine shares its cores between the two."""

    def wait_for_the_second_thread(_: int) -> None:
        for thread in threading.enumerate():
            if thread.name == SECOND:
                thread.join(10)

    _before_reads(monkeypatch, scan=wait_for_the_second_thread)


def _before_reads(
    monkeypatch: pytest.MonkeyPatch,
    second: Callable[[int], None] = lambda _: None,
    scan: Callable[[int], None] = lambda _: None,
) -> None:
    """Run ``second(offset)`` before each read of the second thread, ``scan(offset)`` before each of the scan's."""
    real = os.preadv

    def preadv(fd: int, buffers: list[memoryview], offset: int) -> int:
        (second if threading.current_thread().name == SECOND else scan)(offset)
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", preadv)


def _filler(count: int, *, newline: bytes = b"\n", start: int = 0) -> bytes:
    return b"".join(b"%06d INFO all is well here" % i + newline for i in range(start, start + count))


def _log_ending_in(tmp_path: Path, last_line: bytes) -> tuple[Path, bytes]:
    """A log of 40,000 filler lines and then ``last_line`` (line 40,001), and its bytes."""
    data = _filler(40_000) + last_line + b"\n"
    log = tmp_path / "log.txt"
    log.write_bytes(data)
    return log, data


def _reference(data: bytes, literal: bytes) -> list[int]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [number for number, line in enumerate(lines, 1) if literal in line]


def _found(log: Path, pattern: str, sizes: SearchSizes, **options: Any) -> list[tuple[int, str]]:
    """Every match (number, text), paging with next_cursor to the end."""
    found: list[tuple[int, str]] = []
    cursor: Cursor | None = START
    compiled = compile_pattern(pattern)
    while cursor is not None:
        step = search(log, compiled, cursor=cursor, limit=options.pop("limit", 1_000), sizes=sizes, **options)
        found += [(line.number, line.text) for line in step.matches]
        cursor = step.next_cursor
    return found


def test_a_literal_the_log_does_not_hold_is_skimmed_by_two_threads(
    tmp_path: Path, split: Split, ahead_first: None
) -> None:
    log = tmp_path / "log.txt"
    data = _filler(40_000)
    log.write_bytes(data)
    result = search(log, compile_pattern("absent-needle-q"), limit=10, sizes=SPLIT)
    assert result.matches == [] and result.next_cursor is None and result.scanned_bytes == len(data)
    assert len(split.begins) == 1 and split.passed > 20, "the second half was skimmed by the second thread"
    (begins,) = split.begins
    assert len(data) // 3 < begins < 2 * len(data) // 3 and data[begins - 1 : begins] == b"\n"


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["LF", "CRLF"])
@pytest.mark.parametrize("final_newline", [True, False], ids=["final newline", "none"])
def test_a_split_skim_finds_and_numbers_as_one_thread_and_the_reference(
    tmp_path: Path, split: Split, ahead_first: None, newline: bytes, final_newline: bool
) -> None:
    """The literal on every line around where the second half begins, in the second half, and on the last line."""
    body = _filler(20_000, newline=newline) + _filler(20_000, newline=newline, start=20_000)
    data = bytearray(body)
    half = len(data) // 2
    # Mark lines just before, at and after the middle, a stretch later, and the last line.
    for at in (half - 200, half - 40, half, half + 40, half + 300_000 // 2, len(data) - 10):
        start = data.rfind(b"\n", 0, at) + 1
        data[start : start + 6] = b"needle"
    if not final_newline:
        data = data[: -len(newline)]
    log = tmp_path / "log.txt"
    log.write_bytes(bytes(data))
    expected = _reference(bytes(data), b"needle")
    assert len(expected) == 6
    found = _found(log, "needle", SPLIT)
    assert [number for number, _ in found] == expected
    assert found == _found(log, "needle", ONE_THREAD)
    assert split.begins, "the skim was split"


def test_a_candidate_at_the_first_run_of_the_second_half_is_found(tmp_path: Path, split: Split) -> None:
    """The second thread stops at its first run; the scan passes nothing of it and reads that run itself."""
    data = bytearray(_filler(40_000))
    log = tmp_path / "log.txt"
    log.write_bytes(bytes(data))
    search(log, compile_pattern("absent-needle-q"), limit=10, sizes=SPLIT)
    (begins,) = split.begins
    data[begins : begins + 6] = b"needle"
    log.write_bytes(bytes(data))
    split.passed = 0
    found = search(log, compile_pattern("needle"), limit=1, sizes=SPLIT).matches
    assert [line.number for line in found] == _reference(bytes(data), b"needle") == [data[:begins].count(b"\n") + 1]
    assert split.begins[1:] == [begins] and split.passed == 0


def test_long_and_undecodable_lines_past_the_split_are_shown_as_one_thread_shows_them(
    tmp_path: Path, split: Split, ahead_first: None
) -> None:
    data = (
        _filler(25_000)
        + b"z" * (MAX_LINE_BYTES + 500)
        + b"\n"
        + _filler(3_000)
        + b"bad \xff\xfe bytes\n"
        + _filler(5_000)
    )
    log = tmp_path / "log.txt"
    log.write_bytes(data)
    cut = _found(log, r"z \[line cut\]", SPLIT)
    assert [number for number, _ in cut] == [25_001] and cut == _found(log, r"z \[line cut\]", ONE_THREAD)
    replaced = _found(log, "bad \ufffd", SPLIT)
    assert [number for number, _ in replaced] == [28_002] and replaced == _found(log, "bad \ufffd", ONE_THREAD)
    assert split.begins


def test_a_byte_budget_that_ends_in_the_second_half_stops_where_one_thread_stops(
    tmp_path: Path, split: Split, ahead_first: None
) -> None:
    log, data = _log_ending_in(tmp_path, b"needle-xyz")
    pattern = compile_pattern("needle-xyz")
    budget = 3 * len(data) // 4
    two = search(log, pattern, limit=10, sizes=SPLIT, byte_budget=budget)
    one = search(log, pattern, limit=10, sizes=ONE_THREAD, byte_budget=budget)
    assert split.passed > 0
    assert two.stopped == one.stopped == "byte budget"
    assert two.next_cursor == one.next_cursor and two.next_cursor is not None
    assert two.next_cursor.line == data[: two.next_cursor.offset].count(b"\n") + 1
    assert [number for number, _ in _found(log, "needle-xyz", SPLIT, byte_budget=budget)] == [40_001]


def test_a_search_cancelled_while_passing_the_second_half_stops_there_and_the_thread_ends(
    tmp_path: Path, split: Split, ahead_first: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, data = _log_ending_in(tmp_path, b"needle-xyz last")
    cancelled = threading.Event()
    real = log_search._Search.pass_run

    after_cancel: list[int] = []

    def pass_run(self: log_search._Search, offset: int, length: int, newlines: int | None) -> None:
        if cancelled.is_set():
            after_cancel.append(offset)
        elif split.passed == 5:  # the fifth run the second thread passed
            cancelled.set()
        real(self, offset, length, newlines)

    monkeypatch.setattr(log_search._Search, "pass_run", pass_run)
    result = search(log, compile_pattern("needle-xyz"), limit=10, sizes=SPLIT, cancelled=cancelled)
    assert result.stopped == "cancelled" and result.matches == []
    assert after_cancel == [], "runs were passed after the cancellation"
    cursor = result.next_cursor
    assert cursor is not None and cursor.line == data[: cursor.offset].count(b"\n") + 1
    monkeypatch.setattr(log_search._Search, "pass_run", real)
    rest = search(log, compile_pattern("needle-xyz"), cursor=cursor, limit=10, sizes=SPLIT)
    assert [line.number for line in rest.matches] == [40_001]


def test_a_read_error_in_the_second_thread_leaves_the_reading_to_the_scan(
    tmp_path: Path, split: Split, ahead_first: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _data = _log_ending_in(tmp_path, b"needle-xyz")
    failed: list[int] = []

    def fail(offset: int) -> None:
        failed.append(offset)
        raise OSError(5, "Input/output error")

    _before_reads(monkeypatch, second=fail)
    assert [number for number, _ in _found(log, "needle-xyz", SPLIT)] == [40_001]
    assert failed and split.passed == 0


def test_a_candidate_in_the_first_half_stops_the_second_thread(
    tmp_path: Path, split: Split, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan stops the thread when it returns: the thread, slowed to a run every 50 ms, would otherwise still
    be reading its half (about 30 runs) when the search has answered."""
    _before_reads(monkeypatch, second=lambda _: time.sleep(0.05))
    data = _filler(10_000) + b"needle-xyz\n" + _filler(30_000)
    log = tmp_path / "log.txt"
    log.write_bytes(data)
    result = search(log, compile_pattern("needle-xyz"), limit=1, sizes=SPLIT)
    assert [line.number for line in result.matches] == [10_001]
    assert split.begins and split.passed == 0
    assert not [thread for thread in threading.enumerate() if thread.name == SECOND], "still reading"


def test_a_skim_with_little_left_or_that_ends_soon_is_not_split(tmp_path: Path, split: Split) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(_filler(2_500))  # under 64 KiB after the first runs
    search(log, compile_pattern("absent-needle-q"), limit=10, sizes=SPLIT)
    log.write_bytes(_filler(100) + b"needle-xyz\n" + _filler(40_000))  # a candidate within the first runs
    search(log, compile_pattern("needle-xyz"), limit=1, sizes=SPLIT)
    assert split.begins == []


def test_a_second_thread_that_falls_behind_is_stopped_and_the_scan_goes_on_alone(
    tmp_path: Path, split: Split, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy machine gives the second thread no core: the scan does not wait for it past the run it is on."""
    log, _data = _log_ending_in(tmp_path, b"needle-xyz")
    read_here: list[int] = []

    def record(offset: int) -> None:
        if split.begins and offset >= split.begins[-1]:
            read_here.append(offset)

    _before_reads(monkeypatch, second=lambda _: time.sleep(0.2), scan=record)  # 32 runs to its half: 6 s
    began = time.monotonic()
    assert [number for number, _ in _found(log, "needle-xyz", SPLIT)] == [40_001]
    assert time.monotonic() - began < 2, "the scan waited for the slow thread to finish its half (6 s)"
    assert split.begins and read_here, "the scan read the rest of the second half itself"


def test_one_core_is_not_split(tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_skim, "usable_cores", lambda: 1)
        assert not log_skim._cores_to_share()
        patch.setattr(log_skim, "usable_cores", lambda: 2)
        assert log_skim._cores_to_share()


def test_a_middle_with_no_line_start_within_a_buffer_is_not_split_nor_read_further(
    tmp_path: Path, split: Split, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log whose middle is one long line (a crash's preallocated zeros): the split looks one buffer past the
    middle and no further, outside the scan's budgets, and the skim goes on alone."""
    data = _filler(1_000) + b"\0" * (2 * 1024 * 1024) + b"\n" + _filler(1_000) + b"needle-xyz\n"
    log = tmp_path / "log.txt"
    log.write_bytes(data)
    real = os.pread
    looked: list[int] = []

    def pread(fd: int, length: int, offset: int) -> bytes:
        looked.append(length)
        return real(fd, length, offset)

    monkeypatch.setattr(os, "pread", pread)
    assert [line.number for line in search(log, compile_pattern("needle-xyz"), limit=5, sizes=SPLIT).matches] == [2_002]
    assert split.begins == [] and looked and max(looked) <= SPLIT.read_bytes


def test_after_a_skim_that_ended_at_once_the_next_is_not_split(tmp_path: Path, split: Split) -> None:
    """Candidates close together: each skim is expected to go as far as the last one went, so a skim that met a
    candidate at once starts no thread for the next (its reads would be thrown away at the next candidate)."""
    data = b"".join(b"needle-xyz %d\n" % i + _filler(100) for i in range(100)) + _filler(40_000)
    log = tmp_path / "log.txt"
    log.write_bytes(data)
    found = [number for number, _ in _found(log, "needle-xyz", SPLIT)]
    assert found == _reference(data, b"needle-xyz")
    assert split.begins == []


def test_no_thread_to_be_had_leaves_the_skim_to_go_on_alone(
    tmp_path: Path, split: Split, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = threading.Thread.start
    refused: list[str] = []

    def start(self: threading.Thread) -> None:
        if self.name == SECOND:
            refused.append(self.name)
            raise RuntimeError("can't start new thread")
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    log, _data = _log_ending_in(tmp_path, b"needle-xyz")
    assert [number for number, _ in _found(log, "needle-xyz", SPLIT)] == [40_001]
    assert refused and split.passed == 0
