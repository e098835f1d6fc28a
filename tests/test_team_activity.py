"""The activity log on the team desk's PostgreSQL journal: replicas see each other's acts at once, desks stay apart,
and a version 1 journal is upgraded in place without losing a row."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from incident_desk.core.incidents import bundled_sample_data
from incident_desk.core.journal.activity import Act, Event
from incident_desk.core.journal.audit import Decision, Journal
from incident_desk.core.journal.audit_pg import PostgresJournal
from incident_desk.core.journal.memory import Postmortem
from incident_desk.core.journal.memory_pg import PostgresMemory
from incident_desk.core.outcomes import Outcome
from incident_desk.server import build_server
from tests.helpers import AppFactory, connect, text_of
from tests.postgres_cluster import PASSWORD, Cluster, running_cluster, unavailable_reason
from tests.restart_helpers import APPROVER, approve

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running_cluster() as running:
        yield running


@pytest.fixture
def journal_url(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("INCIDENT_DESK_AUDIT_DB_PASSWORD", PASSWORD)
    return cluster.new_database(f"desk_{uuid.uuid4().hex[:12]}")


async def test_two_replicas_see_each_others_acts_at_once(make_app: AppFactory, journal_url: str) -> None:
    first, second = make_app(audit_db=journal_url), make_app(audit_db=journal_url)
    other_desk = make_app(audit_db=journal_url, desk_name="another-team")
    try:
        async with (
            connect(build_server(first), "2026-07-28") as one,
            connect(build_server(second), "legacy") as two,
            connect(build_server(other_desk), "legacy") as elsewhere,
        ):
            acked = await one.call_tool("acknowledge_incident", {"incidentId": "INC-1042"})
            seen = await two.call_tool("list_incidents", {"state": "acknowledged"})
            again = await two.call_tool("acknowledge_incident", {"incidentId": "INC-1042"})
            await two.call_tool("add_incident_note", {"incidentId": "INC-1042", "text": "from replica two"})
            activity = text_of(await one.call_tool("get_incident_activity", {"incidentId": "INC-1042"}))
            apart = text_of(await elsewhere.call_tool("get_incident_activity", {"incidentId": "INC-1042"}))
        assert text_of(acked) == f"ACKNOWLEDGED INC-1042 by {APPROVER}"
        assert [entry["id"] for entry in seen.structured_content["incidents"]] == ["INC-1042"]
        assert text_of(again).startswith(f"INC-1042 was already acknowledged by {APPROVER} at ")
        assert [line.split(" ", 2)[1] for line in activity.splitlines()] == ["acknowledge", "note"]
        assert apart == "No activity recorded for INC-1042 on this desk yet."
    finally:
        for app in (first, second, other_desk):
            app.journal.close()


async def test_an_action_run_on_one_replica_is_in_the_other_s_activity(make_app: AppFactory, journal_url: str) -> None:
    """The journal's rows of the incident's service, read back by service and time from PostgreSQL."""
    action = {"description": "Warm the cache", "argv": [sys.executable, "-c", "print('warm')"]}
    services = {"payments-api": {"actions": {"warm": action}}, "search-api": {"actions": {"warm": action}}}
    first, second = make_app(audit_db=journal_url, services=services), make_app(audit_db=journal_url)
    try:
        async with (
            connect(build_server(first), "2026-07-28", elicitation_callback=approve()) as one,
            connect(build_server(second), "legacy") as two,
        ):
            for service in ("payments-api", "search-api"):
                ran = await one.call_tool("run_service_action", {"service": service, "action": "warm"})
                assert text_of(ran).startswith(f"RAN warm on {service} under CHG-2291"), text_of(ran)
            activity = await two.call_tool("get_incident_activity", {"incidentId": "INC-1042"})
        (line,) = text_of(activity).splitlines()
        assert line.endswith(f"Z action warm on payments-api by {APPROVER} under CHG-2291: exit 0")
        assert activity.structured_content is not None
        assert [a["service"] for a in activity.structured_content["actions"]] == ["payments-api"]
    finally:
        for app in (first, second):
            app.journal.close()


def test_a_version_1_postgres_journal_is_upgraded_in_place(cluster: Cluster, journal_url: str) -> None:
    database = journal_url.rsplit("/", 1)[1]
    with cluster.connect(database) as conn:
        conn.execute(
            """CREATE TABLE decisions (id BIGSERIAL PRIMARY KEY, time TIMESTAMPTZ NOT NULL, service TEXT NOT NULL,
            outcome TEXT NOT NULL, ticket TEXT, approver TEXT NOT NULL, protocol_era TEXT NOT NULL,
            exit_status INTEGER, detail TEXT NOT NULL DEFAULT '', nonce TEXT UNIQUE)"""
        )
        conn.execute(
            "CREATE TABLE restart_holders (service TEXT PRIMARY KEY, holder TEXT NOT NULL, since TIMESTAMPTZ NOT NULL)"
        )
        conn.execute("CREATE TABLE incident_desk_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO incident_desk_schema (version) VALUES (1)")
        for n in range(3):
            conn.execute(
                "INSERT INTO decisions (time, service, outcome, ticket, approver, protocol_era, nonce) "
                "VALUES (now(), 'payments-api', 'approved', %s, 'os:alice', '2025-11-25', %s)",
                (f"CHG-{n}", f"nonce-{n}"),
            )
    journal = PostgresJournal(journal_url, PASSWORD, desk="upgraded")
    try:
        assert journal.schema_version() == 2
        assert [d.ticket for d in journal.recent(10)] == ["CHG-2", "CHG-1", "CHG-0"]
        journal.record(Decision("payments-api", Outcome.DECLINED, None, "os:bob", "2025-11-25"))
        journal.record_event(Event("upgraded", "INC-1042", Act.NOTE, Outcome.DONE, "os:bob", "kept"))
        assert journal.count() == 4
        assert [e.text for e in journal.activity("INC-1042")] == ["kept"]
    finally:
        journal.close()
    again = PostgresJournal(journal_url, PASSWORD, desk="upgraded")
    elsewhere = PostgresJournal(journal_url, PASSWORD, desk="another")
    try:
        assert again.count() == 4 and elsewhere.count() == 0
    finally:
        again.close()
        elsewhere.close()


async def test_a_journal_written_under_the_old_derived_name_keeps_its_desk(
    make_app: AppFactory, journal_url: str, tmp_path: Path
) -> None:
    """The migration on PostgreSQL: rows a desk kept under ``<data_dir> [<sources>]`` become its own when it
    starts with the data directory alone as its name (adding a source no longer renames it), once."""
    data = tmp_path / "desk"
    shutil.copytree(bundled_sample_data(), data)
    base = str(data.resolve())
    written: list[Journal] = []
    for old_name, text in ((f"{base} [folder]", "first"), (f"{base} [archive, folder]", "second")):
        journal = PostgresJournal(journal_url, PASSWORD, desk=old_name)
        written.append(journal)
        journal.record_event(Event("ignored", "INC-1042", Act.NOTE, Outcome.DONE, "os:alice", text))
        when = datetime.now(UTC)
        PostgresMemory(journal).save_postmortem(Postmortem("INC-1042", f"# {text} postmortem", "os:alice", when))
    stranger = PostgresJournal(journal_url, PASSWORD, desk="/elsewhere [folder]")
    stranger.record_event(Event("ignored", "INC-1042", Act.NOTE, Outcome.DONE, "os:bob", "not ours"))
    written.append(stranger)
    archive = [{"kind": "folder"}, {"kind": "folder", "name": "archive", "path": str(tmp_path / "archive")}]
    (tmp_path / "archive" / "incidents").mkdir(parents=True)
    app = make_app(data_dir=data, audit_db=journal_url, incident_sources=archive)
    again = None
    try:
        assert sorted(app.journal.adopted) == [f"{base} [archive, folder]", f"{base} [folder]"]
        async with connect(build_server(app), "legacy") as client:
            activity = await client.call_tool("get_incident_activity", {"incidentId": "INC-1042"})
            postmortem = text_of(await client.read_resource("postmortem://INC-1042"))
        assert sorted(e["text"] for e in activity.structured_content["events"]) == ["first", "second"]
        assert "# second postmortem" in postmortem
        assert [e.text for e in stranger.activity("INC-1042")] == ["not ours"], "another desk's rows stay its own"
        again = make_app(data_dir=data, audit_db=journal_url)
        assert again.journal.adopted == [], "taken over once"
        assert len(again.journal.activity("INC-1042")) == 2
    finally:
        for opened in [*written, app.journal, *([again.journal] if again else [])]:
            opened.close()
