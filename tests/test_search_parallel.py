"""The search's parallel reader against the line-by-line reference: stretches read by workers or by the scan.

A log is cut into fixed stretches, each run starting at the first line that starts in its stretch; where that
fails (a line longer than a buffer's slack, a stretch no line starts in) the bytes between are read line by line.
Every corpus pattern in both reading modes is checked in test_search_corpus (its ``read_size`` fixture); here, logs
built to put long lines across every stretch boundary must give what the reference does: same lines, numbers and
cursors.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy  # noqa: F401 - runs are counted through numpy once it is loaded, as the desk's loader loads it
import pytest

from incident_desk.core.redaction.face import SECRETS
from incident_desk.core.search import engine as log_search
from incident_desk.core.search import parallel as log_parallel
from incident_desk.core.search import runs as log_runs
from incident_desk.core.search.engine import SearchSizes, search
from incident_desk.core.search.pattern import compile_pattern
from incident_desk.core.search.runs import Run
from tests.test_search_corpus import _reference, _search_all


def _stretchy_log(path: Path, read_bytes: int) -> Path:
    """Short lines with, around every stretch boundary, lines of every length that matters: within a buffer's
    slack, beyond it, longer than a stretch (no line starts in the next), longer than a buffer; the last line
    long and without a newline."""
    stride = read_bytes - read_bytes // 8
    lengths = [10, read_bytes // 8 - 5, read_bytes // 8 + 5, stride + 100, 2 * read_bytes + 7, 3]
    lines: list[bytes] = []
    size = 0
    number = 0
    while size < 12 * read_bytes:
        number += 1
        if number % 97 == 0:
            body = b"needle %d " % number
            line = body + b"w" * max(0, lengths[(number // 97) % len(lengths)] - len(body))
        else:
            line = b"%d INFO needle-less filler line" % number
        lines.append(line)
        size += len(line) + 1
    lines.append(b"needle last " + b"z" * read_bytes)
    path.write_bytes(b"\n".join(lines))
    return path


@pytest.mark.parametrize("workers", [0, 2], ids=["by the scan", "by two workers"])
@pytest.mark.parametrize("pattern", ["needle", r"needle \d+ w", r"w$", "filler"])
def test_lines_across_stretch_boundaries_are_numbered_and_found_as_the_reference(
    tmp_path: Path, pattern: str, workers: int
) -> None:
    read_bytes = 16 * 1024
    log = _stretchy_log(tmp_path / "log.txt", read_bytes)
    expected = _reference(log, pattern, False, True)
    assert expected
    for limit in (1_000_000, 5):
        sizes = SearchSizes(read_bytes=read_bytes, first_window=1024, min_window=512, workers=workers)
        assert _search_all(log, pattern, False, True, limit=limit, sizes=sizes) == expected


def test_a_stretch_that_needs_reading_line_by_line_is_read_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The long lines of the stretchy log do send some stretches to the line-by-line reader (the test above would
    pass without the parallel path otherwise)."""
    read_bytes = 16 * 1024
    log = _stretchy_log(tmp_path / "log.txt", read_bytes)
    line_by_line: list[tuple[int, int | None]] = []
    real = log_parallel.ParallelRuns._line_by_line

    def recorded(self: log_parallel.ParallelRuns, start: int, end: int | None) -> object:
        line_by_line.append((start, end))
        return real(self, start, end)

    monkeypatch.setattr(log_parallel.ParallelRuns, "_line_by_line", recorded)
    sizes = SearchSizes(read_bytes=read_bytes, workers=2)
    result = search(log, compile_pattern("needle last"), limit=10, redaction=SECRETS, sizes=sizes)
    assert [line.number for line in result.matches] == [log.read_bytes().count(b"\n") + 1]
    assert any(end is not None for _start, end in line_by_line), "no stretch was read line by line"
    stretches = log.stat().st_size // (read_bytes - read_bytes // 8)
    assert len(line_by_line) < stretches // 2, "most stretches are read by the workers"


def test_a_log_that_shrinks_under_the_reads_ends_the_search_without_error(tmp_path: Path) -> None:
    """A copytruncate between two reads: the search ends where the file now ends (no crash, no stale run)."""
    log = tmp_path / "log.txt"
    log.write_bytes(b"".join(b"%06d INFO line\n" % i for i in range(20_000)))
    real = log_search._Search.run
    truncated: list[bool] = []

    def run(self: log_search._Search, run: Run) -> None:
        if not truncated:
            truncated.append(True)
            log.write_bytes(b"")  # truncate in place, as copytruncate does
        real(self, run)

    for workers in (0, 2):
        log.write_bytes(b"".join(b"%06d INFO line\n" % i for i in range(20_000)))
        truncated.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(log_search._Search, "run", run)
            sizes = SearchSizes(read_bytes=16 * 1024, workers=workers)
            result = search(log, compile_pattern("INFO"), limit=100_000, sizes=sizes)
        numbers = [line.number for line in result.matches]
        assert numbers == list(range(1, len(numbers) + 1))
        assert len(numbers) < 20_000


def test_workers_are_used_only_with_cores_to_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_parallel, "usable_cores", lambda: 4)
    monkeypatch.setattr(log_parallel, "_runnable_elsewhere", lambda: 1)
    assert log_parallel.free_workers() == 2
    monkeypatch.setattr(log_parallel, "_runnable_elsewhere", lambda: 2)
    assert log_parallel.free_workers() == 0
    monkeypatch.setattr(log_parallel, "_runnable_elsewhere", lambda: None)
    assert log_parallel.free_workers() == 2
    monkeypatch.setattr(log_parallel, "usable_cores", lambda: 2)  # measured slower than reading inline, even idle
    monkeypatch.setattr(log_parallel, "_runnable_elsewhere", lambda: 0)
    assert log_parallel.free_workers() == 0


def test_the_machine_says_how_busy_it_is() -> None:
    others = log_parallel._runnable_elsewhere()
    if sys.platform.startswith("linux"):
        assert others is not None
        assert others >= 0


def _counting_index(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch the newline count to record the offset of each run it counts."""
    counted: list[int] = []
    real = log_runs.newlines_and_long_lines

    def counting(run: Run, scratch: object) -> tuple[int, list[tuple[int, int]]]:
        counted.append(run.offset)
        return real(run, scratch)

    monkeypatch.setattr(log_search, "newlines_and_long_lines", counting)
    return counted


@pytest.mark.parametrize("workers", [0, 2], ids=["by the scan", "by two workers"])
def test_a_log_searched_again_is_not_counted_again_unless_its_bytes_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Run indexes are remembered by log, place and a hash of the bytes: an unchanged log is not counted again; a
    log rewritten in place (same inode, same size, other lines) or truncated and grown again is, and numbers right."""
    counted = _counting_index(monkeypatch)
    log = tmp_path / "log.txt"
    sizes = SearchSizes(read_bytes=16 * 1024, workers=workers)
    lines = [b"%06d INFO filler line" % i for i in range(5_000)]
    log.write_bytes(b"\n".join([*lines, b"needle at the end"]) + b"\n")
    pattern = compile_pattern("needle")

    def numbers() -> list[int]:
        return [line.number for line in search(log, pattern, limit=10, sizes=sizes).matches]

    assert numbers() == [5_001]
    first = len(counted)
    assert first > 5
    assert numbers() == [5_001]
    assert len(counted) == first, "an unchanged log was counted again"
    inode = log.stat().st_ino
    shorter = [b"%06d INFO filler\nline" % i for i in range(5_000)]  # same size, one more line each
    with log.open("r+b") as handle:  # in place: same inode
        handle.write(b"\n".join([*shorter, b"needle at the end"]) + b"\n")
    assert log.stat().st_ino == inode
    assert numbers() == [10_001]
    assert len(counted) > first, "a log rewritten in place was not counted again"
    again = len(counted)
    with log.open("r+b") as handle:  # copytruncate, then the writer goes on
        handle.truncate(0)
        handle.write(b"\n".join([b"x", *lines, b"needle at the end"]) + b"\n")
    assert numbers() == [5_002]
    assert len(counted) > again
