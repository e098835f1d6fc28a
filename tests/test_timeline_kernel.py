"""The timeline's array kernel against a line-by-line reading of the same pattern, on hostile logs: level words
in messages, a level word cut by a chunk or a pass boundary, CRLF, tabs and runs of blanks, long fractions,
zones (their offsets taken off, across midnight and the year's end), long source words, control and non-ASCII
bytes, odd dates and times, out-of-order stretches."""

from __future__ import annotations

import io
import random
import re
from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest

from incident_desk.core import log_clock
from incident_desk.core.timeline import counts as timeline_counts
from incident_desk.core.timeline import kernel as timeline_scan
from incident_desk.core.timeline import levels as timeline
from incident_desk.core.timeline import patterns as timeline_patterns
from tests.log_times import utc_minute_start

DAY = date(2026, 11, 29)
NOON = datetime(2026, 11, 29, 12, tzinfo=UTC)  # the opening: every bare time of DAY lies within 12 h of it
# The desk's pattern as RE2 reads it (bytes, ASCII classes; RE2's \s is [\t\n\f\r ], without \v).
_PREFIX = (
    rb"(?:(\d{4}-\d\d-\d\d)[T ])?(\d\d:\d\d):(\d\d)(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?[ \t]+"
    rb"(?:[^\t\n\f\r ]+[ \t]+)?\[?"
)
_LINE = re.compile(_PREFIX + rb"(ERROR|FATAL|CRITICAL|WARNING|WARN|INFO|DEBUG|TRACE)\b")
_ERROR = re.compile(_PREFIX + rb"(?:ERROR|FATAL|CRITICAL)\b")
_LEVEL = {b"FATAL": "error", b"CRITICAL": "error", b"WARNING": "warn", b"TRACE": "debug"}


def _reference(data: bytes) -> tuple[dict[datetime, Counter[str]], int, int, int | None]:
    """Counts per minute and level, unparsed lines, lines, and the first error's line: one line at a time."""
    counts: dict[datetime, Counter[str]] = {}
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    unparsed = 0
    first_error = None
    for number, raw in enumerate(lines, start=1):
        if first_error is None and _ERROR.match(raw):
            first_error = number
        hit = _LINE.match(raw)
        start = None
        if hit is not None:
            day, hour_minute, zone = ((part or b"").decode() for part in hit.group(1, 2, 4))
            start = utc_minute_start(day, hour_minute, zone, DAY, NOON)
        if start is None:
            unparsed += 1
            continue
        counts.setdefault(start, Counter())[_LEVEL.get(hit[5], hit[5].decode().lower())] += 1  # type: ignore[index]
    return counts, unparsed, len(lines), first_error


def _as_counts(scan: timeline.LevelScan) -> dict[datetime, Counter[str]]:
    return {
        m.start: +Counter({"error": m.error, "warn": m.warn, "info": m.info, "debug": m.debug}) for m in scan.minutes
    }


def _check(
    data: bytes,
    chunk: int = timeline.CHUNK_BYTES,
    max_carry: int = timeline.MAX_CARRY_BYTES,
    *,
    workers: int | None = None,
    lines_per_pass: int = timeline_scan.LINES_PER_PASS,
) -> timeline.LevelScan:
    expected, unparsed, lines, first_error = _reference(data)
    scan = timeline.scan_levels(
        io.BytesIO(data),
        anchor=NOON,
        chunk_bytes=chunk,
        max_carry_bytes=max_carry,
        workers=workers,
        lines_per_pass=lines_per_pass,
    )
    assert scan.stopped == "end of log"
    assert _as_counts(scan) == expected
    assert (scan.unparsed_lines, scan.scanned_lines) == (unparsed, lines)
    assert (scan.first_error.line if scan.first_error else None) == first_error
    return scan


_LEVELS = [b"ERROR", b"FATAL", b"CRITICAL", b"WARNING", b"WARN", b"INFO", b"DEBUG", b"TRACE"]
_NEAR = [b"NOTICE", b"INF", b"ERRO", b"WARNINGS", b"WARN_", b"INFO1", b"info", b"Error", b"DEBUGGING", b"TRACEx"]


# Dates and zones a line may start with: some a day's or a year's end, so that an offset moves the line's day;
# some not a date or not a zone (the pattern does not take them, or takes them as no time).
_DATES = [b"", b"", b"2026-11-29T", b"2026-11-30 ", b"2026-12-31T", b"2027-01-01 ", b"0001-01-01T", b"9999-12-31T"]
_DATES += [b"2026-13-45T", b"2026-11-2T", b"2026/11/29T"]
_ZONES = [b"", b"", b"Z", b"+01:00", b"-0530", b"+14:00", b"-12:00", b"+23:59", b"-00:00", b"+0545"]
_ZONES += [b"+24:00", b"+05:60", b"+01", b"+1:00", b"z", b"Zulu"]


def _piece(rng: random.Random, choices: list[bytes]) -> bytes:
    return rng.choice(choices)


def _hostile_line(rng: random.Random) -> bytes:
    """One line built from parts the pattern reads, each now and then in a shape it does not accept."""
    date_part = _piece(rng, _DATES)
    hour, minute = rng.choice([(10, rng.randrange(60)), (23, 59), (0, 0), (99, 99), (24, 61)])
    clock = b"%02d:%02d:%02d" % (hour, minute, rng.randrange(60))
    if rng.random() < 0.05:
        clock = _piece(rng, [b"1:00:00", b"10:0:00", b"10:00", b"10-00-00", b"10:00:0x"])
    fraction = _piece(rng, [b"", b"", b".123", b",5", b".123456", b".1234567", b".123456789", b".", b".x"])
    zone = _piece(rng, _ZONES)
    blanks = _piece(rng, [b" ", b" ", b"\t", b"  ", b" \t ", b" " * 70, b"", b"\r", b"\x0b"])
    source = _piece(
        rng,
        [b"", b"api", b"payments-api", b"s" * 40, b"s" * 70, b"caf\xc3\xa9", b"a\x0bb", b"a\x01b", b"[x]", b"ERROR"],
    )
    after_source = _piece(rng, [b" ", b"\t", b"   ", b" " * 80, b"\r", b"\x0c"]) if source else b""
    bracket = _piece(rng, [b"", b"", b"[", b"[["])
    level = _piece(rng, _LEVELS * 3 + _NEAR)
    boundary = _piece(rng, [b"", b" ", b"]", b"\r", b":", b"_", b"9", b"\xc3\xa9", b"-", b"\t"])
    message = _piece(
        rng,
        [b"", b" request served", b" ERROR in the message", b" INFO WARN ERROR", b" x" * 3000, b" \x00\xff bytes"],
    )
    line = date_part + clock + fraction + zone + blanks + source + after_source + bracket + level + boundary + message
    if rng.random() < 0.03:
        line = _piece(rng, [b"", b"\r", b"    at frame (no time)", b"ERROR at the start", b"\x00" * 20])
    return line + _piece(rng, [b"\n", b"\n", b"\r\n"])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk", [97, 4096, 1024 * 1024])
def test_hostile_lines_count_as_a_line_by_line_reading(seed: int, chunk: int) -> None:
    rng = random.Random(seed)
    data = b"".join(_hostile_line(rng) for _ in range(3000))
    _check(data, chunk, max(4 * chunk, 64 * 1024), lines_per_pass=37)  # many passes per chunk: their boundaries too


@pytest.mark.parametrize("workers", [1, 2])
def test_one_or_two_workers_count_the_same(workers: int) -> None:
    rng = random.Random(99)
    _check(b"".join(_hostile_line(rng) for _ in range(5000)), 4096, 64 * 1024, workers=workers)


def test_a_level_word_cut_by_every_chunk_boundary() -> None:
    line = b"2026-11-29T10:00:00.123Z payments-api ERROR boom\r\n"
    data = b"10:01:00 a INFO x\n" + line * 5 + b"10:02:00 svc WARNING w"  # the last line without a newline
    for chunk in range(1, len(line) + 2):
        scan = _check(data, chunk, 4096)
        assert [(m.error, m.warn, m.info) for m in scan.minutes] == [(5, 0, 0), (0, 0, 1), (0, 1, 0)]


def test_level_words_in_the_message_are_not_counted() -> None:
    data = (
        b"10:00:00 svc request failed ERROR ERROR\n"  # the level place holds "request": no level
        b"10:00:01 svc INFOS retry ERROR\n"
        b"10:00:02 ERROR INFO both places\n"  # counted as INFO (after a source word), yet the first error line
        b"10:00:03 svc [WARN] ok\n"
        b"10:00:04 svc WARN_ERROR x\n"
    )
    scan = _check(data)
    assert [(m.error, m.warn, m.info) for m in scan.minutes] == [(0, 1, 1)]
    assert scan.first_error is not None and scan.first_error.line == 3


def test_out_of_order_stretches_and_skipped_minutes() -> None:
    rng = random.Random(5)
    minutes = [m for m in range(0, 600, 7)]
    rng.shuffle(minutes)
    data = b"".join(
        b"2026-11-%02dT%02d:%02d:%02d.000Z svc %s x\n"
        % (28 + m // 300, 10 + m % 300 // 60, m % 60, s, rng.choice(_LEVELS))
        for m in minutes
        for s in range(3)
    )
    _check(data)


def test_very_long_lines_and_crlf_only_lines() -> None:
    data = (
        b"10:00:00 " + b"s" * 5000 + b" ERROR long source\r\n"
        b"10:00:01" + b" " * 5000 + b"INFO after long blanks\r\n"
        b"10:00:02.1234567890123456789 svc DEBUG long fraction\r\n"
        b"\r\n\r\n"
        b"10:00:03 svc TRACE " + b"y" * 200_000 + b"\r\n"
    )
    _check(data)


class _NoRE2:
    def finditer(self, data: bytes) -> list[object]:
        raise AssertionError(f"RE2 was asked to read {data[:40]!r}: the arrays should decide this line")


def test_common_shapes_are_decided_by_the_arrays_not_line_by_line() -> None:
    lines = [
        b"2026-11-29T10:01:07.001Z payments-api INFO slow query took 667ms",
        b"2026-11-29 10:01:07,001 [ERROR] no source",
        b"2026-11-29T10:01:07.123456+01:00\tworker-3\tWARNING tabbed",
        b"10:01:07 api          DEBUG padded source",
        b"10:01:07.5-0530 api TRACE",
        b"    at frame (no time)",
        b"",
        b"10:01:07 api NOTICE not a level",
    ]
    data = b"\n".join(lines * 50) + b"\n"
    frame = timeline_scan.Frame(len(data))
    frame.buffer[1 : 1 + len(data)] = data
    frame.end_data(1 + len(data))
    found = timeline_scan.levels_in(frame, 1 + len(data), _NoRE2(), want_errors=True)  # type: ignore[arg-type]
    assert found.lines == 400 and found.parsed == 250
    assert sum(found.counts.values()) == 250
    assert found.error_lines.tolist()[0] == 1  # the first line that may be an error: checked by RE2 later


def _line_in_layout(rng: random.Random, stamp: bytes) -> bytes:
    """A line in one time layout (its digits varied, now and then a byte out of class), then hostile parts: the
    common case's shortcut must still read it as RE2 does."""
    clock = 11 if stamp[4:5] == b"-" else 0  # HH:MM:SS starts here; its minute's last digit and what follows vary
    stamp = bytes(
        rng.choice(b"0123456789") if 0x30 <= byte <= 0x39 and (at == clock + 4 or at >= clock + 6) else byte
        for at, byte in enumerate(stamp)
    )
    if rng.random() < 0.05:
        at = rng.randrange(len(stamp))
        stamp = stamp[:at] + _piece(rng, [b"x", b" ", b"\n", b":", b"\xff"]) + stamp[at + 1 :]
    blank = _piece(rng, [b" "] * 8 + [b"\t", b"  ", b"", b"\r"])
    sources = [b"api", b"payments-api", b"s" * 14, b"s" * 15, b"s" * 16, b"s" * 17, b"", b"a\x0bb", b"ERROR"]
    source = _piece(rng, sources)
    after_source = _piece(rng, [b" "] * 8 + [b"\t", b"  ", b"\r", b""])
    bracket = _piece(rng, [b""] * 8 + [b"["])
    level = _piece(rng, _LEVELS * 3 + _NEAR)
    boundary = _piece(rng, [b" x", b"", b"]", b":", b"_", b"9", b"\xc3\xa9", b"\t"])
    return stamp + blank + source + after_source + bracket + level + boundary + b"\n"


@pytest.mark.parametrize(
    "stamp",
    [
        b"2026-11-29T10:01:07.001Z",
        b"2026-11-29 10:01:07,001",
        b"2026-11-29T10:01:07Z",
        b"2026-11-29T10:01:07.123456+01:00",
        b"10:01:07",
        b"10:01:07.5",
    ],
)
def test_lines_in_one_layout_count_as_a_line_by_line_reading(stamp: bytes) -> None:
    rng = random.Random(stamp)
    _check(b"".join(_line_in_layout(rng, stamp) for _ in range(4000)), 64 * 1024)


def test_the_common_layout_is_read_by_the_arrays_up_to_its_window() -> None:
    """Source words up to 15 bytes after a 24-byte time are read by the shortcut, so by no RE2 call at all."""
    lines = [b"2026-11-29T10:01:07.001Z %s INFO x" % (b"s" * n) for n in range(1, 16)]
    data = b"\n".join(lines * 20) + b"\n"
    frame = timeline_scan.Frame(len(data))
    frame.buffer[1 : 1 + len(data)] = data
    frame.end_data(1 + len(data))
    found = timeline_scan.levels_in(frame, 1 + len(data), _NoRE2(), want_errors=False)  # type: ignore[arg-type]
    assert found.parsed == 300 and sum(found.counts.values()) + sum(int(t[2].sum()) for t in found.tallies) == 300


def test_short_and_empty_lines_several_to_a_word() -> None:
    """Line starts are found eight bytes at a time; a word holding several newlines gives each of them."""
    rng = random.Random(11)
    pieces = [b"", b"\r", b"x", b"10:00", b"10:00:01 a INFO", b"10:00:02 ERROR", b"\n\n", b"ab\ncd"]
    data = b"".join(_piece(rng, pieces) + b"\n" for _ in range(5000))
    _check(data, 4096, 64 * 1024)
    _check(data)


@pytest.mark.parametrize("slice_bytes", [1, 61, 4096])
def test_a_chunk_read_in_slices_counts_as_one_piece(slice_bytes: int) -> None:
    """Line starts are found a slice of the chunk at a time; slices cut anywhere give the same counts and line
    numbers as one slice, and first-error candidates that hold every error line."""
    rng = random.Random(slice_bytes)
    data = b"".join(_hostile_line(rng) for _ in range(2000)) + b"10:00:00 svc INFO no newline at the end"
    frame = timeline_scan.Frame(len(data))
    frame.buffer[1 : 1 + len(data)] = data
    frame.end_data(1 + len(data))
    pattern = timeline_patterns.patterns()[0]
    results = []
    for size in (slice_bytes, 1 << 30):
        found = timeline_scan.levels_in(frame, 1 + len(data), pattern, want_errors=True, slice_bytes=size)
        counts = timeline_counts.MinuteCounts({})
        counts.add(found)
        results.append((counts.as_dict(), found.parsed, found.lines))
        errors = [index for index, raw in enumerate(data.split(b"\n")) if _ERROR.match(raw)]
        assert set(errors) <= set(found.error_lines.tolist())  # the candidates hold every error line
    assert results[0] == results[1]
    assert results[0][2] == data.count(b"\n") + 1


@pytest.mark.parametrize("zone", [b"+05:30", b"-0800", b"+14:00", b"Z"])
def test_a_log_in_one_zone_over_days_and_a_years_end_counts_as_a_line_by_line_reading(zone: bytes) -> None:
    """One host's log in its own zone (the one-offset table), a line a minute for 23 hours from 2026-12-31 05:00
    (within the timeline's day of minutes): passes move lines to the next or the last day, and to another year."""
    start = datetime(2026, 12, 31, 5, tzinfo=UTC)
    levels = [b"INFO", b"WARN", b"ERROR", b"DEBUG"]
    data = b"".join(
        (start + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%S").encode()
        + b".123"
        + zone
        + b" api "
        + levels[minute % 4]
        + b" served\n"
        for minute in range(23 * 60)
    )
    scan = _check(data, 64 * 1024, lines_per_pass=512)
    assert len(scan.minutes) == 23 * 60


@pytest.mark.parametrize("lines_per_pass", [8, timeline_scan.LINES_PER_PASS], ids=["passes of 8 lines", "one pass"])
def test_the_arrays_key_each_zoned_line_as_one_line_read_alone_keys_it(lines_per_pass: int) -> None:
    """Keys, not only minutes: the arrays and ``log_clock.utc_minute`` (RE2's path) give each line the same (day,
    minute) key, days that are not one and offsets that are none included, so both count toward the minute limit
    alike; and each key is the minute the tests' own reading gives. Passes of 8 lines put some in one zone (the
    table) and some in several (line by line); the first line's layout takes some and not others."""
    days = [b"2026-12-31", b"2027-01-01", b"2026-13-45", b"9999-12-31", b"0001-01-01", b""]
    clocks = [b"23:30", b"00:15", b"12:00", b"99:99"]
    zones = [b"+05:30", b"-0800", b"+14:00", b"-12:00", b"+23:59", b"-23:59", b"+24:00", b"+05:60", b"Z", b""]
    stamps = [
        (day, clock, zone) for day in days for clock in clocks for zone in zones if day or zone not in (b"Z", b"")
    ]
    lines = [(day + b"T" if day else b"") + clock + b":00" + zone + b" api INFO x\n" for day, clock, zone in stamps]
    data = b"".join(lines)
    frame = timeline_scan.Frame(len(data))
    frame.buffer[1 : 1 + len(data)] = data
    frame.end_data(1 + len(data))
    line_pattern = timeline_patterns.patterns()[0]
    found = timeline_scan.levels_in(
        frame, 1 + len(data), line_pattern, want_errors=False, lines_per_pass=lines_per_pass
    )
    counts = timeline_counts.MinuteCounts({})
    counts.add(found)
    expected: Counter[tuple[bytes, bytes, bytes]] = Counter(
        (*log_clock.utc_minute(day, clock, zone), b"INFO") for day, clock, zone in stamps
    )
    assert counts.as_dict() == dict(expected)
    read = [utc_minute_start(day.decode(), clock.decode(), zone.decode(), DAY, NOON) for day, clock, zone in stamps]
    minutes = Counter(at for at in read if at is not None)
    assert _as_counts(timeline.scan_levels(io.BytesIO(data), anchor=NOON, processes=0)) == {
        at: Counter(info=count) for at, count in minutes.items()
    }
