"""The moment a log line's time stands for.

Many logs print the time of day alone (``HH:MM:SS``). The incident's opening says which day: a bare time is read
on the day that puts it within twelve hours of the opening, so a log that runs over midnight keeps its order (23:58
comes before 00:03 when the incident opened at 00:10). A line with its own date is read as written.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

_HALF_DAY = timedelta(hours=12)
_DAY = timedelta(days=1)


def line_moment(day: date | None, hour: int, minute: int, second: int, opened: datetime) -> datetime:
    """``hour:minute:second`` (UTC) on ``day``, or for a bare time of day the one nearest ``opened``.

    Raises ValueError when the parts are not a time (a 25th hour, a 61st minute), as ``datetime`` does."""
    at = datetime.combine(day or opened.astimezone(UTC).date(), time(hour, minute, min(59, second)), UTC)
    if day is not None:
        return at
    if at - opened > _HALF_DAY:
        return at - _DAY
    if opened - at > _HALF_DAY:
        return at + _DAY
    return at
