"""The timeline's counts against a line-by-line reference, and its per-log summary: a log that has only grown is
read only where it grew; a rewritten, truncated or rotated log is counted afresh; the summaries stay few."""

from __future__ import annotations

import base64
import io
import json
import random
import re
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from incident_desk.core import log_clock
from incident_desk.core.timeline import cache as timeline_cache
from incident_desk.core.timeline import levels as timeline
from incident_desk.core.timeline.cache import TimelineCache
from tests.log_times import utc_minute_start

DAY = date(2026, 11, 29)
NOON = datetime(2026, 11, 29, 12, tzinfo=UTC)  # the opening: every bare time of DAY lies within 12 h of it
_LINE = re.compile(
    r"(?:(\d{4}-\d\d-\d\d)[T ])?(\d\d:\d\d):\d\d(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?[ \t]+(?:\S+[ \t]+)?"
    r"\[?(ERROR|FATAL|CRITICAL|WARNING|WARN|INFO|DEBUG|TRACE)\b"
)
_LEVEL = {"FATAL": "error", "CRITICAL": "error", "WARNING": "warn", "TRACE": "debug"}


def _reference(data: bytes) -> tuple[dict[datetime, Counter[str]], int]:
    """Counts per minute and level, and the unparsed lines, one line at a time with Python's ``re``."""
    counts: dict[datetime, Counter[str]] = {}
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    unparsed = 0
    for raw in lines:
        hit = _LINE.match(raw.decode("utf-8", errors="replace"))
        if hit is None:
            unparsed += 1
            continue
        start = utc_minute_start(hit[1] or "", hit[2], hit[3] or "", DAY, NOON)
        if start is None:
            unparsed += 1
            continue
        counts.setdefault(start, Counter())[_LEVEL.get(hit[4], hit[4].lower())] += 1
    return counts, unparsed


def _as_counts(scan: timeline.LevelScan) -> dict[datetime, Counter[str]]:
    return {
        m.start: +Counter({"error": m.error, "warn": m.warn, "info": m.info, "debug": m.debug}) for m in scan.minutes
    }


def _log(seed: int, lines: int, first_minute: int = 0) -> bytes:
    """Mixed levels and formats, minutes that are skipped, lines without a time, a few long lines."""
    rng = random.Random(seed)
    out = []
    minute = first_minute
    for i in range(lines):
        minute += rng.choice([0] * 600 + [1, 3, 17])  # now and then a quiet stretch of minutes
        stamp = f"{10 + minute // 60 % 14:02d}:{minute % 60:02d}:{rng.randrange(60):02d}"
        level = rng.choice(["INFO", "WARN", "WARNING", "ERROR", "FATAL", "DEBUG", "TRACE", "CRITICAL", "NOTICE"])
        shape = rng.randrange(9)
        if shape == 0:
            out.append(f"2026-11-{28 + i % 2}T{stamp}.{i % 1000:03d}Z api {level} request {i}")
        elif shape == 1:
            out.append(f"{stamp},{i % 1000:03d}+01:00 [{level}] bracketed {i}")
        elif shape == 2:
            out.append(f"    at frame {i} (no time)")
        elif shape == 3:
            out.append(f"{stamp}\t{level}\tno source word")
        elif shape == 4:
            out.append(f"{stamp} svc {level}x not a level word")
        elif shape == 5:
            out.append(f"{stamp} svc {level} " + "x" * rng.choice([10, 3000]))
        else:
            out.append(f"{stamp} payments-api {level} message {i} token=sk-{i}")
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("chunk", [1024 * 1024, 4096, 97])
def test_counts_equal_a_line_by_line_reference(chunk: int) -> None:
    data = _log(1, 4_000)
    expected, unparsed = _reference(data)
    scan = timeline.scan_levels(
        io.BytesIO(data), anchor=NOON, chunk_bytes=chunk, max_carry_bytes=max(4 * chunk, 16 * 1024), pause_seconds=0
    )
    assert scan.stopped == "end of log"
    assert _as_counts(scan) == expected
    assert scan.unparsed_lines == unparsed
    assert scan.scanned_lines == data.count(b"\n")


class _CountingFile:
    """A log file opened for reading, counting the bytes read from it."""

    def __init__(self, path: Path) -> None:
        self.handle = path.open("rb")
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.read_bytes += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        count = self.handle.readinto(buffer)
        self.read_bytes += count
        return count

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)

    def close(self) -> None:
        self.handle.close()


def _scan(cache: TimelineCache, path: Path) -> tuple[timeline.LevelScan, int]:
    counting = _CountingFile(path)
    try:
        scan = cache.scan(counting, anchor=NOON, redactor=lambda text: text.replace("sk-", "***"))  # type: ignore[arg-type]
    finally:
        counting.close()
    return scan, counting.read_bytes


def _fresh(path: Path) -> timeline.LevelScan:
    with path.open("rb") as handle:
        return timeline.scan_levels(handle, anchor=NOON, redactor=lambda text: text.replace("sk-", "***"))


def _same(a: timeline.LevelScan, b: timeline.LevelScan) -> None:
    assert (a.minutes, a.first_error, a.unparsed_lines, a.scanned_lines, a.scanned_bytes, a.stopped) == (
        b.minutes,
        b.first_error,
        b.unparsed_lines,
        b.scanned_lines,
        b.scanned_bytes,
        b.stopped,
    )


# Read besides the new bytes: the digests of the bytes before where a pass resumes and before where it stops
# (256 each), and up to 4 KiB of the first error's line, read again to show it redacted as the desk redacts now.
_CHECKS = 2 * 256 + 4096


def test_an_appended_log_is_read_only_where_it_grew(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    first = _log(2, 20_000)
    log.write_bytes(first)
    cache = TimelineCache(tmp_path / "summaries")
    scan, read = _scan(cache, log)
    assert read >= len(first)
    _same(scan, _fresh(log))
    assert scan.stopped == "end of log" and scan.first_error is not None

    appended = _log(3, 500, first_minute=900)
    with log.open("ab") as handle:
        handle.write(appended)
    again, read = _scan(cache, log)
    assert len(appended) <= read <= len(appended) + _CHECKS
    _same(again, _fresh(log))
    assert again.scanned_lines == scan.scanned_lines + appended.count(b"\n")

    unchanged, read = _scan(cache, log)
    assert read <= _CHECKS
    _same(unchanged, again)


def test_an_unterminated_last_line_is_counted_again_once_it_is_finished(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"10:00:00 a INFO one\n10:00:01 a WARN half")
    cache = TimelineCache(tmp_path / "summaries")
    _scan(cache, log)
    with log.open("ab") as handle:
        handle.write(b" written\n10:01:00 a ERROR two\n")
    scan, _read = _scan(cache, log)
    _same(scan, _fresh(log))
    assert [(m.warn, m.error) for m in scan.minutes] == [(1, 0), (0, 1)]


@pytest.mark.parametrize("how", ["rewritten", "truncated", "rotated"])
def test_a_log_that_did_not_only_grow_is_counted_afresh(tmp_path: Path, how: str) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(_log(4, 5_000))
    cache = TimelineCache(tmp_path / "summaries")
    _scan(cache, log)
    replacement = _log(5, 6_000, first_minute=300)
    if how == "rewritten":  # same file, same or larger size, other bytes
        with log.open("r+b") as handle:
            handle.write(replacement)
    elif how == "truncated":
        with log.open("r+b") as handle:
            handle.truncate(0)
            handle.write(replacement[:1000])
    else:  # logrotate: the old file moves aside, a new one takes its name
        log.replace(tmp_path / "log.txt.1")
        log.write_bytes(replacement)
    scan, _read = _scan(cache, log)
    _same(scan, _fresh(log))
    if how == "rotated":
        rotated, read = _scan(cache, tmp_path / "log.txt.1")
        _same(rotated, _fresh(tmp_path / "log.txt.1"))
        assert read <= _CHECKS  # the rotated file kept its identity and its summary


def test_summaries_are_few_and_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeline_cache, "MAX_ENTRIES", 3)
    cache = TimelineCache(tmp_path / "summaries")
    for index in range(6):
        log = tmp_path / f"log{index}.txt"
        log.write_bytes(_log(index, 200))
        _scan(cache, log)
    entries = list((tmp_path / "summaries").iterdir())
    assert len(entries) == 3
    assert all(entry.stat().st_size < 64 * 1024 for entry in entries)
    assert all(b"sk-" not in entry.read_bytes() for entry in entries)  # counts and places, never log text


def test_a_damaged_summary_is_ignored(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(_log(6, 300))
    cache = TimelineCache(tmp_path / "summaries")
    _scan(cache, log)
    for entry in (tmp_path / "summaries").iterdir():
        entry.write_text('{"offset": "nonsense"')
    scan, _read = _scan(cache, log)
    _same(scan, _fresh(log))


def test_a_summary_written_by_a_desk_that_read_times_another_way_is_not_resumed(tmp_path: Path) -> None:
    """Before zone offsets were taken off, a summary held minutes read as UTC: an upgraded desk counts afresh
    rather than add its minutes to those."""
    log = tmp_path / "log.txt"
    log.write_bytes(b"2026-11-29T12:05:00+02:00 api INFO served\n" * 50)
    cache = TimelineCache(tmp_path / "summaries")
    _scan(cache, log)
    (entry,) = (tmp_path / "summaries").iterdir()
    older = json.loads(entry.read_text())
    assert older.pop("reading") == log_clock.READING
    as_utc = [base64.b64encode(part).decode() for part in (b"2026-11-29", b"12:05", b"INFO")]
    older["counts"] = [[*as_utc, 50]]  # the minute as the old reading kept it
    entry.write_text(json.dumps(older))
    scan, read = _scan(cache, log)
    assert read >= log.stat().st_size, "the old summary was resumed"
    assert [(m.start, m.info) for m in scan.minutes] == [(datetime(2026, 11, 29, 10, 5, tzinfo=UTC), 50)]
