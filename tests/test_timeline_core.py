"""The timeline's domain computation, tested directly: counts per minute and level, first error, budgets."""

from __future__ import annotations

import io
import threading
from datetime import UTC, date, datetime, timedelta

from incident_desk.core.journal.audit import Decision
from incident_desk.core.outcomes import Outcome
from incident_desk.core.timeline import levels as timeline

DAY = date(2026, 11, 29)
NOON = datetime(2026, 11, 29, 12, tzinfo=UTC)  # the opening: every bare time of DAY lies within 12 h of it
LOG = (
    b"10:58:01 payments-api INFO ledger query started\n"
    b"10:58:09 payments-api WARN connection pool at 48/50\n"
    b"10:58:12 payments-api ERROR connection pool exhausted token=sk-abc\n"
    b"10:59:15 payments-api INFO ledger query finished\n"
    b"garbage without a time\n"
    b"2026-11-29T11:01:40Z payments-api ERROR 212 requests rejected\n"
    b"11:01:41 [DEBUG] pool stats\n"
)


def _at(hour: int, minute: int) -> datetime:
    return datetime(2026, 11, 29, hour, minute, tzinfo=UTC)


def test_counts_each_minute_by_level_and_finds_the_first_error() -> None:
    scan = timeline.scan_levels(io.BytesIO(LOG), anchor=NOON, redactor=lambda text: text.replace("sk-abc", "***"))
    assert [(m.start, m.error, m.warn, m.info, m.debug) for m in scan.minutes] == [
        (_at(10, 58), 1, 1, 1, 0),
        (_at(10, 59), 0, 0, 1, 0),
        (_at(11, 1), 1, 0, 0, 1),
    ]
    assert scan.first_error == timeline.FirstError(
        line=3,
        time=_at(10, 58).replace(second=12),
        text="10:58:12 payments-api ERROR connection pool exhausted token=***",
    )
    assert (scan.scanned_lines, scan.unparsed_lines) == (7, 1)
    assert scan.scanned_bytes == scan.total_bytes == len(LOG)
    assert scan.stopped == "end of log"


def test_a_log_without_errors_or_a_trailing_newline() -> None:
    scan = timeline.scan_levels(io.BytesIO(b"10:00:00 a INFO x\n10:00:30 a INFO y"), anchor=NOON)
    assert [(m.start, m.info) for m in scan.minutes] == [(_at(10, 0), 2)]
    assert scan.first_error is None
    assert scan.scanned_lines == 2


def test_first_error_line_number_counts_lines_of_earlier_chunks() -> None:
    filler = b"10:00:00 a INFO " + b"x" * 100 + b"\n"
    lines = (2 * timeline.CHUNK_BYTES) // len(filler)
    data = filler * lines + b"10:05:00 a ERROR late\n"
    scan = timeline.scan_levels(io.BytesIO(data), anchor=NOON)
    assert scan.first_error is not None
    assert scan.first_error.line == lines + 1
    assert scan.minutes[-1].error == 1 and scan.minutes[0].info == lines


def test_a_line_longer_than_the_carry_is_skipped_whole_not_parsed_from_its_middle() -> None:
    head = b"10:00:00 a INFO "
    # The text at the next read's start looks like a line of its own, but it is the middle of the long line.
    long_line = head + b"y" * (timeline.MAX_CARRY_BYTES - len(head)) + b"10:00:00 a ERROR fake" + b"y" * 100
    data = long_line + b"\n10:00:00 a WARN x\n"
    scan = timeline.scan_levels(io.BytesIO(data), anchor=NOON)
    assert scan.scanned_lines == 2 and scan.unparsed_lines == 1
    assert [(m.error, m.warn, m.info) for m in scan.minutes] == [(0, 1, 0)]
    assert scan.first_error is None
    assert scan.scanned_bytes == len(data)


def test_stops_at_the_time_budget_after_its_first_chunk_and_says_how_far_it_read() -> None:
    """A budget spent before the first chunk (the first pass of a loaded desk loads numpy, its patterns and a
    thread) still counts that chunk: an answer of nothing would be the same when asked again."""
    data = b"10:00:00 a INFO x\n" * 200_000
    scan = timeline.scan_levels(io.BytesIO(data), anchor=NOON, time_budget=0.0)
    assert scan.stopped == "time budget"
    line = len(b"10:00:00 a INFO x\n")
    assert scan.scanned_bytes == timeline.CHUNK_BYTES // line * line, "the chunk's whole lines"
    assert [(m.info, m.error) for m in scan.minutes] == [(scan.scanned_lines, 0)]
    resumed = timeline.scan_levels(io.BytesIO(data), anchor=NOON, time_budget=0.0, resume=scan.resume)
    assert resumed.scanned_bytes == len(data), "asked again, it moves on: the rest is one more chunk"


def test_stops_at_the_minute_limit_before_holding_more_minutes() -> None:
    data = b"".join(f"{h:02d}:{m:02d}:00 a INFO x\n".encode() for h in range(3) for m in range(60))
    scan = timeline.scan_levels(io.BytesIO(data), anchor=NOON, max_minutes=10)
    assert scan.stopped == "minute limit"
    assert len(scan.minutes) <= 10


def test_cancelled_before_reading() -> None:
    flag = threading.Event()
    flag.set()
    scan = timeline.scan_levels(io.BytesIO(LOG), anchor=NOON, cancelled=flag)
    assert scan.stopped == "cancelled" and scan.scanned_bytes == 0


def test_service_decisions_oldest_first_for_that_service_only() -> None:
    t0 = _at(11, 0)
    decisions = [
        Decision("payments-api", Outcome.DECLINED, None, "ana", "2026-07-28", time=t0 + timedelta(minutes=5)),
        Decision("search-api", Outcome.SIMULATED, "CHG-2", "bo", "2026-07-28", time=t0),
        Decision("payments-api", Outcome.SIMULATED, "CHG-1", "ana", "2026-07-28", time=t0),
    ]
    picked = timeline.service_decisions(decisions, "payments-api")
    assert [d.outcome for d in picked] == ["simulated", "declined"]


def test_filled_series_keeps_quiet_minutes_as_zero_rows() -> None:
    minutes = [timeline.Minute(_at(10, 0), 1, 0, 0, 0), timeline.Minute(_at(10, 3), 0, 0, 2, 0)]
    filled = timeline.filled_series(minutes)
    assert [m.start for m in filled] == [_at(10, m) for m in range(4)]
    assert [m.total for m in filled] == [1, 0, 0, 2]


def test_sparkline_scales_to_the_largest_value() -> None:
    assert timeline.sparkline([0, 1, 4, 8]) == "▁▂▅█"  # rounded up, so any nonzero minute shows above the lowest block
    assert timeline.sparkline([0, 0]) == "▁▁"
    assert timeline.sparkline([]) == ""
    assert timeline.sparkline([1, 1, 0, 0, 4, 4], width=3) == "▃▁█"  # summed in groups past the width


def test_the_minute_limit_counts_minutes_seen_again_once() -> None:
    """Minutes repeated chunk after chunk (on two days) are one minute each for the limit; one more stops it."""
    lines = [f"2026-11-{28 + i % 2}T10:0{i % 5}:00Z a INFO x\n" for i in range(300)]
    data = "".join(lines).encode()
    scan = timeline.scan_levels(io.BytesIO(data), anchor=NOON, max_minutes=10, chunk_bytes=64)
    assert scan.stopped == "end of log"
    assert len(scan.minutes) == 10 and {m.info for m in scan.minutes} == {30}
    more = data + b"2026-11-29T10:09:00Z a INFO x\n" + data
    scan = timeline.scan_levels(io.BytesIO(more), anchor=NOON, max_minutes=10, chunk_bytes=64)
    assert scan.stopped == "minute limit"
    assert len(scan.minutes) == 10 and len(data) - 64 <= scan.scanned_bytes <= len(data)
