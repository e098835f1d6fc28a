"""A real iCalendar on-call feed for the tests: a two-person weekly rotation in Europe/Berlin with both kinds of
exception, as PagerDuty, Opsgenie and Google export them.

From ``anchor`` (a date; shifts hand over at 09:00 Berlin time), week by week: alice, bob, carol (alice's week is
taken out by an EXDATE and carol covers it with a one-off event), dave (bob's week is overridden by a
RECURRENCE-ID event naming dave), then alice, bob, ... again.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

BERLIN = ZoneInfo("Europe/Berlin")
ROTATION = ("alice", "bob", "carol", "dave")

_VTIMEZONE = """BEGIN:VTIMEZONE
TZID:Europe/Berlin
BEGIN:STANDARD
DTSTART:19701025T030000
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
TZNAME:CET
END:STANDARD
BEGIN:DAYLIGHT
DTSTART:19700329T020000
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
TZNAME:CEST
END:DAYLIGHT
END:VTIMEZONE"""


def _local(day: date) -> str:
    return f"{day:%Y%m%d}T090000"


def handover(anchor: date, week: int) -> datetime:
    """When week ``week`` of the rotation begins, in UTC."""
    return datetime.combine(anchor + timedelta(days=7 * week), time(9), BERLIN).astimezone(UTC)


def rotation_calendar(anchor: date) -> str:
    """The feed's text (CRLF line ends, as the standard has them)."""
    week = timedelta(days=7)
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//incident-desk tests//on-call//EN",
        _VTIMEZONE,
        "BEGIN:VEVENT",
        "UID:alice-rotation@tests",
        "SUMMARY:alice",
        f"DTSTART;TZID=Europe/Berlin:{_local(anchor)}",
        f"DTEND;TZID=Europe/Berlin:{_local(anchor + week)}",
        "RRULE:FREQ=WEEKLY;INTERVAL=2",
        f"EXDATE;TZID=Europe/Berlin:{_local(anchor + 2 * week)}",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "UID:bob-rotation@tests",
        "SUMMARY:bob",
        f"DTSTART;TZID=Europe/Berlin:{_local(anchor + week)}",
        f"DTEND;TZID=Europe/Berlin:{_local(anchor + 2 * week)}",
        "RRULE:FREQ=WEEKLY;INTERVAL=2",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "UID:bob-rotation@tests",
        "SUMMARY:dave",
        f"RECURRENCE-ID;TZID=Europe/Berlin:{_local(anchor + 3 * week)}",
        f"DTSTART;TZID=Europe/Berlin:{_local(anchor + 3 * week)}",
        f"DTEND;TZID=Europe/Berlin:{_local(anchor + 4 * week)}",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "UID:carol-cover@tests",
        "SUMMARY:carol",
        f"DTSTART;TZID=Europe/Berlin:{_local(anchor + 2 * week)}",
        f"DTEND;TZID=Europe/Berlin:{_local(anchor + 3 * week)}",
        "END:VEVENT",
        "END:VCALENDAR",
    ]
    return "\r\n".join("\r\n".join(line.split("\n")) for line in lines) + "\r\n"


def anchor_for(at: datetime) -> date:
    """An anchor that puts ``at`` in carol's week (the EXDATE's cover), with dave (the override) next."""
    return at.astimezone(BERLIN).date() - timedelta(days=15)


def write_calendar(path: Path, anchor: date) -> Path:
    path.write_bytes(rotation_calendar(anchor).encode("utf-8"))
    return path
