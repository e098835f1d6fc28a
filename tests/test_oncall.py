"""Who is on call, read from a real iCalendar feed: a weekly rotation in a zone with daylight saving, an EXDATE
covered by a one-off event and a RECURRENCE-ID override; a feed that is missing, hangs or is garbage is named."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from incident_desk.core.handoff.oncall import CalendarFeed, Calendars, OncallConfig, check_location, describe
from incident_desk.core.handoff.shift import on_call_line
from tests.faulty_neighbour import faulty_neighbour
from tests.oncall_calendar import handover, write_calendar

ANCHOR = date(2026, 10, 5)  # a Monday; the rotation crosses the end of daylight saving (25 October)


@pytest.fixture
def feed(tmp_path: Path) -> CalendarFeed:
    path = write_calendar(tmp_path / "oncall.ics", ANCHOR)
    return CalendarFeed(str(path), OncallConfig(calendar=str(path)))


@pytest.mark.parametrize(
    ("week", "who", "next_who"),
    [
        (0, "alice", "bob"),  # the rotation itself
        (1, "bob", "carol"),
        (2, "carol", "dave"),  # alice's week taken out by EXDATE, carol's one-off event covers it
        (3, "dave", "alice"),  # bob's week overridden by RECURRENCE-ID
        (4, "alice", "bob"),  # the rule again after both exceptions
    ],
)
def test_the_person_on_call_now_and_next_follow_the_rotation_and_its_exceptions(
    feed: CalendarFeed, week: int, who: str, next_who: str
) -> None:
    at = handover(ANCHOR, week) + timedelta(days=2, hours=3)
    found = feed.on_call(at)
    assert (found.who, found.until, found.next_who, found.problem) == (who, handover(ANCHOR, week + 1), next_who, None)


def test_the_handover_is_at_9_berlin_time_on_both_sides_of_daylight_saving(feed: CalendarFeed) -> None:
    # Summer time (UTC+2) before 25 October, standard time (UTC+1) after: the same 09:00 is another UTC hour.
    assert feed.on_call(datetime(2026, 10, 7, tzinfo=UTC)).until == datetime(2026, 10, 12, 7, tzinfo=UTC)
    assert feed.on_call(datetime(2026, 10, 28, tzinfo=UTC)).until == datetime(2026, 11, 2, 8, tzinfo=UTC)


def test_the_on_call_line_reads_as_the_contract_says(feed: CalendarFeed) -> None:
    at = handover(ANCHOR, 2) + timedelta(hours=1)
    assert on_call_line(feed.on_call(at)) == "On call: carol until 2026-10-26T08:00:00Z; next: dave"


def test_a_read_is_cached_for_cache_seconds(tmp_path: Path) -> None:
    path = write_calendar(tmp_path / "oncall.ics", ANCHOR)
    clock = [0.0]
    feed = CalendarFeed(str(path), OncallConfig(calendar=str(path), cache_seconds=60), monotonic=lambda: clock[0])
    at = handover(ANCHOR, 0) + timedelta(hours=1)
    feed.on_call(at)
    feed.on_call(at)
    assert feed.reads == 1
    clock[0] = 61
    feed.on_call(at)
    assert feed.reads == 2


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.ics"
    found = CalendarFeed(str(missing), OncallConfig()).on_call(datetime.now(UTC))
    assert found.who is None
    assert found.problem == f"calendar {missing} cannot be read: No such file or directory"
    assert on_call_line(found) == f"On call: unknown -- calendar {missing} cannot be read: No such file or directory"


def test_garbage_is_named_not_parsed_into_nobody(tmp_path: Path) -> None:
    path = tmp_path / "oncall.ics"
    path.write_text("<html><body>Sign in to see this calendar</body></html>\n", encoding="utf-8")
    found = CalendarFeed(str(path), OncallConfig()).on_call(datetime.now(UTC))
    assert found.who is None and found.problem is not None
    assert found.problem.startswith(f"calendar {path} is not an iCalendar feed")


def test_a_feed_larger_than_the_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "oncall.ics"
    path.write_bytes(b"X" * 4096)
    found = CalendarFeed(str(path), OncallConfig(max_bytes=1024)).on_call(datetime.now(UTC))
    assert found.problem == f"calendar {path} is larger than 1024 bytes"


def test_a_url_that_hangs_is_named_within_its_deadline() -> None:
    with faulty_neighbour("hang") as neighbour:
        url = neighbour.url + "/private-0123456789abcdef/basic.ics"
        feed = CalendarFeed(url, OncallConfig(calendar=url, timeout_seconds=0.5))
        found = feed.on_call(datetime.now(UTC))
    assert found.who is None
    # The host is named; the path, where feed URLs keep their secret, is not.
    assert found.problem == f"calendar {neighbour.url}/… did not answer within 0.5s"
    assert "private" not in on_call_line(found)


def test_a_url_that_drips_is_cut_at_its_deadline() -> None:
    with faulty_neighbour("drip") as neighbour:
        feed = CalendarFeed(neighbour.url + "/x.ics", OncallConfig(timeout_seconds=0.5))
        found = feed.on_call(datetime.now(UTC))
    assert found.problem == f"calendar {neighbour.url}/… did not answer within 0.5s"


def test_a_url_answering_something_else_is_named() -> None:
    with faulty_neighbour("ok") as neighbour:  # a JSON list, not a calendar
        found = CalendarFeed(neighbour.url + "/x.ics", OncallConfig(timeout_seconds=2)).on_call(datetime.now(UTC))
    assert found.problem is not None and found.problem.startswith(f"calendar {neighbour.url}/… is not an iCalendar")


def test_a_failed_read_answers_from_the_last_good_copy_and_says_so(tmp_path: Path) -> None:
    path = write_calendar(tmp_path / "oncall.ics", ANCHOR)
    clock = [0.0]
    feed = CalendarFeed(str(path), OncallConfig(cache_seconds=10), monotonic=lambda: clock[0])
    at = handover(ANCHOR, 1) + timedelta(hours=1)
    assert feed.on_call(at).who == "bob"
    path.write_text("garbage", encoding="utf-8")
    clock[0] = 11
    found = feed.on_call(at)
    assert found.who == "bob" and found.stale_since is not None and found.problem is not None
    assert "(from the copy read at " in on_call_line(found) and "is not an iCalendar feed" in on_call_line(found)


def test_a_service_calendar_overrides_the_desks(tmp_path: Path) -> None:
    desk = write_calendar(tmp_path / "desk.ics", ANCHOR)
    payments = write_calendar(tmp_path / "payments.ics", ANCHOR + timedelta(days=7))
    calendars = Calendars(OncallConfig(calendar=str(desk)), {"payments-api": str(payments)})
    at = handover(ANCHOR, 1) + timedelta(hours=1)
    assert calendars.on_call(at).who == "bob"
    assert calendars.on_call(at, "search-api").who == "bob"
    assert calendars.on_call(at, "payments-api").who == "alice"


def test_no_calendar_is_said() -> None:
    found = Calendars(OncallConfig(), {}).on_call(datetime.now(UTC))
    assert on_call_line(found) == "On call: unknown -- no on-call calendar is configured ([oncall] calendar)"


@pytest.mark.parametrize(
    ("location", "problem"),
    [
        ("http://calendar.example.com/x.ics", "must be https"),
        ("oncall.ics", "is relative"),
        ("ftp://calendar.example.com/x.ics", "must be a file path or an https URL"),
    ],
)
def test_a_calendar_location_the_desk_will_not_read_is_refused(location: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_location(location)


def test_a_url_is_described_by_its_host_only() -> None:
    assert describe("https://pd.example.com/private/s3cret.ics?token=abc") == "https://pd.example.com/…"
