"""Act limits (``[act_limits]``, DESIGN section 4c): past one the desk refuses without asking anyone, with the exact
text, journalled; counted from the journal (a restarted desk and replicas sharing PostgreSQL count the same acts);
``incident-desk limits`` shows the counters and ``limits reset`` starts a service's again, journalled.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from incident_desk.cli.main import main
from incident_desk.core.acts import limits
from incident_desk.core.acts.limits import ActLimits
from incident_desk.core.journal.activity import Act, Counted, Event
from incident_desk.core.journal.audit import AuditJournal, Decision
from incident_desk.core.outcomes import RESOLVE, RESTART, Outcome
from incident_desk.server import build_server
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import load_settings
from tests.helpers import AppFactory, connect, text_of
from tests.postgres_cluster import PASSWORD, Cluster, unavailable_reason
from tests.restart_helpers import APPROVER, SERVICE, approve, desk, rows

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
OFF = {"per_person_per_hour": 0, "restarts_per_service_per_hour": 0, "cooldown_seconds": 0}


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _restart(minutes_ago: float, outcome: Outcome = Outcome.APPROVED, service: str = SERVICE) -> Counted:
    return Counted(NOW - timedelta(minutes=minutes_ago), "restart", outcome, "os:alice", service)


def _limits(**values: int) -> ActLimits:
    return ActLimits.model_validate({**OFF, **values})


# The counting, directly.


def test_the_restart_that_makes_the_limit_refuses_until_the_oldest_counted_leaves_the_hour() -> None:
    counted = [_restart(50), _restart(30), _restart(10), _restart(70)]  # the 70-minute-old one is out of the hour
    found = limits.reached(
        counted, _limits(restarts_per_service_per_hour=2), act="restart", person="x", service=SERVICE, now=NOW
    )
    assert found is not None
    # Three in the hour, a limit of two: it refuses until the second oldest (30 minutes ago) leaves the hour.
    assert (found.what, found.used, found.limit) == ("restarts of payments-api", 3, 2)
    assert found.blocks_until == NOW + timedelta(minutes=30)
    assert found.refusal(RESTART) == (
        "NOT RESTARTED -- limit reached: restarts of payments-api (3 of 2 in the last hour); clears at "
        f"{_stamp(NOW + timedelta(minutes=30))}Z"
    )
    under = limits.reached(
        counted, _limits(restarts_per_service_per_hour=4), act="restart", person="x", service=SERVICE, now=NOW
    )
    assert under is None


def test_only_approvals_of_that_service_since_its_last_reset_count() -> None:
    counted = [
        _restart(40),
        _restart(39, Outcome.EXECUTED),  # the same restart's end: not a second restart
        _restart(20, service="search-api"),
        _restart(15, Outcome.LIMITS_RESET),
        _restart(5),
    ]
    (count,) = limits.service_counters(counted, _limits(restarts_per_service_per_hour=1), SERVICE, NOW)
    assert (count.used, count.blocks_until) == (1, NOW + timedelta(minutes=55))
    assert limits.service_counters(counted[:3], _limits(restarts_per_service_per_hour=1), SERVICE, NOW)[0].used == 1
    assert limits.service_counters(counted[:4], _limits(restarts_per_service_per_hour=1), SERVICE, NOW) == []


def test_the_cooldown_runs_from_the_restart_s_end_and_a_reset_ends_it() -> None:
    counted = [_restart(10), _restart(8, Outcome.SIMULATED)]
    found = limits.reached(
        counted,
        _limits(cooldown_seconds=900, restarts_per_service_per_hour=3),
        act="restart",
        person="x",
        service=SERVICE,
        now=NOW,
    )
    assert found is not None and found.blocks_until == NOW + timedelta(minutes=7)
    assert found.refusal(RESTART) == (
        "NOT RESTARTED -- limit reached: the 900s cooldown after the last restart of payments-api (1 of 3 in the last "
        f"hour); clears at {_stamp(NOW + timedelta(minutes=7))}Z"
    )
    assert (
        limits.reached(counted, _limits(cooldown_seconds=400), act="restart", person="x", service=SERVICE, now=NOW)
        is None
    )
    reset = [*counted, _restart(1, Outcome.LIMITS_RESET)]
    assert (
        limits.reached(reset, _limits(cooldown_seconds=900), act="restart", person="x", service=SERVICE, now=NOW)
        is None
    )
    # A resolve is no restart: the service's cooldown does not stand in its way.
    assert (
        limits.reached(counted, _limits(cooldown_seconds=900), act="resolve", person="x", service=SERVICE, now=NOW)
        is None
    )


def test_a_person_s_approved_acts_of_every_kind_count_and_nobody_else_s() -> None:
    counted = [
        _restart(30),
        Counted(NOW - timedelta(minutes=20), "resolve", Outcome.APPROVED, "os:alice"),
        Counted(NOW - timedelta(minutes=10), "silence", Outcome.APPROVED, "os:bob"),
    ]
    found = limits.reached(
        counted, _limits(per_person_per_hour=2), act="unsilence", person="os:alice", service=None, now=NOW
    )
    assert found is not None
    assert found.refusal(RESOLVE) == (
        f"NOT RESOLVED -- limit reached: acts by os:alice (2 of 2 in the last hour); clears at "
        f"{_stamp(NOW + timedelta(minutes=30))}Z"
    )
    assert (
        limits.reached(counted, _limits(per_person_per_hour=2), act="resolve", person="os:bob", service=None, now=NOW)
        is None
    )


def test_of_several_limits_the_one_that_holds_longest_is_said_and_0_turns_one_off() -> None:
    counted = [_restart(50), _restart(1)]
    both = _limits(per_person_per_hour=2, cooldown_seconds=300)
    found = limits.reached(counted, both, act="restart", person="os:alice", service=SERVICE, now=NOW)
    assert found is not None and found.what == "acts by os:alice"  # clears in 10 minutes, the cooldown in 4
    assert limits.reached(counted, _limits(), act="restart", person="os:alice", service=SERVICE, now=NOW) is None


def test_the_settings_take_the_table_and_refuse_what_is_out_of_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INCIDENT_DESK_ACT_LIMITS")  # the other tests' "off"
    assert load_settings({}).act_limits == ActLimits(
        per_person_per_hour=30, restarts_per_service_per_hour=3, cooldown_seconds=120
    )
    config = tmp_path / "desk.toml"
    config.write_text("[act_limits]\nrestarts_per_service_per_hour = 1\ncooldown_seconds = 0\n", encoding="utf-8")
    read = load_settings({}, config).act_limits
    assert (read.per_person_per_hour, read.restarts_per_service_per_hour, read.cooldown_seconds) == (30, 1, 0)
    for bad in ({"cooldown_seconds": -1}, {"per_person_per_hour": 10_001}, {"restarts": 2}):
        with pytest.raises((SettingsError, ValidationError)):
            load_settings({"act_limits": bad})


def test_the_sqlite_journal_gives_this_desk_s_rows_of_both_tables_that_bear_on_a_limit(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path / "audit.sqlite3", desk="one")
    other = AuditJournal(tmp_path / "audit.sqlite3", desk="two")
    recent, old = NOW - timedelta(minutes=5), NOW - timedelta(minutes=90)
    for outcome in (Outcome.APPROVED, Outcome.DECLINED, Outcome.EXECUTED, Outcome.LIMITS_RESET, Outcome.REFUSED_LIMIT):
        journal.record(Decision(SERVICE, outcome, None, "os:alice", "legacy", time=recent))
    journal.record(Decision(SERVICE, Outcome.APPROVED, None, "os:alice", "legacy", time=old))
    other.record(Decision(SERVICE, Outcome.APPROVED, None, "os:alice", "legacy", time=recent))
    journal.record_event(Event("one", "INC-1", Act.RESOLVE, Outcome.APPROVED, "os:bob", time=recent))
    journal.record_event(Event("one", "INC-1", Act.RESOLVE, Outcome.DONE, "os:bob", time=recent))
    got = journal.counted_since(NOW - timedelta(hours=1))
    assert sorted((c.act, str(c.outcome), c.who, c.service) for c in got) == [
        ("resolve", "approved", "os:bob", None),
        ("restart", "approved", "os:alice", SERVICE),
        ("restart", "executed", "os:alice", SERVICE),
        ("restart", "limits_reset", "os:alice", SERVICE),
    ]
    assert {c.time for c in got} == {recent}


# Through a real client, both eras.


async def test_past_a_service_s_restarts_nobody_is_asked(make_app: AppFactory, era: str) -> None:
    app, server = desk(make_app, act_limits={**OFF, "restarts_per_service_per_hour": 1})
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        first = await client.call_tool("restart_service", {"service": SERVICE})
        assert text_of(first).startswith("RESTARTED payments-api under CHG-2291")
        assert len(operator.asked) == 1
        second = await client.call_tool("restart_service", {"service": SERVICE})
        other = await client.call_tool("restart_service", {"service": "search-api"})
    assert len(operator.asked) == 2  # the second restart of payments-api asked nobody; search-api's was asked
    assert text_of(other).startswith("RESTARTED search-api")
    (approved,) = [d for d in rows(app.journal) if d.outcome == Outcome.APPROVED and d.service == SERVICE]
    expected = (
        "NOT RESTARTED -- limit reached: restarts of payments-api (1 of 1 in the last hour); clears at "
        f"{_stamp(approved.time + timedelta(hours=1))}Z"
    )
    assert second.is_error and text_of(second) == expected
    refused = [d for d in rows(app.journal) if d.outcome == Outcome.REFUSED_LIMIT]
    assert [(d.service, d.approver, d.detail) for d in refused] == [
        (SERVICE, APPROVER, f"{expected}; nobody was asked")
    ]


async def test_the_cooldown_refuses_the_same_way_and_survives_a_restart_of_the_desk(
    make_app: AppFactory, era: str
) -> None:
    settings: dict[str, Any] = {"act_limits": {**OFF, "cooldown_seconds": 600, "restarts_per_service_per_hour": 3}}
    app, server = desk(make_app, **settings)
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        await client.call_tool("restart_service", {"service": SERVICE})
    # A new desk on the same journal: the count is the journal's, not the process's.
    app, server = desk(make_app, **settings)
    async with connect(server, era, elicitation_callback=operator) as client:
        refused = await client.call_tool("restart_service", {"service": SERVICE})
    assert len(operator.asked) == 1
    ended = [d for d in rows(app.journal) if d.outcome == Outcome.SIMULATED][-1]
    assert text_of(refused) == (
        "NOT RESTARTED -- limit reached: the 600s cooldown after the last restart of payments-api (1 of 3 in the last "
        f"hour); clears at {_stamp(ended.time + timedelta(seconds=600))}Z"
    )


async def test_a_person_s_acts_of_every_kind_count_towards_one_limit(make_app: AppFactory, era: str) -> None:
    app = make_app(act_limits={**OFF, "per_person_per_hour": 2})
    operator = approve()
    async with connect(build_server(app), era, elicitation_callback=operator) as client:
        restarted = await client.call_tool("restart_service", {"service": SERVICE})
        resolved = await client.call_tool("resolve_incident", {"incidentId": "INC-1042", "resolution": "rolled back"})
        refused = await client.call_tool("resolve_incident", {"incidentId": "INC-1043", "resolution": "rolled back"})
    assert text_of(restarted).startswith("RESTARTED") and text_of(resolved).startswith("RESOLVED INC-1042")
    assert len(operator.asked) == 2
    first = min(d.time for d in rows(app.journal) if d.outcome == Outcome.APPROVED)
    assert refused.is_error and text_of(refused) == (
        f"NOT RESOLVED -- limit reached: acts by {APPROVER} (2 of 2 in the last hour); clears at "
        f"{_stamp(first + timedelta(hours=1))}Z"
    )
    (event,) = [e for e in app.journal.activity("INC-1043") if e.outcome == Outcome.REFUSED_LIMIT]
    assert event.actor == APPROVER and event.act == Act.RESOLVE


async def test_limits_shows_the_counters_and_reset_starts_a_service_again_journalled(
    make_app: AppFactory, era: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INCIDENT_DESK_ACT_LIMITS")  # the other tests' "off": the config file says here
    settings: dict[str, Any] = {"act_limits": {**OFF, "restarts_per_service_per_hour": 1, "cooldown_seconds": 600}}
    app, server = desk(make_app, **settings)
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        await client.call_tool("restart_service", {"service": SERVICE})
        refused = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(refused).startswith("NOT RESTARTED -- limit reached: ") and len(operator.asked) == 1
    config = Path(str(app.settings.audit_path) + ".toml")
    config.write_text("[act_limits]\nrestarts_per_service_per_hour = 1\ncooldown_seconds = 600\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["limits", "--config", str(config)]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"^restarts of payments-api\s+1 of 1\s+\S+Z\s+until \S+Z$", shown, re.M), shown
    assert re.search(
        r"^the 600s cooldown after the last restart of payments-api\s+1 of 1\s+\S+Z\s+until \S+Z$", shown, re.M
    )
    assert re.search(rf"^acts by {APPROVER}\s+1 of 30\s+\S+Z\s+-$", shown, re.M), shown

    assert main(["limits", "reset", SERVICE, "--reason", " "]) == 2
    assert main(["limits", "reset", SERVICE, "--config", str(config), "--reason", "hotfix must go out"]) == 0
    assert f"journalled as limits_reset by {APPROVER}" in capsys.readouterr().out
    reset = rows(app.journal)[-1]
    assert (reset.service, reset.outcome, reset.approver, reset.protocol_era) == (
        SERVICE,
        "limits_reset",
        APPROVER,
        "cli",
    )
    assert reset.detail.endswith("; reason: hotfix must go out") and "restarts of payments-api: 1 of 1" in reset.detail

    async with connect(server, era, elicitation_callback=operator) as client:
        again = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(again).startswith("RESTARTED payments-api") and len(operator.asked) == 2


# Replicas sharing a PostgreSQL journal.

needs_postgres = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


@needs_postgres
async def test_two_desks_sharing_a_postgres_journal_see_one_limit(
    make_app: AppFactory, postgres_cluster: Cluster, era: str
) -> None:
    url = postgres_cluster.new_database(f"limits_{uuid.uuid4().hex[:12]}")
    settings: dict[str, Any] = {
        "audit_db": url,
        "audit_db_password": PASSWORD,
        "act_limits": {**OFF, "restarts_per_service_per_hour": 1},
    }
    one, one_server = desk(make_app, **settings)
    two, two_server = desk(make_app, **settings)
    operator = approve()
    try:
        async with connect(one_server, era, elicitation_callback=operator) as client:
            assert text_of(await client.call_tool("restart_service", {"service": SERVICE})).startswith("RESTARTED")
        async with connect(two_server, era, elicitation_callback=operator) as client:
            refused = await client.call_tool("restart_service", {"service": SERVICE})
        assert len(operator.asked) == 1
        assert text_of(refused).startswith(
            "NOT RESTARTED -- limit reached: restarts of payments-api (1 of 1 in the last hour); clears at "
        )
        assert [str(d.outcome) for d in rows(one.journal)][-1] == "refused_limit"
    finally:
        one.journal.close()
        two.journal.close()
