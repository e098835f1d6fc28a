"""Logs that print the time of day alone, read around the incident's opening: a log that runs over midnight keeps
its order in the timeline and in the evidence's baseline split, on either side of midnight. Logs written in local
time with an offset are read in UTC, as the opening is."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, timedelta

import pytest

from incident_desk.core.evidence.drain import templates
from incident_desk.core.evidence.scan import scan_templates
from incident_desk.core.evidence.tally import Boundary, line_time
from incident_desk.core.log_clock import line_moment
from incident_desk.core.timeline import levels as timeline
from tests.log_times import utc_minute_start

JUST_AFTER_MIDNIGHT = datetime(2026, 12, 4, 0, 10, tzinfo=UTC)
JUST_BEFORE_MIDNIGHT = datetime(2026, 12, 3, 23, 55, tzinfo=UTC)


@pytest.mark.parametrize(
    ("clock", "opened", "moment"),
    [
        ((23, 58, 0), JUST_AFTER_MIDNIGHT, datetime(2026, 12, 3, 23, 58, tzinfo=UTC)),
        ((0, 3, 0), JUST_AFTER_MIDNIGHT, datetime(2026, 12, 4, 0, 3, tzinfo=UTC)),
        ((0, 3, 0), JUST_BEFORE_MIDNIGHT, datetime(2026, 12, 4, 0, 3, tzinfo=UTC)),
        ((23, 40, 0), JUST_BEFORE_MIDNIGHT, datetime(2026, 12, 3, 23, 40, tzinfo=UTC)),
        ((12, 10, 0), JUST_AFTER_MIDNIGHT, datetime(2026, 12, 4, 12, 10, tzinfo=UTC)),  # 12 h after: that day
        ((12, 11, 0), JUST_AFTER_MIDNIGHT, datetime(2026, 12, 3, 12, 11, tzinfo=UTC)),  # past 12 h: the day before
        ((10, 0, 60), datetime(2026, 12, 4, 10, tzinfo=UTC), datetime(2026, 12, 4, 10, 0, 59, tzinfo=UTC)),
    ],
)
def test_a_bare_time_is_read_on_the_day_nearest_the_opening(
    clock: tuple[int, int, int], opened: datetime, moment: datetime
) -> None:
    assert line_moment(None, *clock, opened) == moment


def test_a_dated_line_is_read_as_written_and_a_clock_that_is_no_time_is_refused() -> None:
    dated = line_moment(date(2026, 11, 1), 23, 58, 0, JUST_AFTER_MIDNIGHT)
    assert dated == datetime(2026, 11, 1, 23, 58, tzinfo=UTC)
    with pytest.raises(ValueError, match="hour"):
        line_moment(None, 25, 0, 0, JUST_AFTER_MIDNIGHT)
    assert line_time(b"25:61:00 svc ERROR x", JUST_AFTER_MIDNIGHT) is None


def _over_midnight(opened: datetime) -> bytes:
    """A line a minute from 20 minutes before ``opened`` to 10 after; errors from the opening on."""
    lines = []
    for minute in range(-20, 10):
        at = opened + timedelta(minutes=minute)
        lines.append(f"{at:%H:%M:%S} svc INFO tick {minute}")
        if minute >= 0:
            lines.append(f"{at:%H:%M:%S} svc ERROR broke {minute}")
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("opened", [JUST_AFTER_MIDNIGHT, JUST_BEFORE_MIDNIGHT])
def test_the_timeline_of_a_log_over_midnight_keeps_its_order(opened: datetime) -> None:
    scan = timeline.scan_levels(io.BytesIO(_over_midnight(opened)), anchor=opened, processes=0)
    starts = [m.start for m in scan.minutes]
    assert starts == [opened + timedelta(minutes=minute) for minute in range(-20, 10)]
    assert scan.first_error is not None and scan.first_error.time == opened


@pytest.mark.parametrize("opened", [JUST_AFTER_MIDNIGHT, JUST_BEFORE_MIDNIGHT])
def test_the_baseline_of_a_log_over_midnight_is_what_came_before_the_opening(opened: datetime) -> None:
    scan = scan_templates(io.BytesIO(_over_midnight(opened)), Boundary(opened.timestamp(), opened), processes=0)
    assert (scan.tally.lines, scan.tally.baseline_lines) == (40, 20)
    rows = {t.text: (t.baseline, t.recent) for t in templates(scan.tally.table.items())}
    assert rows == {"svc INFO tick <*>": (20, 10), "svc ERROR broke <*>": (0, 10)}


def _in_local_time(opened: datetime, zone: str, offset: timedelta, *, dated: bool) -> bytes:
    """``_over_midnight`` written by a host ``offset`` ahead of UTC, each time ending in ``zone``."""
    shape = "%Y-%m-%dT%H:%M:%S" if dated else "%H:%M:%S"
    lines = []
    for minute in range(-20, 10):
        local = (opened + timedelta(minutes=minute) + offset).strftime(shape) + zone
        lines.append(f"{local} svc INFO tick {minute}")
        if minute >= 0:
            lines.append(f"{local} svc ERROR broke {minute}")
    return ("\n".join(lines) + "\n").encode()


LOCAL_ZONES = [
    ("+05:30", timedelta(hours=5, minutes=30)),
    ("-0800", timedelta(hours=-8)),
    ("+14:00", timedelta(hours=14)),
]


@pytest.mark.parametrize("dated", [True, False], ids=["dated", "bare"])
@pytest.mark.parametrize(("zone", "offset"), LOCAL_ZONES, ids=[zone for zone, _ in LOCAL_ZONES])
@pytest.mark.parametrize("opened", [JUST_AFTER_MIDNIGHT, JUST_BEFORE_MIDNIGHT])
def test_a_log_in_local_time_is_read_in_utc(opened: datetime, zone: str, offset: timedelta, dated: bool) -> None:
    """The offset is taken off, so the minutes, the first error and the baseline split line up with the opening
    (a UTC time) as they do for a log written in UTC; across midnight, and a day apart where the zone is +14:00."""
    data = _in_local_time(opened, zone, offset, dated=dated)
    scan = timeline.scan_levels(io.BytesIO(data), anchor=opened, processes=0)
    assert [m.start for m in scan.minutes] == [opened + timedelta(minutes=minute) for minute in range(-20, 10)]
    assert scan.unparsed_lines == 0
    assert scan.first_error is not None and scan.first_error.time == opened
    evidence = scan_templates(io.BytesIO(data), Boundary(opened.timestamp(), opened), processes=0)
    assert (evidence.tally.lines, evidence.tally.baseline_lines) == (40, 20)
    first_line = data.split(b"\n", 1)[0]
    assert line_time(first_line, opened) == (opened - timedelta(minutes=20)).timestamp()


def test_an_offset_that_is_not_one_leaves_the_line_without_a_time() -> None:
    data = b"2026-12-04T00:05:00+24:00 svc INFO x\n2026-12-04T00:06:00+05:60 svc INFO y\n"
    scan = timeline.scan_levels(io.BytesIO(data), anchor=JUST_AFTER_MIDNIGHT, processes=0)
    assert scan.minutes == [] and scan.unparsed_lines == 2
    assert line_time(b"2026-12-04T00:05:00+24:00 svc INFO x", JUST_AFTER_MIDNIGHT) is None


@pytest.mark.parametrize("opened", [JUST_AFTER_MIDNIGHT, JUST_BEFORE_MIDNIGHT, JUST_AFTER_MIDNIGHT.replace(hour=12)])
def test_the_evidence_and_the_timeline_place_a_bare_time_in_any_zone_alike(opened: datetime) -> None:
    """A bare time with an offset may lie up to two days from the opening once the offset is off: both readings
    put it on the day nearest the opening, as the tests' own reading does (every 37th minute, in zones from
    -12:00 to +14:00)."""
    zones = ["+14:00", "+13:00", "+05:45", "-0930", "-12:00", "+00:00"]
    clocks = [divmod(minute, 60) for minute in range(0, 24 * 60, 37)]
    lines = [f"{hour:02d}:{minute:02d}:00{zone} svc INFO x" for zone in zones for hour, minute in clocks]
    data = ("\n".join(lines) + "\n").encode()
    expected = [utc_minute_start("", line[:5], line[8:14].strip(), opened.date(), opened) for line in lines]
    assert [line_time(line.encode(), opened) for line in lines] == [at.timestamp() for at in expected if at]
    scan = timeline.scan_levels(io.BytesIO(data), anchor=opened, processes=0)
    assert sorted(m.start for m in scan.minutes) == sorted({at for at in expected if at})
