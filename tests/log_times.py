"""The tests' own reading of a log line's minute in UTC, written apart from ``core.log_clock`` to check it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta


def utc_minute_start(day: str, hour_minute: str, zone: str, bare_day: date, anchor: datetime) -> datetime | None:
    """The minute a line written at ``day`` (empty: a bare time) ``hour_minute`` in ``zone`` starts in UTC: its
    offset taken off (hours past 23 or minutes past 59: no time); a bare time read on ``bare_day``, then moved a
    day at a time until it lies within half a day of ``anchor`` (half a day before it: the day after). None when
    the parts are not a time."""
    sign = -1 if zone[:1] == "-" else 1
    digits = zone[1:].replace(":", "") if zone[:1] in "+-" and zone else "0000"
    if int(digits[:2]) > 23 or int(digits[2:]) > 59:
        return None
    try:
        on = date.fromisoformat(day) if day else bare_day
        written = datetime(on.year, on.month, on.day, int(hour_minute[:2]), int(hour_minute[3:]), tzinfo=UTC)
        start = written - sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    except (ValueError, OverflowError):
        return None
    while not day and (start - anchor > timedelta(hours=12) or anchor - start >= timedelta(hours=12)):
        start += timedelta(days=1 if anchor > start else -1)
    return start
