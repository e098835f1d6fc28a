"""acknowledge_incident, add_incident_note and each incident's activity log; the journal's desks and its migration.

Acts with no form: journalled with who did them, shown by list_incidents' states and filter, by the
``incident://{id}/activity`` resource and its twin; two desks sharing one journal file never see each other's events;
a version 1 journal is upgraded in place without losing a row.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from incident_desk.core.incidents import bundled_sample_data
from incident_desk.core.journal.activity import Act, Event
from incident_desk.core.journal.audit import AuditJournal, Decision
from incident_desk.core.journal.memory import Postmortem, SqliteMemory
from incident_desk.core.outcomes import Outcome
from incident_desk.features.prompts import SAVE_SENTENCE
from incident_desk.server import build_server
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import APPROVER, approve

pytestmark = pytest.mark.anyio

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


async def test_acknowledge_once_then_say_who_did_with_state_and_filter(make_app: AppFactory, era: str) -> None:
    app = make_app()
    async with connect(build_server(app), era) as client:
        first = await client.call_tool("acknowledge_incident", {"incidentId": "INC-1042", "note": "looking"})
        again = await client.call_tool("acknowledge_incident", {"incidentId": "INC-1042"})
        listing = await client.call_tool("list_incidents", {})
        acknowledged = await client.call_tool("list_incidents", {"state": "acknowledged"})
        still_open = await client.call_tool("list_incidents", {"state": "open"})
        unknown = await client.call_tool("acknowledge_incident", {"incidentId": "INC-9999"})
    assert text_of(first) == f"ACKNOWLEDGED INC-1042 by {APPROVER}"
    assert re.fullmatch(rf"INC-1042 was already acknowledged by {re.escape(APPROVER)} at {STAMP}", text_of(again))
    assert not again.is_error and again.structured_content["acknowledged"] is False
    states = {entry["id"]: entry["state"] for entry in listing.structured_content["incidents"]}
    assert states == {"INC-1042": "acknowledged", "INC-1043": "open"}
    assert re.match(
        rf"INC-1042 \[SEV2, open, acknowledged by {re.escape(APPROVER)} at {STAMP}\] payments-api: ", text_of(listing)
    )
    assert [entry["id"] for entry in acknowledged.structured_content["incidents"]] == ["INC-1042"]
    assert [entry["id"] for entry in still_open.structured_content["incidents"]] == ["INC-1043"]
    assert unknown.is_error and text_of(unknown) == "No such incident: INC-9999"
    events = app.journal.activity("INC-1042")
    assert [(str(e.act), str(e.outcome), e.actor, e.text) for e in events] == [
        ("acknowledge", "done", APPROVER, "looking")
    ]


async def test_notes_are_journalled_bounded_and_shown_in_the_activity_log(make_app: AppFactory, era: str) -> None:
    app = make_app()
    async with connect(build_server(app), era) as client:
        added = await client.call_tool("add_incident_note", {"incidentId": "INC-1043", "text": "rolled back 4.2"})
        too_long = await client.call_tool("add_incident_note", {"incidentId": "INC-1043", "text": "x" * 2001})
        acked = await client.call_tool("acknowledge_incident", {"incidentId": "INC-1043"})
        tool = await client.call_tool("get_incident_activity", {"incidentId": "INC-1043"})
        resource = text_of(await client.read_resource("incident://INC-1043/activity"))
        empty = text_of(await client.read_resource("incident://INC-1042/activity"))
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("incident://INC-9999/activity")
    assert text_of(added) == f"NOTE ADDED to INC-1043 by {APPROVER}"
    assert too_long.is_error
    assert text_of(too_long) == "NOTE NOT ADDED -- the note is 2001 characters long; a note is at most 2000"
    assert not acked.is_error
    lines = resource.splitlines()
    assert len(lines) == 2
    assert re.fullmatch(rf"{STAMP} note by {re.escape(APPROVER)}: rolled back 4\.2", lines[0])
    assert re.fullmatch(rf"{STAMP} acknowledge by {re.escape(APPROVER)}", lines[1])
    assert text_of(tool) == resource
    assert [(e["act"], e["outcome"], e["text"]) for e in tool.structured_content["events"]] == [
        ("note", "done", "rolled back 4.2"),
        ("acknowledge", "done", ""),
    ]
    assert empty == "No activity recorded for INC-1042 on this desk yet."
    assert unknown.value.message == "No such incident: INC-9999"
    assert len(app.journal.activity("INC-1043")) == 2  # the refused note left nothing behind


async def test_two_desks_on_one_journal_file_see_only_their_own_events(
    make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    """The sample desk and a copy of it in a data directory share the journal file (the default desk names differ:
    one is the sample, the other its folder); each sees only its own restarts, notes and acknowledgements."""
    copy = tmp_path / "copy"
    shutil.copytree(bundled_sample_data(), copy)
    sample, other = make_app(), make_app(data_dir=copy)
    assert sample.journal.desk != other.journal.desk
    async with connect(build_server(sample), era, elicitation_callback=approve()) as client:
        await client.call_tool("restart_service", {"service": "payments-api"})
        await client.call_tool("acknowledge_incident", {"incidentId": "INC-1042"})
        await client.call_tool("add_incident_note", {"incidentId": "INC-1042", "text": "sample desk's note"})
    async with connect(build_server(other), era) as client:
        audit = text_of(await client.call_tool("get_audit_log", {}))
        activity = text_of(await client.read_resource("incident://INC-1042/activity"))
        listing = await client.call_tool("list_incidents", {})
        acked = text_of(await client.call_tool("acknowledge_incident", {"incidentId": "INC-1042"}))
    assert audit == "no decisions recorded yet"
    assert activity == "No activity recorded for INC-1042 on this desk yet."
    assert {entry["state"] for entry in listing.structured_content["incidents"]} == {"open"}
    assert acked.startswith("ACKNOWLEDGED INC-1042")
    assert [str(d.outcome) for d in sample.journal.recent()] == ["simulated", "approved"]
    assert [str(e.act) for e in sample.journal.activity("INC-1042")] == ["note", "acknowledge"]
    assert [str(e.act) for e in other.journal.activity("INC-1042")] == ["acknowledge"]


async def test_desk_name_setting_names_the_desk(make_app: AppFactory, tmp_path: Path) -> None:
    first = make_app(desk_name="team-a")
    second = make_app(desk_name="team-a")
    third = make_app(desk_name="team-b")
    first.journal.record_event(Event("ignored", "INC-1042", Act.NOTE, Outcome.DONE, "os:alice", "hello"))
    assert [e.text for e in second.journal.activity("INC-1042")] == ["hello"]
    assert [e.desk for e in second.journal.activity("INC-1042")] == ["team-a"]  # written as the journal's desk
    assert third.journal.activity("INC-1042") == []


_VERSION_1 = """
CREATE TABLE decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    service TEXT NOT NULL,
    outcome TEXT NOT NULL,
    ticket TEXT,
    approver TEXT NOT NULL,
    protocol_era TEXT NOT NULL,
    exit_status INTEGER,
    detail TEXT NOT NULL DEFAULT '',
    nonce TEXT UNIQUE
)
"""


def test_a_version_1_sqlite_journal_is_upgraded_in_place_without_losing_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(_VERSION_1)
        for n in range(3):
            conn.execute(
                "INSERT INTO decisions (time, service, outcome, ticket, approver, protocol_era, nonce) "
                "VALUES (?, 'payments-api', 'approved', ?, 'os:alice', '2025-11-25', ?)",
                (f"2026-11-2{n}T10:00:00+00:00", f"CHG-{n}", f"nonce-{n}"),
            )
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    journal = AuditJournal(path, desk="upgraded")
    kept = journal.recent(10)
    assert [d.ticket for d in kept] == ["CHG-2", "CHG-1", "CHG-0"]
    assert journal.count() == 3
    journal.record(Decision("payments-api", Outcome.DECLINED, None, "os:bob", "2025-11-25"))
    journal.record_event(Event("upgraded", "INC-1042", Act.ACKNOWLEDGE, Outcome.DONE, "os:bob"))
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        assert conn.execute("SELECT COUNT(*) FROM decisions WHERE desk = 'upgraded'").fetchone()[0] == 4
    assert AuditJournal(path, desk="someone-else").recent(10) == []
    # Opening it again (already upgraded) changes nothing.
    assert len(AuditJournal(path, desk="upgraded").recent(10)) == 4


async def test_the_timeline_and_the_postmortem_include_the_activity_log(make_app: AppFactory, era: str) -> None:
    app = make_app()
    async with connect(build_server(app), era, elicitation_callback=approve("CHG-3")) as client:
        plain = await client.get_prompt("postmortem", {"incidentId": "INC-1043"})
        await client.call_tool("acknowledge_incident", {"incidentId": "INC-1043"})
        await client.call_tool("add_incident_note", {"incidentId": "INC-1043", "text": "scaled search-api to 6"})
        await client.call_tool("resolve_incident", {"incidentId": "INC-1043", "resolution": "latency back under SLO"})
        drawn = await client.call_tool("show_incident_timeline", {"incidentId": "INC-1043"})
        prompt = await client.get_prompt("postmortem", {"incidentId": "INC-1043"})
    assert [a["kind"] for a in drawn.structured_content["acts"]] == ["acknowledge", "note", "resolve"]
    (acts_line,) = [line for line in text_of(drawn).splitlines() if line.startswith("acts: ")]
    assert acts_line.count(f"by {APPROVER}") == 3 and "resolve by" in acts_line and "CHG-3" in acts_line
    plain_text = plain.messages[0].content.text  # type: ignore[union-attr]
    text = prompt.messages[0].content.text  # type: ignore[union-attr]
    assert "journalled" not in plain_text  # nothing done yet: the plain prompt and the sentence on saving it
    save = "\n\n" + SAVE_SENTENCE.format(id="INC-1043")
    assert plain_text.endswith(save) and text.endswith(save)
    journalled = "\n\nWhat the on-call desk journalled for this incident (who did what, UTC):\n"
    assert text.startswith(plain_text.removesuffix(save) + journalled)
    assert "note by" in text and "scaled search-api to 6" in text and "resolve by" in text and "CHG-3" in text


def _copy_of_the_sample(root: Path) -> Path:
    shutil.copytree(bundled_sample_data(), root)
    return root


def _archive(root: Path) -> Path:
    """A second folder of incidents, for a source added to the config."""
    entry = root / "incidents" / "OPS-1"
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        'title = "archived"\nservice = "db"\nseverity = "SEV3"\nstatus = "open"\nopened = 2026-11-30\n'
    )
    (entry / "log.txt").write_text("archived\n")
    return root


EXPECTED_ACTS = [
    "acknowledge:",
    "note:pool raised to 64",
    "postmortem:postmortem saved (16 characters): postmortem://INC-1042",
]


async def _acts_on_inc_1042(client: Any) -> None:
    await client.call_tool("acknowledge_incident", {"incidentId": "INC-1042"})
    await client.call_tool("add_incident_note", {"incidentId": "INC-1042", "text": "pool raised to 64"})
    saved = await client.call_tool("save_postmortem", {"incidentId": "INC-1042", "markdown": "# Pool exhausted"})
    assert not saved.is_error, text_of(saved)


async def _what_inc_1042_shows(client: Any) -> tuple[list[str], str, str]:
    activity = await client.call_tool("get_incident_activity", {"incidentId": "INC-1042"})
    listing = await client.call_tool("list_incidents", {"state": "acknowledged"})
    postmortem = text_of(await client.read_resource("postmortem://INC-1042"))
    acts = [f"{e['act']}:{e['text']}" for e in activity.structured_content["events"]]
    return acts, text_of(listing), postmortem


async def test_adding_an_incident_source_keeps_the_desk_and_its_acts(
    make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    """The desk's identity used to list its sources: adding one renamed it, and its acknowledgements, notes and
    postmortems vanished from every answer."""
    data = _copy_of_the_sample(tmp_path / "desk")
    archive = _archive(tmp_path / "archive")
    before = make_app(data_dir=data, incident_sources=[{"kind": "folder"}])
    async with connect(build_server(before), era) as client:
        await _acts_on_inc_1042(client)
    added = [{"kind": "folder"}, {"kind": "folder", "name": "archive", "path": str(archive)}]
    after = make_app(data_dir=data, incident_sources=added)
    async with connect(build_server(after), era) as client:
        acts, acknowledged, postmortem = await _what_inc_1042_shows(client)
        archived = text_of(await client.call_tool("list_incidents", {}))
    assert "OPS-1" in archived, "the added source serves"
    assert sorted(acts) == EXPECTED_ACTS
    assert "INC-1042" in acknowledged
    assert "# Pool exhausted" in postmortem


async def test_a_journal_written_under_the_old_derived_name_keeps_its_desk(
    make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    """A journal from before: rows under ``<data_dir> [folder]`` and ``<data_dir> [archive, folder]``, as the
    desk was named while it had those sources; the desk takes them over at start, and a postmortem both names
    hold keeps the newer one."""
    data = _copy_of_the_sample(tmp_path / "desk")
    base = str(data.resolve())
    before_path = tmp_path / "audit" / "audit.sqlite3"
    for old_name, text in ((f"{base} [folder]", "first"), (f"{base} [archive, folder]", "second")):
        journal = AuditJournal(before_path, desk=old_name)
        journal.record_event(Event("ignored", "INC-1042", Act.NOTE, Outcome.DONE, "os:alice", text))
        memory = SqliteMemory(before_path, old_name)
        memory.save_postmortem(Postmortem("INC-1042", f"# {text} postmortem", "os:alice", datetime.now(UTC)))
    stranger = AuditJournal(before_path, desk="/elsewhere [folder]")
    stranger.record_event(Event("ignored", "INC-1042", Act.NOTE, Outcome.DONE, "os:bob", "not ours"))
    app = make_app(data_dir=data, audit_db=before_path)
    assert sorted(app.journal.adopted) == [f"{base} [archive, folder]", f"{base} [folder]"]
    async with connect(build_server(app), era) as client:
        activity = await client.call_tool("get_incident_activity", {"incidentId": "INC-1042"})
        postmortem = text_of(await client.read_resource("postmortem://INC-1042"))
    assert sorted(e["text"] for e in activity.structured_content["events"]) == ["first", "second"]
    assert "# second postmortem" in postmortem
    assert [e.text for e in stranger.activity("INC-1042")] == ["not ours"], "another desk's rows stay its own"
    assert make_app(data_dir=data, audit_db=before_path).journal.adopted == [], "taken over once"


async def test_a_rename_is_explicit(make_app: AppFactory, tmp_path: Path, era: str) -> None:
    old = make_app(desk_name="team-a")
    async with connect(build_server(old), era) as client:
        await _acts_on_inc_1042(client)
    renamed_silently = make_app(desk_name="team-b")
    assert renamed_silently.journal.activity("INC-1042") == [], "a new name alone is another desk"
    renamed = make_app(desk_name="team-b", desk_renamed_from=["team-a"])
    async with connect(build_server(renamed), era) as client:
        acts, acknowledged, postmortem = await _what_inc_1042_shows(client)
    assert sorted(acts) == EXPECTED_ACTS
    assert "INC-1042" in acknowledged and "# Pool exhausted" in postmortem
    assert make_app(desk_name="team-a").journal.activity("INC-1042") == []
