"""The moment a log line's time stands for.

Many logs print the time of day alone (``HH:MM:SS``). The incident's opening says which day: a bare time is read
on the day that puts it within twelve hours of the opening, so a log that runs over midnight keeps its order (23:58
comes before 00:03 when the incident opened at 00:10; a time twelve hours before it is read on the day after). A
line with its own date is read as written.

A time may end in a zone: ``Z`` or none is UTC, and an offset (``+02:00``, ``-0530``) is taken off, so a log written
in local time lines up with the incident (an offset past 23:59 is no offset, and such a line has no time).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

_HALF_DAY = timedelta(hours=12)
_DAY = timedelta(days=1)
MINUTES_A_DAY = 24 * 60
# How line times are read, kept with every summary of a pass over a log (the timeline's, the evidence's): one
# written by a desk that read them another way (before 2: a zone's offset was ignored) is not resumed.
READING = 2
NO_TIME = b"99:99"  # a minute no line can be at: the key of a line whose time cannot be read in UTC


def zone_minutes(zone: bytes) -> int | None:
    """The offset from UTC of a time's zone in minutes (``+02:00`` is 120): 0 for none or ``Z``; None when it is
    not an offset (hours past 23 or minutes past 59)."""
    if zone in (b"", b"Z"):
        return 0
    digits = zone[1:].replace(b":", b"")
    hours, minutes = int(digits[:2]), int(digits[2:4])
    if hours > 23 or minutes > 59:
        return None
    return (hours * 60 + minutes) * (-1 if zone[:1] == b"-" else 1)


def utc_minute(day: bytes, hour_minute: bytes, zone: bytes) -> tuple[bytes, bytes]:
    """A line's ``YYYY-MM-DD`` (or empty, a bare time) and ``HH:MM`` as written in ``zone``, as they read in UTC.

    A bare time stays bare (wrapped within its day): ``line_moment`` then places it nearest the opening. Parts that
    are not a time are kept as they are, and fail where they are read; an offset that is not one gives
    ``NO_TIME``."""
    offset = zone_minutes(zone)
    if offset is None:
        return day, NO_TIME
    if not offset:
        return day, hour_minute
    hour, minute = int(hour_minute[:2]), int(hour_minute[3:5])
    if hour > 23 or minute > 59:
        return day, hour_minute
    days, minutes = divmod(hour * 60 + minute - offset, MINUTES_A_DAY)
    shifted = b"%02d:%02d" % divmod(minutes, 60)
    if not day or not days:
        return day, shifted
    try:
        return (date.fromisoformat(day.decode()) + timedelta(days=days)).isoformat().encode(), shifted
    except (ValueError, OverflowError):
        return day, NO_TIME


def line_moment(
    day: date | None, hour: int, minute: int, second: int, opened: datetime, offset_minutes: int = 0
) -> datetime:
    """``hour:minute:second`` on ``day`` in UTC, or for a bare time of day the one nearest ``opened``; written
    ``offset_minutes`` ahead of UTC (``zone_minutes``).

    Raises ValueError when the parts are not a time (a 25th hour, a 61st minute), as ``datetime`` does."""
    written = datetime.combine(day or opened.astimezone(UTC).date(), time(hour, minute, min(59, second)), UTC)
    at = written - timedelta(minutes=offset_minutes)
    if day is not None:
        return at
    # Taking an offset off may put it up to two days from the opening: a day at a time to the nearest, and of two
    # as near (twelve hours either side) the later, whichever day it was read on (the timeline reads the time of day
    # first, the evidence the day first: both place it alike).
    while at - opened > _HALF_DAY:
        at -= _DAY
    while opened - at >= _HALF_DAY:
        at += _DAY
    return at
