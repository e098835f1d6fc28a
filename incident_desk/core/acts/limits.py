"""Act limits (``[act_limits]``): how many acts one person, and how many restarts one service, may have in an hour,
and the quiet time after a service's restart. Past one the desk refuses without asking anyone, so no model can talk
a human into one more.

Counted from the journal's rows (``Counted``), never from memory: a desk that restarts, and every replica sharing a
PostgreSQL journal, counts the same acts. No MCP imports.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from incident_desk.core.journal.activity import Counted
from incident_desk.core.outcomes import (
    COOLDOWN_LIMIT,
    PERSON_LIMIT,
    RESTARTED_OUTCOMES,
    SERVICE_LIMIT,
    ActWords,
    Outcome,
)

HOUR = timedelta(hours=1)
# The acts counted per service: a runbook action ("run") is journalled as the audit journal's rows are, so a
# service's restarts and actions count together.
SERVICE_ACTS = frozenset({"restart", "run"})
# An approved act is counted once, by its approval row, whatever became of it afterwards.
COUNTED = Outcome.APPROVED


class ActLimits(BaseModel):
    """The ``[act_limits]`` table; 0 turns a limit off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    per_person_per_hour: int = Field(
        default=30,
        ge=0,
        le=10_000,
        description="Approved acts (restart, resolve, silence, unsilence) one person may have in an hour",
    )
    restarts_per_service_per_hour: int = Field(
        default=3, ge=0, le=1_000, description="Approved restarts of one service in an hour"
    )
    cooldown_seconds: int = Field(
        default=120, ge=0, le=86_400, description="Seconds after a service's restart before it may be restarted"
    )

    def window(self) -> timedelta:
        """How far back the journal must be read for these limits."""
        return max(HOUR, timedelta(seconds=self.cooldown_seconds))


@dataclass(frozen=True)
class Counter:
    """One limit's state: ``used`` of ``limit`` (``limit`` 0: off); ``blocks_until`` when it refuses now (the
    moment it stops), ``clears`` when nothing it counts is left."""

    what: str
    used: int
    limit: int
    clears: datetime
    blocks_until: datetime | None

    def refusal(self, words: ActWords) -> str:
        assert self.blocks_until is not None
        limit: int | str = self.limit or "no limit"
        return words.limit_text(self.what, self.used, limit, stamp(self.blocks_until))


def stamp(moment: datetime) -> str:
    """A time as the texts show it (the caller adds the ``Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _count(what: str, times: Sequence[datetime], limit: int) -> Counter:
    """An hourly count: refusing while ``limit`` of ``times`` (oldest first) are inside the hour, until the one
    that makes it ``limit`` leaves it."""
    blocks = times[len(times) - limit] + HOUR if limit and len(times) >= limit else None
    return Counter(what, len(times), limit, times[-1] + HOUR, blocks)


def person_counter(rows: Iterable[Counted], limits: ActLimits, person: str, now: datetime) -> Counter | None:
    times = sorted(r.time for r in rows if r.outcome == COUNTED and r.who == person and r.time > now - HOUR)
    return _count(PERSON_LIMIT.format(person=person), times, limits.per_person_per_hour) if times else None


def service_counters(rows: Iterable[Counted], limits: ActLimits, service: str, now: datetime) -> list[Counter]:
    """The service's hourly count and its cooldown (when running), each counted from its last reset on."""
    own = [r for r in rows if r.act in SERVICE_ACTS and r.service == service]
    reset = max((r.time for r in own if r.outcome == Outcome.LIMITS_RESET), default=None)
    since = [r for r in own if reset is None or r.time > reset]
    times = sorted(r.time for r in since if r.outcome == COUNTED and r.time > now - HOUR)
    found = (
        [_count(SERVICE_LIMIT.format(service=service), times, limits.restarts_per_service_per_hour)] if times else []
    )
    last = max((r.time for r in since if r.outcome in RESTARTED_OUTCOMES), default=None)
    if (
        limits.cooldown_seconds
        and last is not None
        and (ends := last + timedelta(seconds=limits.cooldown_seconds)) > now
    ):
        what = COOLDOWN_LIMIT.format(seconds=limits.cooldown_seconds, service=service)
        found.append(Counter(what, len(times), limits.restarts_per_service_per_hour, ends, ends))
    return found


def reached(
    rows: Sequence[Counted],
    limits: ActLimits,
    *,
    act: str,
    person: str,
    service: str | None,
    now: datetime,
    spending: str | None = None,
) -> Counter | None:
    """The limit that refuses ``person``'s ``act`` (on ``service``) now; of several, the one that holds longest,
    so its time is when the act may be asked for again. None: nothing stands in the way.

    ``spending``: the nonce of an approval about to be spent (checked again, as two questions asked at once may
    both have been approved). Its own row is not counted against it; where the approval page already journalled
    it, neither are approvals journalled after it, so of approvals given at once the first one given acts."""
    if spending is not None:
        rows = before_approval(rows, spending)
    counters = [person_counter(rows, limits, person, now)]
    if act in SERVICE_ACTS and service is not None:
        counters += service_counters(rows, limits, service, now)
    refusing = [c for c in counters if c is not None and c.blocks_until is not None and c.blocks_until > now]
    return max(refusing, key=lambda c: c.blocks_until or now, default=None)


def before_approval(rows: Sequence[Counted], nonce: str) -> list[Counted]:
    """``rows`` as an approval (by its ``nonce``) counts them: without its own row, and, when it has one, without
    the approval rows after it."""
    own = next((r for r in rows if r.nonce == nonce and r.outcome == COUNTED), None)
    return [r for r in rows if r.nonce != nonce and (own is None or r.outcome != COUNTED or r.time <= own.time)]


def all_counters(rows: Sequence[Counted], limits: ActLimits, now: datetime) -> list[Counter]:
    """Every counter with something in it now: each person's, then each service's (``incident-desk limits``)."""
    people = sorted({r.who for r in rows if r.outcome == COUNTED})
    services = sorted({r.service for r in rows if r.act in SERVICE_ACTS and r.service is not None})
    found = [c for person in people if (c := person_counter(rows, limits, person, now)) is not None]
    return found + [c for service in services for c in service_counters(rows, limits, service, now)]


def _cell(value: str) -> str:
    """One printable cell: a person's name comes from a client's identity, so no control character reaches a tty."""
    return "".join("?" if unicodedata.category(ch)[0] == "C" else ch for ch in value)


def format_counters(counters: Sequence[Counter], now: datetime) -> str:
    if not counters:
        return "no act counts towards a limit now"
    headers = ("limit", "used", "clears", "refusing")
    rows = [
        (
            _cell(c.what),
            f"{c.used} of {c.limit or 'no limit'}",
            stamp(c.clears) + "Z",
            "-" if c.blocks_until is None or c.blocks_until <= now else f"until {stamp(c.blocks_until)}Z",
        )
        for c in counters
    ]
    widths = [max(len(header), *(len(row[i]) for row in rows)) for i, header in enumerate(headers)]
    lines = [headers, *rows]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)
