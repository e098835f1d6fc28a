"""Incident memory: find_similar_incidents over every incident the desk served, save_postmortem, postmortem://{id}.

A generated corpus (tests/memory_corpus.py) of resolved incidents in many failure kinds, words and log shapes: the
held-out incidents of each kind find one of their kind in the top 3, on SQLite and on PostgreSQL. Memory outlives
the desk's process, the data directory's entry and the Alertmanager alert; two desks on one journal remember
apart; a saved postmortem round-trips and is pointed at; a read-only desk offers no way to write one.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import time
import uuid
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from incident_desk.app import DeskApp
from incident_desk.core.journal.memory import (
    _COMMON,
    MAX_QUERY_WORDS,
    SIGNATURE_HEAD_BYTES,
    Memory,
    SqliteMemory,
    normalise,
    query_words,
    signature_of,
    word_set,
)
from incident_desk.core.linear import LinearPattern
from incident_desk.core.outcomes import Outcome
from incident_desk.server import build_server
from tests.alertmanager import alert, needs_alertmanager, running_alertmanager
from tests.helpers import AppFactory, child_env, connect, synthetic_incidents, text_of
from tests.memory_corpus import KINDS, corpus, log_head
from tests.postgres_cluster import PASSWORD, Cluster, unavailable_reason
from tests.redact_corpus import ORDINARY_LINES, formats
from tests.restart_helpers import APPROVER
from tests.test_sources_alertmanager import STARTED, folder_desk, sources

pytestmark = pytest.mark.anyio
needs_postgres = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


def _held_out_hit_rate(memory: Memory) -> float:
    remembered, held_out = corpus()
    for case in remembered:
        memory.remember(case.incident)
    kind_of = {case.incident.incident_id: case.kind for case in remembered}
    hits = 0
    for case in held_out:
        new = case.incident
        top = memory.similar(" ".join((new.title, new.service, new.labels, new.signature)), None, 3)
        hits += any(kind_of[found.incident.incident_id] == case.kind for found in top)
    return hits / len(held_out)


def test_the_corpus_is_as_large_and_varied_as_promised() -> None:
    remembered, held_out = corpus()
    assert len(remembered) >= 300 and len(KINDS) >= 25
    assert {case.kind for case in held_out} == set(KINDS)
    assert all(case.incident.status == "resolved" and case.incident.resolution for case in remembered)


def test_signatures_strip_what_changes_between_runs() -> None:
    one = normalise("2026-01-02T03:04:05Z pool-12 timed out after 3000ms req=9f8e7d6c5b4a id 0xdeadbeef 10.0.0.7")
    two = normalise("2026-02-03T04:05:06Z pool-7 timed out after 45ms req=1a2b3c4d5e6f id 0xcafef00d 10.9.8.7")
    assert one == two
    assert signature_of(b"all good\nERROR disk full on /var\ninfo fine\n") == "error disk full on /var"


def test_the_words_of_a_text_are_what_the_word_pattern_finds() -> None:
    """query_words splits in C; what it keeps must be the pattern's matches, in order, on any text: log lines,
    secrets, digits before and inside words, one-letter runs, non-ASCII letters and bytes."""
    word = LinearPattern(rb"[a-z][a-z0-9]*[a-z0-9]")
    texts = [*ORDINARY_LINES, *(line for fmt in formats() for line in fmt.lines)]
    texts += ["9abc a1 b 7x9y 12ab34cd İstanbul straße x_y-z.q ÿabc\u00e9def", "a" * 5000 + " 3" + "b9" * 40]
    texts += ["".join(random.Random(seed).choice("ab9 _-.éİ\x00") for _ in range(300)) for seed in range(50)]
    for text in texts:
        data = normalise(text).encode("utf-8", "replace")
        found = [data[s[0][0] : s[0][1]].decode("ascii") for s in word.finditer(data)]
        expected = list(dict.fromkeys(w for w in found if w not in _COMMON and len(w) > 2))
        assert query_words(text, most=1_000_000) == expected, text
        assert query_words(text) == expected[:MAX_QUERY_WORDS], text
        assert word_set(text) == set(expected), text


def test_held_out_incidents_find_their_kind_in_the_top_three_on_sqlite(tmp_path: Path) -> None:
    assert _held_out_hit_rate(SqliteMemory(tmp_path / "journal.sqlite3", "corpus")) >= 0.9


@needs_postgres
def test_held_out_incidents_find_their_kind_in_the_top_three_on_postgres(postgres_cluster: Cluster) -> None:
    from incident_desk.core.journal.audit_pg import PostgresJournal
    from incident_desk.core.journal.memory_pg import PostgresMemory

    journal = PostgresJournal(postgres_cluster.new_database(f"memory_{uuid.uuid4().hex[:12]}"), PASSWORD, desk="corpus")
    try:
        assert _held_out_hit_rate(PostgresMemory(journal)) >= 0.9
    finally:
        journal.close()


def _folder(root: Path, entries: dict[str, tuple[str, str, str, str]]) -> Path:
    """incidents of (title, service, status, log) plus a resolution for resolved ones."""
    for incident_id, (title, service, status, log) in entries.items():
        entry = root / "incidents" / incident_id
        entry.mkdir(parents=True)
        resolution = 'resolution = "raised the memory limit to 2Gi"\n' if status == "resolved" else ""
        (entry / "incident.toml").write_text(
            f'title = "{title}"\nservice = "{service}"\nseverity = "SEV2"\nstatus = "{status}"\n'
            f"opened = 2026-01-0{len(incident_id) % 9 + 1}T00:00:00Z\n{resolution}"
        )
        (entry / "log.txt").write_text(log)
    return root


def _oom_desk(root: Path) -> Path:
    return _folder(
        root,
        {
            "INC-1": ("Workers OOMKilled", "billing", "resolved", log_head("oom", _rng(1)).decode()),
            "INC-2": ("No space left", "billing", "resolved", log_head("disk_full", _rng(2)).decode()),
            "INC-3": ("Memory limit exceeded again", "billing", "open", log_head("oom", _rng(3)).decode()),
        },
    )


def _rng(seed: int) -> random.Random:
    return random.Random(seed)


async def _served(app: DeskApp) -> None:
    await app.listing()
    assert app.memory is not None and app.memory.wait_idle()


async def test_similar_incidents_name_what_fixed_them_with_text_and_structure(
    make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    app = make_app(data_dir=_oom_desk(tmp_path / "desk"))
    await _served(app)
    async with connect(build_server(app), era) as client:
        similar = await client.call_tool("find_similar_incidents", {"incidentId": "INC-3", "limit": 2})
        by_words = await client.call_tool("find_similar_incidents", {"query": "ENOSPC no space left on device"})
        nothing = await client.call_tool("find_similar_incidents", {})
        unknown = await client.call_tool("find_similar_incidents", {"incidentId": "INC-404"})
    assert not similar.is_error, text_of(similar)
    found = similar.structured_content["incidents"]
    assert found[0]["incident_id"] == "INC-1"
    assert "INC-3" not in [entry["incident_id"] for entry in found]
    assert found[0]["resolution"] == "raised the memory limit to 2Gi"
    lines = text_of(similar).splitlines()
    assert lines[0] == "Past incidents like INC-3, best first:"
    assert lines[1].startswith("INC-1 [resolved, opened ") and "fixed: raised the memory limit to 2Gi" in lines[1]
    assert by_words.structured_content["incidents"][0]["incident_id"] == "INC-2"
    assert nothing.is_error and text_of(nothing) == "Give incidentId or query: there is nothing to look for"
    assert unknown.is_error and text_of(unknown) == "No such incident: INC-404"


async def test_a_journal_resolution_restarts_and_time_to_resolve_are_remembered(
    make_app: AppFactory, tmp_path: Path
) -> None:
    from incident_desk.core.journal.activity import Act, Event
    from incident_desk.core.outcomes import Outcome

    app = make_app(data_dir=_oom_desk(tmp_path / "desk"))
    await _served(app)
    opened = (await app.incident("INC-1")).opened
    resolved_at = opened + timedelta(minutes=42)
    for act, text in ((Act.NOTE, "heap dump shows the image cache"), (Act.RESOLVE, "capped the image cache")):
        await app.record_event(
            Event(
                desk=app.desk_name,
                incident_id="INC-1",
                act=act,
                outcome=Outcome.DONE,
                actor="alice",
                text=text,
                time=resolved_at,
            )
        )
    assert app.memory is not None and app.memory.wait_idle()
    (first, *_) = await app.similar_incidents("OOMKilled memory", "INC-3", 3)
    assert first.incident.incident_id == "INC-1"
    assert first.incident.resolution == "capped the image cache"
    assert first.incident.resolve_seconds == 42 * 60
    assert "heap dump" in first.incident.notes


async def test_memory_survives_a_restart_and_the_incident_leaving_the_data_directory(
    make_app: AppFactory, tmp_path: Path
) -> None:
    desk = _oom_desk(tmp_path / "desk")
    await _served(make_app(data_dir=desk))
    for entry in (desk / "incidents" / "INC-1").iterdir():
        entry.unlink()
    (desk / "incidents" / "INC-1").rmdir()
    again = make_app(data_dir=desk)
    async with connect(build_server(again), "legacy") as client:
        similar = await client.call_tool("find_similar_incidents", {"incidentId": "INC-3"})
    assert similar.structured_content["incidents"][0]["incident_id"] == "INC-1"


async def test_two_desks_on_one_journal_keep_separate_memories(make_app: AppFactory, tmp_path: Path) -> None:
    team_a = make_app(data_dir=_oom_desk(tmp_path / "a"), desk_name="team-a")
    await _served(team_a)
    team_b = make_app(data_dir=synthetic_desk(tmp_path / "b"), desk_name="team-b")
    await _served(team_b)

    async def ids(app: DeskApp, query: str) -> set[str]:
        return {found.incident.incident_id for found in await app.similar_incidents(query, None, 5)}

    assert team_a.journal.location == team_b.journal.location
    assert {"INC-1", "INC-3"} <= await ids(team_a, "OOMKilled memory limit")
    assert await ids(team_b, "OOMKilled memory limit") == set()
    assert await ids(team_b, "redis connection refused") == {"B-1"}
    assert await ids(team_a, "redis connection refused") == set()


def synthetic_desk(root: Path) -> Path:
    return _folder(root, {"B-1": ("Redis connection refused", "cache", "open", "error redis refused\n")})


async def test_save_postmortem_round_trips_is_journalled_and_pointed_at(
    make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    app = make_app(data_dir=_oom_desk(tmp_path / "desk"))
    await _served(app)
    markdown = "# INC-1\n\n## Impact\nBilling workers restarted for 40 minutes.\n"
    async with connect(build_server(app), era) as client:
        saved = await client.call_tool("save_postmortem", {"incidentId": "INC-1", "markdown": markdown})
        read = text_of(await client.read_resource("postmortem://INC-1"))
        similar = await client.call_tool("find_similar_incidents", {"incidentId": "INC-3"})
        empty = await client.call_tool("save_postmortem", {"incidentId": "INC-1", "markdown": "  "})
        with pytest.raises(MCPError):
            await client.read_resource("postmortem://INC-2")
        prompt = await client.get_prompt("postmortem", {"incidentId": "INC-1"})
    assert not saved.is_error, text_of(saved)
    assert text_of(saved) == f"POSTMORTEM SAVED for INC-1 by {APPROVER}: postmortem://INC-1"
    assert read == markdown
    assert similar.structured_content["incidents"][0]["postmortem"] == "postmortem://INC-1"
    assert "postmortem postmortem://INC-1" in text_of(similar)
    assert empty.is_error and text_of(empty) == "POSTMORTEM NOT SAVED -- it is empty"
    events = app.journal.activity("INC-1")
    assert [(str(e.act), e.actor) for e in events] == [("postmortem", APPROVER)]
    prompt_text = prompt.messages[0].content.text  # type: ignore[union-attr]
    assert prompt_text.startswith("Write a blameless postmortem for the engineering team. Sections: impact, timeline")
    assert prompt_text.endswith("shown with similar incidents.") and "save_postmortem" in prompt_text


async def test_read_only_desk_hides_save_postmortem_but_still_remembers(make_app: AppFactory, tmp_path: Path) -> None:
    app = make_app(data_dir=_oom_desk(tmp_path / "desk"), read_only=True)
    await _served(app)
    async with connect(build_server(app), "legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        refused = await client.call_tool("save_postmortem", {"incidentId": "INC-1", "markdown": "x"})
        similar = await client.call_tool("find_similar_incidents", {"incidentId": "INC-3"})
        prompt = await client.get_prompt("postmortem", {"incidentId": "INC-1"})
    assert "save_postmortem" not in names and "find_similar_incidents" in names
    assert refused.is_error
    assert similar.structured_content["incidents"][0]["incident_id"] == "INC-1"
    assert "save_postmortem" not in prompt.messages[0].content.text  # type: ignore[union-attr]


@needs_alertmanager
async def test_an_alert_that_left_alertmanager_is_still_remembered(make_app: AppFactory, tmp_path: Path) -> None:
    (tmp_path / "am").mkdir()
    with running_alertmanager(tmp_path / "am") as manager:
        manager.post(
            alert("KafkaConsumerLag", starts=STARTED, service="billing", severity="critical", summary="lag growing")
        )
        desk = folder_desk(tmp_path / "desk")
        app = make_app(data_dir=desk, incident_sources=sources(manager, cache_seconds=0))
        await _served(app)
        (alert_id,) = [i.id for i in (await app.listing()).incidents.values() if i.source != "folder"]
        manager.post(
            alert(
                "KafkaConsumerLag",
                starts=STARTED,
                ends=datetime.now(UTC) - timedelta(seconds=1),
                service="billing",
                severity="critical",
            )
        )
        later = make_app(data_dir=desk, incident_sources=sources(manager, cache_seconds=0))  # the desk restarted
        listing = await later.listing()
        assert alert_id not in listing.incidents
        found = await later.similar_incidents("KafkaConsumerLag billing", None, 5)
    assert [item.incident.incident_id for item in found][:1] == [alert_id]
    assert found[0].incident.source != "folder" and "alertname=KafkaConsumerLag" in found[0].incident.labels


@pytest.mark.timing
async def test_remembering_thousands_of_incidents_never_holds_up_a_call(make_app: AppFactory, tmp_path: Path) -> None:
    app = make_app(data_dir=synthetic_incidents(tmp_path / "desk", 2000))
    async with connect(build_server(app), "legacy") as client:
        await client.call_tool("list_incidents", {})
        assert app.memory is not None
        slowest, pings_while_busy = 0.0, 0
        deadline = time.monotonic() + 120
        while app.memory.pending and time.monotonic() < deadline:
            began = time.perf_counter()
            await client.send_ping()
            slowest = max(slowest, time.perf_counter() - began)
            pings_while_busy += 1
            await anyio.sleep(0.02)  # a client pinging, not a busy loop holding the interpreter from the keeper
        assert app.memory.wait_idle(120)
    assert pings_while_busy > 0 and slowest < 0.5
    assert app.memory.memory.count() == 2000


@needs_postgres
async def test_replicas_of_a_team_desk_answer_the_same_and_keep_postmortems(
    make_app: AppFactory, postgres_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INCIDENT_DESK_AUDIT_DB_PASSWORD", PASSWORD)
    url = postgres_cluster.new_database(f"memory_{uuid.uuid4().hex[:12]}")
    desk = _oom_desk(tmp_path / "desk")
    first, second = make_app(data_dir=desk, audit_db=url), make_app(data_dir=desk, audit_db=url)
    other = make_app(data_dir=desk, audit_db=url, desk_name="another-team")
    try:
        await _served(first)
        async with connect(build_server(first), "legacy") as client:
            saved = await client.call_tool("save_postmortem", {"incidentId": "INC-1", "markdown": "# OOM\n"})
        assert not saved.is_error, text_of(saved)
        async with connect(build_server(second), "2026-07-28") as client:
            similar = await client.call_tool("find_similar_incidents", {"query": "OOMKilled memory limit"})
            read = text_of(await client.read_resource("postmortem://INC-1"))
        found = [entry["incident_id"] for entry in similar.structured_content["incidents"]]
        on_first = await first.past_incidents("OOMKilled memory limit", None, 2)
        assert found[:2] == [item.incident.incident_id for item in on_first]
        assert "INC-1" in found and read == "# OOM\n"
        assert await other.similar_incidents("OOMKilled memory limit", None, 5) == []
    finally:
        for app in (first, second, other):
            app.journal.close()


def test_memory_tables_join_an_existing_journal_without_touching_its_rows(tmp_path: Path) -> None:
    from incident_desk.core.journal.audit import AuditJournal, Decision

    path = tmp_path / "journal.sqlite3"
    journal = AuditJournal(path, desk="kept")
    journal.record(
        Decision(service="db", outcome=Outcome.EXECUTED, ticket="CHG-1", approver="a", protocol_era="legacy")
    )
    memory = SqliteMemory(path, "kept")
    SqliteMemory(path, "kept")  # opened again, as every start does: nothing is created twice
    again = AuditJournal(path, desk="kept")
    assert again.count() == 1 and again.recent(1)[0].ticket == "CHG-1"
    assert memory.count() == 0
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2


async def test_a_secret_in_the_first_error_lines_is_never_remembered(make_app: AppFactory, tmp_path: Path) -> None:
    token = "zyxwvutsrqponmlkjihgfedcbazyxwvu"  # letters only: normalising alone would keep it whole
    desk = _folder(
        tmp_path / "desk",
        {"INC-9": ("Auth proxy failing", "gateway", "open", f"ERROR upstream refused Authorization: Bearer {token}\n")},
    )
    app = make_app(data_dir=desk)
    await _served(app)
    async with connect(build_server(app), "legacy") as client:
        similar = await client.call_tool("find_similar_incidents", {"incidentId": "INC-9"})
    assert app.memory is not None
    remembered = app.memory.memory.recall("INC-9")
    assert remembered is not None and "upstream refused" in remembered.signature
    assert token not in remembered.signature and token not in str(similar.structured_content)
    unredacted = make_app(data_dir=desk, redact_secrets=False, desk_name="control")
    await _served(unredacted)
    assert unredacted.memory is not None
    control = unredacted.memory.memory.recall("INC-9")
    assert control is not None and token in control.signature  # what the redaction above kept out


def _desk_of_long_logs(root: Path, count: int) -> Path:
    """``count`` incidents whose logs fill the signature's whole head: remembering each is mostly redaction."""
    synthetic_incidents(root, count)
    line = "2026-01-01T00:00:00Z ERROR payments-api timeout talking to ledger after 3000ms token=abc123\n"
    head = line * (SIGNATURE_HEAD_BYTES // len(line) + 1)
    for number in range(count):
        (root / "incidents" / f"INC-{number}" / "log.txt").write_text(head)
    return root


def _rpc(request_id: int, method: str, params: dict[str, Any] | None = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})


@pytest.mark.subprocess
def test_a_desk_leaving_while_it_remembers_exits_cleanly(tmp_path: Path) -> None:
    """The client goes away while the memory is being written: the desk lets the incident in hand finish and
    exits 0. (A worker left inside the redactor's RE2 at shutdown aborted the process: SIGABRT, exit -6.)"""
    desk = _desk_of_long_logs(tmp_path / "desk", 300)
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "leaver", "version": "1"}}
    requests = [
        _rpc(1, "initialize", hello),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        _rpc(2, "tools/call", {"name": "list_incidents", "arguments": {}}),
    ]
    for attempt, writing_for in enumerate((0.1, 0.3, 0.6)):
        stderr_path = tmp_path / f"stderr-{attempt}.log"
        with stderr_path.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "incident_desk"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=tmp_path,
                env=child_env(tmp_path / "audit.sqlite3", INCIDENT_DESK_DATA_DIR=str(desk)),
            )
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("\n".join(requests) + "\n")
            process.stdin.flush()
            while (line := process.stdout.readline()) and json.loads(line).get("id") != 2:
                pass
            assert line, "the desk never answered list_incidents"
            time.sleep(writing_for)  # the memory's worker is redacting log heads by now, hundreds still to go
            process.stdin.close()
            process.stdout.read()
            process.stdout.close()
            returncode = process.wait(timeout=60)
        text = stderr_path.read_text()
        assert returncode == 0, text[-2000:]
        assert "terminate called" not in text
