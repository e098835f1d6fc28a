"""What the index watcher counts as a change (core, no MCP): new, resolved, silenced and unsilenced incidents, a
silence about to end (once), and a source that is down (its incidents kept, reported once)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from incident_desk.core.incidents import Incident, Listing, Problem
from incident_desk.core.sources.watch import IndexWatch

NOW = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)


def _incident(key: str, *, source: str = "prod", silenced_by: tuple[str, ...] = (), status: str = "firing") -> Incident:
    return Incident(key, "t", "svc", "high", status, NOW, source=source, silenced_by=silenced_by)


def _listing(*incidents: Incident, down: dict[str, str] | None = None) -> Listing:
    problems = tuple(Problem(f"source {name}", reason) for name, reason in (down or {}).items())
    return Listing({i.id: i for i in incidents}, (), problems)


def test_the_first_look_is_the_baseline_and_tells_nothing() -> None:
    watch = IndexWatch()
    assert not watch.has_baseline
    assert not watch.step(_listing(_incident("prod-1")), {}, NOW).changed
    assert watch.has_baseline


def test_new_resolved_silenced_and_unsilenced_incidents_are_changes() -> None:
    watch = IndexWatch()
    watch.step(_listing(_incident("prod-1"), _incident("prod-2")), {}, NOW)
    assert watch.step(_listing(_incident("prod-1"), _incident("prod-2")), {}, NOW).changes == ()
    step = watch.step(_listing(_incident("prod-1", silenced_by=("s1",)), _incident("prod-3")), {}, NOW)
    assert step.changes == ("new prod-3", "resolved prod-2", "silenced prod-1")
    assert watch.step(_listing(_incident("prod-1"), _incident("prod-3")), {}, NOW).changes == ("unsilenced prod-1",)
    closed = _incident("prod-3", source="folder", status="resolved")
    assert watch.step(_listing(_incident("prod-1"), closed), {}, NOW).changes == ("resolved prod-3",)


def test_a_silence_ending_within_15_minutes_is_told_once() -> None:
    watch = IndexWatch()
    muted = _listing(_incident("prod-1", silenced_by=("s1",)))
    watch.step(muted, {}, NOW)
    assert watch.unknown_silences(muted) == {"s1": muted.incidents["prod-1"]}
    ends = NOW + timedelta(minutes=40)
    assert watch.step(muted, {"s1": ends}, NOW).changes == ()
    assert watch.unknown_silences(muted) == {}
    assert watch.step(muted, {}, NOW + timedelta(minutes=24)).changes == ()
    step = watch.step(muted, {}, NOW + timedelta(minutes=26))
    assert step.changes == (f"silence s1 ends at {ends.isoformat()}",)
    assert watch.step(muted, {}, NOW + timedelta(minutes=30)).changes == ()


def test_a_source_that_is_down_keeps_its_incidents_and_is_reported_once() -> None:
    watch = IndexWatch()
    watch.step(_listing(_incident("prod-1"), _incident("INC-1", source="folder")), {}, NOW)
    down = _listing(_incident("INC-1", source="folder"), down={"prod": "connection refused"})
    first = watch.step(down, {}, NOW)
    assert first.changes == () and dict(first.went_down) == {"prod": "connection refused"}
    again = watch.step(down, {}, NOW)
    assert again.changes == () and dict(again.went_down) == {} and again.came_back == ()
    back = watch.step(_listing(_incident("INC-1", source="folder")), {}, NOW)
    assert back.came_back == ("prod",) and back.changes == ("resolved prod-1",)


def test_reset_forgets_the_baseline() -> None:
    watch = IndexWatch()
    watch.step(_listing(_incident("prod-1")), {}, NOW)
    watch.reset()
    assert not watch.step(_listing(_incident("prod-2")), {}, NOW).changed
