"""Runs without a candidate are not counted when scanned: a search counts newlines only where a number needs them.

A fresh desk's first search for a literal the log does not hold used to count every run's newlines (most of its
time); now a run is counted when a line of it is numbered, or before a number after it is (the next match, the
cursor of a scan stopped by a budget), by reading it again. These tests put every such path through small reads:
literals at the first and last byte, across read edges, CRLF lines, no final newline, long lines, budgets and
cancellation, each against a reference that numbers the lines itself.
"""

from __future__ import annotations

import random
import re
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from incident_desk.core.activity import ACTIVITY
from incident_desk.core.redaction.face import SECRETS
from incident_desk.core.search import engine as log_search
from incident_desk.core.search import paging as logfile
from incident_desk.core.search import runs as log_runs
from incident_desk.core.search.engine import SearchSizes, search
from incident_desk.core.search.paging import MAX_LINE_BYTES, Cursor
from incident_desk.core.search.pattern import compile_pattern
from incident_desk.core.search.runs import ROW, Run

SMALL = SearchSizes(read_bytes=16 * 1024, first_window=1024, min_window=512, workers=0)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the offset of every run whose newlines are counted."""
    counted: list[int] = []
    real = log_runs.newlines_and_long_lines

    def counting(run: Run, scratch: Any) -> tuple[int, list[tuple[int, int]]]:
        counted.append(run.offset)
        return real(run, scratch)

    monkeypatch.setattr(log_search, "newlines_and_long_lines", counting)
    return counted


def _reference(data: bytes, literal: str) -> list[int]:
    """The numbers of the lines holding ``literal``, a line being what ends in a newline (or the file)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [number for number, line in enumerate(lines, 1) if literal.encode() in line]


def _found(log: Path, pattern: str, *, sizes: SearchSizes = SMALL, limit: int = 1_000_000, **options: Any) -> list[int]:
    """Every match's number, paging with next_cursor to the end."""
    numbers: list[int] = []
    cursor: Cursor | None = logfile.START
    compiled = compile_pattern(pattern)
    while cursor is not None:
        step = search(log, compiled, cursor=cursor, limit=limit, sizes=sizes, **options)
        numbers += [line.number for line in step.matches]
        cursor = step.next_cursor
    return numbers


def _filler(count: int, *, newline: bytes = b"\n") -> bytes:
    return b"".join(b"%06d INFO all is well here" % i + newline for i in range(count))


def test_a_literal_the_log_does_not_hold_counts_no_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counted = _counting(monkeypatch)
    log = tmp_path / "log.txt"
    log.write_bytes(_filler(20_000))
    result = search(log, compile_pattern("absent-needle-q"), limit=10, sizes=SMALL, redaction=SECRETS)
    assert result.matches == [] and result.next_cursor is None and result.stopped == "end of log"
    assert result.scanned_bytes == log.stat().st_size
    assert counted == [], "a search that numbers nothing counted runs"


def test_a_match_after_uncounted_runs_is_numbered_and_its_runs_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = _counting(monkeypatch)
    log = tmp_path / "log.txt"
    data = _filler(20_000) + b"the needle-xyz line\n" + _filler(100)
    log.write_bytes(data)
    assert _found(log, "needle-xyz") == _reference(data, "needle-xyz") == [20_001]
    assert len(counted) > 10, "the runs before the match were counted to number it"
    counted.clear()
    assert _found(log, "needle-xyz") == [20_001]
    assert counted == [], "the counts made to number a match are remembered for the next search"


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["LF", "CRLF"])
@pytest.mark.parametrize("final_newline", [True, False], ids=["final newline", "none"])
def test_literals_at_the_first_and_last_byte_and_across_read_edges_are_numbered_as_the_reference(
    tmp_path: Path, newline: bytes, final_newline: bool
) -> None:
    """A read of 16 KiB ends mid-line about every 250 lines: the literal is put across each such edge too."""
    rng = random.Random(43)
    lines = [b"needle-q at the first byte"]
    for i in range(12_000):
        lines.append(b"%06d INFO filler %s" % (i, b"x" * rng.randint(0, 90)))
        if i % 1_999 == 0:
            lines.append(b"%06d WARN needle-q in the middle" % i)
    lines.append(b"the last line ends in needle-q")
    data = newline.join(lines) + (newline if final_newline else b"")
    # Every place a read may end: put the literal across the stretch edges the reads start from.
    stride = SMALL.read_bytes - SMALL.read_bytes // 8
    body = bytearray(data)
    for edge in range(stride, len(body) - 64, stride):
        body[edge - 4 : edge + 4] = b"needle-q"
    data = bytes(body)
    log = tmp_path / "log.txt"
    log.write_bytes(data)
    expected = _reference(data, "needle-q")
    assert expected[0] == 1 and expected[-1] == data.count(b"\n") + (0 if final_newline else 1)
    for workers in (0, 2):
        sizes = SearchSizes(read_bytes=16 * 1024, first_window=1024, min_window=512, workers=workers)
        assert _found(log, "needle-q", sizes=sizes) == expected
        assert _found(log, "needle-q", sizes=sizes, limit=3) == expected, "paging three at a time"


def test_long_lines_are_found_without_counting_as_a_count_finds_them() -> None:
    """The stepping search for lines over MAX_LINE_BYTES finds exactly the lines the newline count finds."""
    rng = random.Random(7)
    scratch = np.empty(128 * ROW, dtype=np.bool_)
    for _ in range(40):
        parts = []
        for _ in range(rng.randint(1, 30)):
            length = rng.choice([0, 5, MAX_LINE_BYTES - 1, MAX_LINE_BYTES, MAX_LINE_BYTES + 1, 3 * ROW, 20_000])
            parts.append(b"y" * length)
        data = b"\n".join(parts) + (b"\n" if rng.random() < 0.5 else b"")
        buffer = bytearray(data)
        run = Run(0, buffer, len(data), terminated=data.endswith(b"\n"))
        assert log_runs.long_lines(buffer, len(data)) == log_runs.newlines_and_long_lines(run, scratch)[1]


def test_a_long_line_in_an_uncounted_run_is_still_shown_cut_and_numbered(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    data = _filler(3_000) + b"z" * (MAX_LINE_BYTES + 500) + b"\n" + _filler(10)
    log.write_bytes(data)
    pattern = compile_pattern(r"z \[line cut\]")  # what only the cut line shows: its raw bytes do not hold it
    assert pattern.literal == b"z [line cut]"
    (line,) = search(log, pattern, limit=5, sizes=SMALL).matches
    assert line.number == 3_001 and line.text.endswith("z [line cut]")


def test_a_scan_stopped_by_its_byte_budget_counts_what_its_cursor_needs(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    data = _filler(30_000) + b"needle-xyz one\n" + _filler(30_000) + b"needle-xyz two\n"
    log.write_bytes(data)
    expected = _reference(data, "needle-xyz")
    pattern = compile_pattern("needle-xyz")
    first = search(log, pattern, limit=10, sizes=SMALL, byte_budget=len(data) // 3)
    assert first.stopped == "byte budget" and first.matches == [] and first.next_cursor is not None
    assert first.next_cursor.line == data[: first.next_cursor.offset].count(b"\n") + 1
    assert _found(log, "needle-xyz", byte_budget=len(data) // 3) == expected


def test_counting_starts_early_when_the_time_left_would_not_cover_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run left uncounted is counted at once when the time left would not cover counting it later."""
    counted = _counting(monkeypatch)
    monkeypatch.setattr(log_search, "_SETTLE_SECONDS_PER_BYTE", 1.0)  # no time ever covers it
    log = tmp_path / "log.txt"
    data = _filler(10_000) + b"needle-xyz\n"
    log.write_bytes(data)
    assert _found(log, "needle-xyz", time_budget=30.0) == [10_001]
    assert len(counted) > 5


def test_a_cancelled_scan_answers_where_its_count_got_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled, the scan does not count what it passed: its cursor is where the count got to, and exact."""
    counted = _counting(monkeypatch)
    log = tmp_path / "log.txt"
    data = b"needle-xyz first\n" + _filler(20_000) + b"needle-xyz last\n"
    log.write_bytes(data)
    cancelled = threading.Event()
    real = log_search._Search.pass_run
    passed: list[int] = []

    def pass_run(self: log_search._Search, offset: int, length: int, newlines: int | None) -> None:
        passed.append(offset)
        if len(passed) == 20:
            cancelled.set()
        real(self, offset, length, newlines)

    monkeypatch.setattr(log_search._Search, "pass_run", pass_run)
    result = search(log, compile_pattern("needle-xyz"), limit=10, sizes=SMALL, cancelled=cancelled)
    assert result.stopped == "cancelled" and [line.number for line in result.matches] == [1]
    cursor = result.next_cursor
    assert cursor is not None and 0 < cursor.offset < passed[-1]
    assert cursor.line == data[: cursor.offset].count(b"\n") + 1
    assert len(counted) <= 2, "a cancelled scan counted the runs it passed"
    monkeypatch.setattr(log_search._Search, "pass_run", real)
    rest = search(log, compile_pattern("needle-xyz"), cursor=cursor, limit=10, sizes=SMALL)
    assert [line.number for line in rest.matches] == [20_002]


def test_a_log_rewritten_between_the_scan_and_the_count_is_numbered_from_its_bytes_now(tmp_path: Path) -> None:
    """Counting reads a run again; a run that shrank meanwhile is counted as it is and not remembered."""
    log = tmp_path / "log.txt"
    data = _filler(5_000) + b"needle-xyz\n"
    log.write_bytes(data)
    real = log_search._Search.settle
    rewritten: list[bool] = []

    def settle(self: log_search._Search) -> None:
        if self.uncounted and not rewritten:
            rewritten.append(True)
            with log.open("r+b") as handle:
                handle.truncate(len(data) // 2)
        real(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_search._Search, "settle", settle)
        result = search(log, compile_pattern("needle-xyz"), limit=5, sizes=SMALL)
    assert rewritten and len(result.matches) == 1  # no error; the number is what the bytes say now
    log.write_bytes(data)
    assert _found(log, "needle-xyz") == [5_001]


def test_a_search_with_every_line_a_candidate_numbers_as_the_reference(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    data = b"".join(b"%06d INFO needle-%d\r\n" % (i, i % 7) for i in range(8_000))
    log.write_bytes(data)
    expected = [n for n, line in enumerate(data.split(b"\n")[:-1], 1) if re.search(rb"needle-3", line)]
    assert _found(log, "needle-3") == expected


def test_a_search_under_way_is_known_so_background_loading_keeps_out_of_its_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search stack's loader imports numpy only when no search has run for a while (``core.activity``)."""
    log = tmp_path / "log.txt"
    log.write_bytes(_filler(5_000))
    seen: list[bool] = []
    real = log_search._Search.pass_run

    def pass_run(self: log_search._Search, offset: int, length: int, newlines: int | None) -> None:
        seen.append(ACTIVITY.quiet_for() == 0)
        real(self, offset, length, newlines)

    monkeypatch.setattr(log_search._Search, "pass_run", pass_run)
    search(log, compile_pattern("absent-needle-q"), limit=5, sizes=SMALL)
    assert seen and all(seen)
    assert 0 < ACTIVITY.quiet_for() < 5
    with pytest.raises(logfile.CursorError):
        search(log, compile_pattern("absent-needle-q"), cursor=Cursor(1, 3), limit=5, sizes=SMALL)
    assert 0 < ACTIVITY.quiet_for() < 5, "a search that failed is no longer under way"


def test_before_numpy_is_loaded_runs_are_counted_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search never imports numpy (its import would hold the interpreter from the event loop): until the search
    stack's loader has loaded it, runs are counted by ``bytes.count``, to the same numbers."""
    counted = _counting(monkeypatch)
    monkeypatch.delitem(sys.modules, "numpy")
    log = tmp_path / "log.txt"
    data = b"x" * (MAX_LINE_BYTES + 10) + b"\n" + _filler(20_000) + b"needle-xyz\r\n" + _filler(10)
    log.write_bytes(data)
    first = search(log, compile_pattern("needle-xyz"), limit=5, sizes=SMALL)
    assert [line.number for line in first.matches] == [20_002]
    assert counted == [] and "numpy" not in sys.modules
    stopped = search(log, compile_pattern("needle-xyz"), limit=5, sizes=SMALL, byte_budget=len(data) // 2)
    assert stopped.next_cursor is not None
    assert stopped.next_cursor.line == data[: stopped.next_cursor.offset].count(b"\n") + 1
