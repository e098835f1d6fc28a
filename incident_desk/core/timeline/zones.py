"""A line's minute and day moved to UTC by its zone's offset, for the timeline's arrays (``log_clock.utc_minute``
is the same for one line read on its own).

The arrays keep a minute as a code, HH * 100 + MM, and a day as a key of its date's digits. One offset (a log
written by one host in one zone) moves every code the same way: a table per offset, looked up a pass at a time;
a pass of mixed offsets is moved line by line in arrays. A line moved to another day has its day key moved: a
few distinct days a pass, in Python.
"""

from __future__ import annotations

import functools
from datetime import date, timedelta
from typing import Any

from incident_desk.core.log_clock import MINUTES_A_DAY, NO_TIME, zone_minutes

MINUTE_CODES = 10_000  # HH:MM as HH * 100 + MM, two digits each as the pattern reads them
_NO_TIME_CODE = int(NO_TIME[:2] + NO_TIME[3:])  # log_clock.NO_TIME as a minute code
_NOT_AN_OFFSET = MINUTES_A_DAY  # every offset past 23:59, as one


@functools.cache
def day_text(key: int) -> bytes:
    """The ``YYYY-MM-DD`` a day key was made from (0: no date)."""
    if not key:
        return b""
    nibbles = [(key >> (8 * index)) & 0xF for index in range(8)]
    year = "".join(str(n) for n in nibbles[:4])
    return f"{year}-{nibbles[5]}{nibbles[6]}-{nibbles[4]}{nibbles[7]}".encode()


def _day_key(day: date) -> int:
    """The day key of ``day``: ``day_text`` undone."""
    digits = [int(char) for char in f"{day.year:04d}{day.month:02d}{day.day:02d}"]
    year = sum(digit << (8 * index) for index, digit in enumerate(digits[:4]))
    return year | digits[4] << 40 | digits[5] << 48 | digits[6] << 32 | digits[7] << 56 | 1 << 63


def to_utc(np: Any, minute: Any, day: Any, rows: Any | None, zones: Any) -> None:
    """Move the minute codes and day keys of ``rows`` (None: every row) to UTC, in place, from ``zones``: each
    row's eight bytes from its zone's sign (``+HH:MM`` or ``+HHMM``, digits checked). An offset past 23:59 leaves
    its line no time (``NO_TIME``); a line whose time is not one keeps it (it fails where it is read)."""
    first = int(zones[0])
    length = 6 if (first >> 24) & 0xFF == 0x3A else 5
    mask = np.uint64((1 << (8 * length)) - 1)
    if (np.bitwise_and(zones, mask) == np.uint64(first & int(mask))).all():
        # One zone, as one host writes its log: one offset, and the pass's minutes looked up in its table.
        shifted, moved_by = _shifted_minutes(np, _offset(first.to_bytes(8, "little")[:length]))
        if rows is None:
            days = moved_by[minute]
            np.take(shifted, minute, out=minute)
        else:
            code = minute[rows]
            days = moved_by[code]
            minute[rows] = shifted[code]
    else:  # zones of several offsets (logs of several hosts, or a hostile one): the same, line by line in arrays
        rows = np.arange(len(minute)) if rows is None else rows
        offsets = _offsets(np, zones)
        is_offset = offsets != _NOT_AN_OFFSET
        shifted, days = _moved(np, minute[rows], np.where(is_offset, offsets, 0))
        minute[rows] = np.where(is_offset, shifted, _NO_TIME_CODE)
        days = np.where(is_offset, days, 0)
    moving = np.flatnonzero(days)
    if not len(moving):
        return
    at, by = (moving if rows is None else rows[moving]), days[moving]
    dated = day[at] != 0  # a bare time stays bare: it is placed nearest the opening
    at, by = at[dated], by[dated]
    for shift in np.unique(by).tolist():
        chosen = at[by == shift]
        keys, where = np.unique(day[chosen], return_inverse=True)
        moved = np.array([_moved_day_key(int(key), shift) for key in keys.tolist()], dtype=np.uint64)
        moved = moved[where.reshape(-1)]
        lost = moved == 0  # a day that is not one, or past the calendar: the line keeps its day and has no time
        day[chosen] = np.where(lost, day[chosen], moved)
        minute[chosen[lost]] = _NO_TIME_CODE


def _offset(zone: bytes) -> int:
    """One zone's offset in minutes (``log_clock.zone_minutes``), ``_NOT_AN_OFFSET`` for one past 23:59."""
    minutes = zone_minutes(zone)
    return _NOT_AN_OFFSET if minutes is None else minutes


def _offsets(np: Any, zones: Any) -> Any:
    """Each zone's offset in minutes, as ``_offset`` reads one, from its eight bytes."""

    def digit(index: int) -> Any:
        return ((zones >> np.uint64(8 * index)) & np.uint64(0x0F)).astype(np.int64)

    colon = ((zones >> np.uint64(24)) & np.uint64(0xFF)) == 0x3A
    hours = digit(1) * 10 + digit(2)
    minutes = np.where(colon, digit(4) * 10 + digit(5), digit(3) * 10 + digit(4))
    offsets = np.where((zones & np.uint64(0xFF)) == 0x2D, -(hours * 60 + minutes), hours * 60 + minutes)
    return np.where((hours <= 23) & (minutes <= 59), offsets, _NOT_AN_OFFSET)


@functools.lru_cache(maxsize=64)  # a pass in one zone looks its table up; passes of mixed zones need none
def _shifted_minutes(np: Any, offset: int) -> tuple[Any, Any]:
    """For every minute code, the code ``offset`` minutes earlier within a day and the days that moves it (-1, 0
    or 1); a code that is not a time keeps it, and an offset that is not one (past 23:59) gives ``NO_TIME``."""
    if offset == _NOT_AN_OFFSET:
        return np.full(MINUTE_CODES, _NO_TIME_CODE, dtype=np.int64), np.zeros(MINUTE_CODES, dtype=np.int64)
    return _moved(np, np.arange(MINUTE_CODES, dtype=np.int64), offset)


def _moved(np: Any, codes: Any, offsets: Any) -> tuple[Any, Any]:
    """``codes`` moved ``offsets`` minutes earlier (one, or one a code) within a day, and the days each moved (-1, 0
    or 1); a code that is not a time is kept, and moves no day."""
    hour, written = codes // 100, codes % 100
    is_time = (hour <= 23) & (written <= 59)
    days, in_day = np.divmod(hour * 60 + written - offsets, MINUTES_A_DAY)
    return np.where(is_time, (in_day // 60) * 100 + in_day % 60, codes), np.where(is_time, days, 0)


def _moved_day_key(key: int, days: int) -> int:
    """The day key ``days`` after the day ``key`` stands for; 0 when it is not a day or the calendar ends."""
    try:
        return _day_key(date.fromisoformat(day_text(key).decode()) + timedelta(days=days))
    except (ValueError, OverflowError):
        return 0
