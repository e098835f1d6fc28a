"""Who is on call: an iCalendar feed (a file, or an https URL that PagerDuty, Opsgenie, GoAlert or Google Calendar
export), each event's SUMMARY naming the person on call while it lasts.

Reading a schedule means recurring events (``RRULE``), their exceptions (``EXDATE``, ``RECURRENCE-ID``
overrides) and time zones (``VTIMEZONE``, ``TZID``): ``icalendar`` parses the feed and ``recurring-ical-events``
expands it, rather than rules of our own that would get daylight saving or an override wrong. A URL is fetched
through :mod:`core.neighbours.outside` (a total deadline, a size cap, named errors) and a file is read up to the
same cap; both are parsed in the caller's thread (call :meth:`CalendarFeed.on_call` off the event loop). The last
good read is kept for ``cache_seconds``; a failure is kept for a shorter while so a calendar that is down is not
asked on every call, and then the last good copy answers, said to be a copy.

No MCP imports.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from incident_desk.core import errors
from incident_desk.core.neighbours import outside
from incident_desk.core.neighbours.untrusted import one_line

MAX_NAME_CHARS = 120
# How far ahead the next person is looked for: a rotation longer than this names nobody next.
NEXT_HORIZON = timedelta(days=62)
FAILURE_CACHE_SECONDS = 30.0
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def check_location(value: str) -> str:
    """A calendar is an absolute file path, an https URL, or an http URL on this machine (the feed decides who is
    paged, so it is never read in the clear from elsewhere)."""
    parts = urlsplit(value)
    if parts.scheme in ("https", "http"):
        if not parts.hostname:
            raise ValueError(f"calendar URL {describe(value)!r} has no host")
        if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
            raise ValueError(f"calendar URL {describe(value)!r} must be https (http only on this machine)")
        return value
    if parts.scheme and len(parts.scheme) > 1:
        raise ValueError(f"calendar {describe(value)!r} must be a file path or an https URL")
    if not Path(value).expanduser().is_absolute():
        raise ValueError(f"calendar file {value!r} is relative: give an absolute path")
    return str(Path(value).expanduser())


def describe(location: str) -> str:
    """The calendar as messages show it: a file's path, a URL's host only (feed URLs carry their secret in the
    path or the query)."""
    parts = urlsplit(location)
    if parts.scheme in ("https", "http") and parts.hostname:
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname}{port}/…"
    return location


class OncallConfig(BaseModel):
    """The ``[oncall]`` table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calendar: str | None = Field(
        default=None,
        description="iCalendar feed of the on-call schedule: an absolute file path or an https URL; each event's "
        "SUMMARY names who is on call (a URL with a secret in it is best set in INCIDENT_DESK_ONCALL__CALENDAR)",
    )
    timeout_seconds: float = Field(default=5.0, gt=0, le=60, description="Deadline of one fetch of the feed")
    max_bytes: int = Field(
        default=2 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024, description="Largest feed read; more is an error"
    )
    cache_seconds: float = Field(default=300.0, ge=0, le=86_400, description="How long a good read is reused")

    @field_validator("calendar")
    @classmethod
    def _location(cls, value: str | None) -> str | None:
        return None if value is None or not value.strip() else check_location(value.strip())


class CalendarUnavailable(errors.Unavailable):
    """The feed could not be read or is not an iCalendar schedule; the message names it and why."""


@dataclass(frozen=True)
class OnCall:
    """Who is on call at ``at`` by one calendar: ``who`` until ``until``, then ``next_who``; or ``problem``."""

    calendar: str
    who: str | None = None
    until: datetime | None = None
    next_who: str | None = None
    problem: str | None = None
    stale_since: datetime | None = None  # set when a failed read was answered from the last good copy


@dataclass(frozen=True)
class _Shift:
    who: str
    start: datetime
    end: datetime


def _utc(value: Any) -> datetime:
    """An event bound as an aware UTC time: a date is its midnight, a floating time is read as UTC."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise ValueError(f"not a time: {type(value).__name__}")


def _shifts(events: Any) -> list[_Shift]:
    shifts = []
    for event in events:
        try:
            start, end = _utc(event.start), _utc(event.end)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # an event without usable bounds names nobody
        who = one_line(str(event.get("SUMMARY", "")).strip(), MAX_NAME_CHARS)
        if who and end > start:
            shifts.append(_Shift(who, start, end))
    return sorted(shifts, key=lambda shift: (shift.start, shift.who))


def _names(shifts: list[_Shift]) -> str:
    return ", ".join(dict.fromkeys(shift.who for shift in shifts))


def on_call_at(calendar: Any, at: datetime, label: str) -> OnCall:
    """Who ``calendar`` (a parsed VCALENDAR) has on call at ``at``, until when, and who follows."""
    import recurring_ical_events

    expanded = recurring_ical_events.of(calendar)
    now = _shifts(expanded.at(at))
    if not now:
        upcoming = [shift for shift in _shifts(expanded.between(at, at + NEXT_HORIZON)) if shift.start > at]
        first = [shift for shift in upcoming if shift.start == upcoming[0].start] if upcoming else []
        return OnCall(label, who=None, until=first[0].start if first else None, next_who=_names(first) or None)
    until = min(shift.end for shift in now)
    following = [shift for shift in _shifts(expanded.at(until)) if shift.start <= until < shift.end]
    if not following:
        later = [shift for shift in _shifts(expanded.between(until, until + NEXT_HORIZON)) if shift.start >= until]
        following = [shift for shift in later if shift.start == later[0].start] if later else []
    return OnCall(label, who=_names(now), until=until, next_who=_names(following) or None)


def parse(content: bytes, label: str) -> Any:
    """The feed as a parsed VCALENDAR (CalendarUnavailable when it is not one)."""
    import icalendar

    try:
        parsed = icalendar.Calendar.from_ical(content)
    except (ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as exc:
        raise CalendarUnavailable(f"{label} is not an iCalendar feed ({one_line(str(exc), 120)})") from None
    if getattr(parsed, "name", "") != "VCALENDAR":
        raise CalendarUnavailable(f"{label} is not an iCalendar feed (no single VCALENDAR)")
    return parsed


class CalendarFeed:
    """One calendar: read (fetched or opened), parsed, cached; asked who is on call at a moment."""

    def __init__(self, location: str, config: OncallConfig, *, monotonic: Any = time.monotonic) -> None:
        self.location = location
        self.config = config
        self.label = f"calendar {describe(location)}"
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._good: tuple[float, datetime, Any] | None = None  # (read at, read at UTC, parsed)
        self._failed: tuple[float, CalendarUnavailable] | None = None
        self.reads = 0

    def on_call(self, at: datetime) -> OnCall:
        """Who is on call at ``at`` (blocks for at most the feed's deadline); a failure is an ``OnCall`` with its
        ``problem``, answered from the last good copy when there is one."""
        try:
            parsed, stale_since = self._calendar()
        except CalendarUnavailable as exc:
            return OnCall(self.label, problem=str(exc))
        try:
            found = on_call_at(parsed, at, self.label)
        except Exception as exc:  # a feed the expander cannot walk is the feed's fault, named, not a crash
            return OnCall(self.label, problem=f"{self.label} cannot be read as a schedule ({type(exc).__name__})")
        if stale_since is None or self._failed is None:
            return found
        return OnCall(
            found.calendar,
            found.who,
            found.until,
            found.next_who,
            problem=str(self._failed[1]),
            stale_since=stale_since,
        )

    def _calendar(self) -> tuple[Any, datetime | None]:
        with self._lock:
            now = self._monotonic()
            good, failed = self._good, self._failed
            if good is not None and now - good[0] < self.config.cache_seconds and failed is None:
                return good[2], None
            if failed is not None and now - failed[0] < min(FAILURE_CACHE_SECONDS, max(self.config.cache_seconds, 1)):
                if good is not None:
                    return good[2], good[1]
                raise failed[1]
            try:
                parsed = parse(self._read(), self.label)
            except CalendarUnavailable as exc:
                self._failed = (now, exc)
                if good is not None:
                    return good[2], good[1]
                raise
            self._good, self._failed = (now, datetime.now(UTC), parsed), None
            return parsed, None

    def _read(self) -> bytes:
        self.reads += 1
        if urlsplit(self.location).scheme in ("https", "http"):
            return self._fetch()
        return self._open()

    def _fetch(self) -> bytes:
        request = outside.Request(
            "GET",
            self.location,
            what=self.label,
            deadline_seconds=self.config.timeout_seconds,
            max_bytes=self.config.max_bytes,
            headers={"accept": "text/calendar"},
        )
        try:
            response = outside.exchange(request)
        except outside.OutsideError as exc:
            raise CalendarUnavailable(str(exc)) from None
        if response.status_code != 200:
            raise CalendarUnavailable(f"{self.label} answered HTTP {response.status_code}")
        return response.content

    def _open(self) -> bytes:
        # Opened without blocking and judged by what was opened: a FIFO or a device is never waited on.
        try:
            descriptor = os.open(self.location, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise CalendarUnavailable(f"{self.label} cannot be read: {exc.strerror or type(exc).__name__}") from None
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise CalendarUnavailable(f"{self.label} is not a regular file")
            with os.fdopen(descriptor, "rb", closefd=False) as handle:
                content = handle.read(self.config.max_bytes + 1)
        except OSError as exc:
            raise CalendarUnavailable(f"{self.label} cannot be read: {exc.strerror or type(exc).__name__}") from None
        finally:
            os.close(descriptor)
        if len(content) > self.config.max_bytes:
            raise CalendarUnavailable(f"{self.label} is larger than {self.config.max_bytes} bytes")
        return content


class Calendars:
    """The desk's calendar (``[oncall] calendar``) and the services' own (``oncall_calendar``), one feed per
    location however many services share it."""

    def __init__(self, config: OncallConfig, per_service: dict[str, str]) -> None:
        self.config = config
        self._per_service = dict(per_service)
        self._feeds: dict[str, CalendarFeed] = {}
        self._lock = threading.Lock()

    def has_own(self, service: str) -> bool:
        return service in self._per_service

    def feed(self, location: str) -> CalendarFeed:
        with self._lock:
            found = self._feeds.get(location)
            if found is None:
                found = self._feeds[location] = CalendarFeed(location, self.config)
            return found

    def on_call(self, at: datetime, service: str | None = None) -> OnCall:
        """Who is on call at ``at`` for ``service`` (its own calendar, else the desk's) or for the desk."""
        location = self._per_service.get(service or "") or self.config.calendar
        if location is None:
            return OnCall("calendar", problem="no on-call calendar is configured ([oncall] calendar)")
        return self.feed(location).on_call(at)
