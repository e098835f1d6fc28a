"""Restart locks on a team desk: a stopped holder keeps its service, a killed one frees it, an operator can see and
break a stuck lock; and nobody is asked to approve what the journal or the lock would refuse (a real PostgreSQL).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest

from incident_desk.core.journal.audit import Decision
from incident_desk.core.journal.audit_pg import PostgresJournal
from incident_desk.core.journal.locks import LockLost, ServiceBusy
from incident_desk.core.outcomes import Outcome
from tests.helpers import ROOT, AppFactory, child_env, connect, text_of
from tests.http_desk import run_desk
from tests.postgres_cluster import PASSWORD, Cluster, running_cluster, unavailable_reason
from tests.restart_helpers import SERVICE, Restarts, approve, desk, rows
from tests.restart_helpers import restarts_fixture as restarts_fixture
from tests.test_team_desk import _client, _replica_env, _restart_env, _until_restarting

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]

BUSY = "NOT RESTARTED -- a restart of payments-api is already running (held by "
JOURNAL_DOWN = "NOT RESTARTED -- the audit journal cannot be written, so nothing was done: audit journal "


@pytest.fixture
def journal_url(postgres_cluster: Cluster) -> str:
    return postgres_cluster.new_database(f"locks_{uuid.uuid4().hex[:12]}")


def _outcomes(url: str) -> list[Decision]:
    journal = PostgresJournal(url, PASSWORD)
    try:
        return list(reversed(journal.recent(500)))
    finally:
        journal.close()


def _commands_running(restarts: Restarts) -> list[int]:
    """The pids of restart commands still running (not counting the runner's guard shell around each)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if len(argv) > 1 and argv[1] == str(restarts.script).encode() and state != "Z":
            found.append(int(entry.name))
    return found


def _kill_commands(restarts: Restarts) -> None:
    for pid in _commands_running(restarts):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _locks_cli(tmp_path: Path, url: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    env = {"INCIDENT_DESK_AUDIT_DB": url, "INCIDENT_DESK_AUDIT_DB_PASSWORD": PASSWORD}
    return subprocess.run(
        [sys.executable, "-m", "incident_desk", "locks", *arguments],
        cwd=ROOT,
        env=child_env(tmp_path / "unused.sqlite3", **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- a stopped holder, a killed holder, a broken lock (replicas over HTTP) ------------------------------------------


@pytest.mark.http
async def test_a_stopped_holder_keeps_the_service_for_20s_and_a_killed_one_frees_it(
    tmp_path: Path, journal_url: str, restarts: Restarts
) -> None:
    """Measured at 0217149: B restarted 11.2 s after A was stopped, while A's command still ran."""
    env_a = _replica_env(journal_url, restarts, INCIDENT_DESK_SERVICES=_restart_env(restarts, sleep=120))
    env_b = _replica_env(journal_url, restarts)
    texts: list[str] = []
    asked_b = approve("CHG-B")
    try:
        with (
            run_desk(tmp_path, name="a", **env_a) as replica_a,
            run_desk(tmp_path, name="b", **env_b) as replica_b,
        ):
            async with anyio.create_task_group() as group:
                group.start_soon(_restart_quietly, replica_a.url)
                await _until_restarting(restarts, "replica A")
                replica_a.process.send_signal(signal.SIGSTOP)
                stopped_at = time.monotonic()
                try:
                    async with _client(replica_b.url, "legacy", elicitation_callback=asked_b) as client:
                        while time.monotonic() - stopped_at < 20:
                            texts.append(text_of(await client.call_tool("restart_service", {"service": SERVICE})))
                            await anyio.sleep(1)
                    executions_while_stopped = restarts.executions()
                    commands_while_stopped = _commands_running(restarts)
                finally:
                    replica_a.process.send_signal(signal.SIGKILL)  # a stopped process dies of SIGKILL too
                    replica_a.process.wait()
                group.cancel_scope.cancel()
            # A's command dies with A (the runner's guard), so it cannot overlap the restart B may now make.
            with anyio.fail_after(5):
                while _commands_running(restarts):
                    await anyio.sleep(0.05)
            async with _client(replica_b.url, "legacy", elicitation_callback=approve("CHG-B2")) as client:
                after = text_of(await client.call_tool("restart_service", {"service": SERVICE}))
            pids = [replica_a.process.pid, replica_b.process.pid]
    finally:
        _kill_commands(restarts)
    assert len(texts) >= 10, texts
    assert all(text.startswith(BUSY) for text in texts), texts
    assert f" pid {pids[0]} for " in texts[0]
    assert asked_b.asked == []  # refused before any human was asked
    # A's command was still running all along, and no second one ran.
    assert executions_while_stopped == [SERVICE] and len(commands_while_stopped) == 1
    assert after.startswith("RESTARTED payments-api under CHG-B2"), after
    assert restarts.executed_by() == pids
    outcomes = [str(d.outcome) for d in _outcomes(journal_url)]
    assert outcomes == ["approved", *["refused_busy"] * len(texts), "approved", "executed"]


async def _restart_quietly(url: str, texts: list[str] | None = None, ticket: str = "CHG-2291") -> None:
    async with _client(url, "legacy", elicitation_callback=approve(ticket)) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    if texts is not None:
        texts.append(text_of(result))


@pytest.mark.http
async def test_a_broken_lock_is_journalled_with_who_broke_it_and_its_holder_kills_its_restart(
    tmp_path: Path, journal_url: str, restarts: Restarts
) -> None:
    env_a = _replica_env(journal_url, restarts, INCIDENT_DESK_SERVICES=_restart_env(restarts, sleep=120))
    env_b = _replica_env(journal_url, restarts)
    texts_a: list[str] = []
    try:
        with (
            run_desk(tmp_path, name="a", **env_a) as replica_a,
            run_desk(tmp_path, name="b", **env_b) as replica_b,
        ):
            async with anyio.create_task_group() as group:
                group.start_soon(_restart_quietly, replica_a.url, texts_a)
                await _until_restarting(restarts, "replica A")
                listed = await anyio.to_thread.run_sync(_locks_cli, tmp_path, journal_url, "list")
                broken = await anyio.to_thread.run_sync(
                    _locks_cli, tmp_path, journal_url, "break", SERVICE, "--reason", "test: replica a is stuck"
                )
                broken_at = time.monotonic()
                with anyio.fail_after(30):
                    while not texts_a:
                        await anyio.sleep(0.05)
                answered_after = time.monotonic() - broken_at
            left_running = _commands_running(restarts)
            async with _client(replica_b.url, "legacy", elicitation_callback=approve("CHG-B")) as client:
                after = text_of(await client.call_tool("restart_service", {"service": SERVICE}))
            pid_a = replica_a.process.pid
            relisted = await anyio.to_thread.run_sync(_locks_cli, tmp_path, journal_url, "list")
    finally:
        _kill_commands(restarts)
    assert listed.returncode == 0, listed.stderr
    header, line = listed.stdout.splitlines()
    assert header.split() == ["service", "holder", "since", "session"]
    assert line.startswith("payments-api ") and f" pid {pid_a} for " in line, line
    assert broken.returncode == 0, broken.stderr
    user = f"os:{getpass.getuser()}"
    assert "broke the restart lock of payments-api (held by " in broken.stdout
    assert f"journalled as lock_broken by {user}" in broken.stdout
    # The holder saw its lock go at its next heartbeat and killed its command rather than run on beside another.
    (text_a,) = texts_a
    assert text_a.startswith("RESTART FAILED payments-api under CHG-2291 -- the restart lock of payments-api was lost")
    assert answered_after < 15, answered_after
    assert left_running == []
    assert after.startswith("RESTARTED payments-api under CHG-B"), after
    assert relisted.stdout.strip() == "no restart lock is held"
    decisions = _outcomes(journal_url)
    assert sorted(str(d.outcome) for d in decisions[:3]) == ["approved", "failed", "lock_broken"]
    (row,) = [d for d in decisions if d.outcome == "lock_broken"]
    assert (row.service, row.approver, row.protocol_era) == (SERVICE, user, "cli")
    assert row.detail.startswith(f"restart lock broken by {user}: it was held by ")
    assert row.detail.endswith("reason: test: replica a is stuck")
    (failed,) = [d for d in decisions if d.outcome == "failed"]
    assert failed.detail.startswith("the restart lock was lost (its database connection failed")
    assert [str(d.outcome) for d in decisions[3:]] == ["approved", "executed"]


def test_locks_say_when_nothing_is_held_and_refuse_a_break_without_a_reason(tmp_path: Path, journal_url: str) -> None:
    PostgresJournal(journal_url, PASSWORD).close()
    listed = _locks_cli(tmp_path, journal_url, "list")
    assert (listed.returncode, listed.stdout.strip()) == (0, "no restart lock is held")
    nothing = _locks_cli(tmp_path, journal_url, "break", SERVICE, "--reason", "just in case")
    assert nothing.returncode == 1
    assert "no restart lock of payments-api is held; nothing was broken" in nothing.stderr
    blank = _locks_cli(tmp_path, journal_url, "break", SERVICE, "--reason", "  ")
    assert blank.returncode == 2 and "--reason is required" in blank.stderr
    assert _outcomes(journal_url) == []
    sqlite = _locks_cli(tmp_path, str(tmp_path / "audit.sqlite3"), "list")
    assert sqlite.returncode == 1
    assert "has no shared restart locks" in sqlite.stderr and "ends with that process" in sqlite.stderr


async def test_no_timeout_of_the_database_s_defaults_ends_a_held_lock(
    postgres_cluster: Cluster, journal_url: str
) -> None:
    """A stopped holder sends no heartbeat; a database default like idle_session_timeout must not end its lock."""
    database = journal_url.rsplit("/", 1)[1]
    with postgres_cluster.connect() as conn:
        conn.execute(f"ALTER DATABASE \"{database}\" SET idle_session_timeout = '500ms'")
        conn.execute(f"ALTER DATABASE \"{database}\" SET statement_timeout = '500ms'")
    journal = PostgresJournal(journal_url, PASSWORD)
    try:
        async with journal.locks.hold(SERVICE, "replica-a"):
            await anyio.sleep(4)  # two heartbeats, each more than idle_session_timeout after the last statement
            held = await anyio.to_thread.run_sync(journal.held_locks)
    finally:
        journal.close()
    assert [(lock.service, lock.holder.who) for lock in held] == [(SERVICE, "replica-a")]


async def test_a_lock_lost_while_held_cancels_the_body(postgres_cluster: Cluster, journal_url: str) -> None:
    journal = PostgresJournal(journal_url, PASSWORD)
    cancelled = False
    try:
        with pytest.raises(LockLost, match=r"the restart lock of payments-api was lost while the restart ran \("):
            async with journal.locks.hold(SERVICE, "replica-a") as holding:
                assert await anyio.to_thread.run_sync(journal.break_lock, SERVICE) is not None
                try:
                    await anyio.sleep(30)
                except anyio.get_cancelled_exc_class():
                    cancelled = True
                    raise
        assert cancelled and holding.lost is not None
        assert await journal.locks.holder(SERVICE) is None
    finally:
        journal.close()


async def test_a_body_that_finished_despite_a_lost_lock_keeps_its_result(journal_url: str) -> None:
    """The last steps of a restart (journalling its outcome) are shielded: when they finish, what happened stands."""
    journal = PostgresJournal(journal_url, PASSWORD)
    try:
        async with journal.locks.hold(SERVICE, "replica-a") as holding:
            assert await anyio.to_thread.run_sync(journal.break_lock, SERVICE) is not None
            with anyio.CancelScope(shield=True):
                await anyio.sleep(4)  # the heartbeat notices meanwhile
        assert holding.lost is not None and holding.lost.startswith("its database connection failed")
    finally:
        journal.close()


async def _claim(
    journal: PostgresJournal, name: str, winners: list[str], losers: list[str], release: anyio.Event
) -> None:
    try:
        async with journal.locks.hold(SERVICE, name):
            winners.append(name)
            await release.wait()
    except ServiceBusy as busy:
        losers.append(busy.holder.who)


async def test_a_refusal_always_names_the_holder_that_won_the_race(journal_url: str) -> None:
    """Rivals claiming at once: the loser names the winner, never a previous holder or 'another replica'."""
    journals = [PostgresJournal(journal_url, PASSWORD) for _ in range(3)]
    wrong: list[tuple[str, str]] = []
    try:
        for round_ in range(15):
            winners: list[str] = []
            losers: list[str] = []
            release = anyio.Event()
            async with anyio.create_task_group() as group:
                for number, journal in enumerate(journals):
                    name = f"round {round_} rival {number}"
                    group.start_soon(_claim, journal, name, winners, losers, release)
                with anyio.fail_after(20):
                    while len(winners) + len(losers) < len(journals):
                        await anyio.sleep(0.01)
                release.set()
            assert len(winners) == 1, (winners, losers)
            wrong += [(winners[0], named) for named in losers if named != winners[0]]
    finally:
        for journal in journals:
            journal.close()
    assert wrong == []


# --- ask only when able (in-process, both eras) ---------------------------------------------------------------------


@pytest.mark.timing
async def test_with_postgres_down_nobody_is_asked_and_the_refusal_names_the_journal(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    """Measured at 0217149: the form was put in front of the human, then the restart refused."""
    with running_cluster() as own:
        url = own.new_database("desk")
        app, server = desk(make_app, services=restarts.services(), audit_db=url, audit_db_password=PASSWORD)
        try:
            own.stop()
            operator = approve()
            started = time.monotonic()
            async with connect(server, era, elicitation_callback=operator) as client:
                result = await client.call_tool("restart_service", {"service": SERVICE})
                audit = await client.call_tool("get_audit_log", {})
            took = time.monotonic() - started
        finally:
            app.journal.close()
    assert operator.asked == []
    assert result.is_error is True
    text = text_of(result)
    assert text.startswith(f"{JOURNAL_DOWN}{url} cannot be reached: the database is down or unreachable ("), text
    assert "Connection refused" in text and PASSWORD not in text
    assert audit.is_error is True
    assert text_of(audit).startswith(f"audit journal {url} cannot be read: the database is down or unreachable (")
    assert took < 4.5, took  # both answers; each waited about 1 s where get_audit_log alone took 5 s
    assert restarts.executions() == []


@pytest.mark.timing
async def test_get_audit_log_with_postgres_down_answers_within_two_seconds(make_app: AppFactory) -> None:
    with running_cluster() as own:
        url = own.new_database("desk")
        app, server = desk(make_app, audit_db=url, audit_db_password=PASSWORD)
        try:
            async with connect(server, "legacy") as client:
                assert (await client.call_tool("get_audit_log", {})).is_error is not True
                own.stop()
                started = time.monotonic()
                audit = await client.call_tool("get_audit_log", {"limit": 5})
                took = time.monotonic() - started
        finally:
            app.journal.close()
    assert audit.is_error is True
    assert f"audit journal {url} cannot be read: the database is down or unreachable" in text_of(audit)
    assert took < 2.5, took  # 5.0 s at 0217149


async def test_a_service_held_by_another_replica_is_refused_before_anyone_is_asked(
    make_app: AppFactory, restarts: Restarts, journal_url: str, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services(), audit_db=journal_url, audit_db_password=PASSWORD)
    other = PostgresJournal(journal_url, PASSWORD)
    operator = approve()
    try:
        async with (
            other.locks.hold(SERVICE, "replica-b for os:bob"),
            connect(server, era, elicitation_callback=operator) as client,
        ):
            result = await client.call_tool("restart_service", {"service": SERVICE})
        decisions = rows(app.journal)
    finally:
        other.close()
        app.journal.close()
    assert operator.asked == []
    assert result.is_error is True and text_of(result).startswith(BUSY + "replica-b for os:bob since ")
    (row,) = decisions
    assert (row.outcome, row.ticket) == ("refused_busy", None)
    assert row.detail.endswith("; nobody was asked")
    assert restarts.executions() == []


@pytest.mark.parametrize("ticket", ["CHG-1\x00", "\x00"])
async def test_a_nul_in_a_ticket_on_postgres_is_refused_with_a_journal_row(
    make_app: AppFactory, restarts: Restarts, journal_url: str, ticket: str
) -> None:
    """Measured at 0217149: refused as 'the audit journal cannot be written', and no row."""
    app, server = desk(make_app, services=restarts.services(), audit_db=journal_url, audit_db_password=PASSWORD)
    try:
        async with connect(server, "legacy", elicitation_callback=approve(ticket)) as client:
            result = await client.call_tool("restart_service", {"service": SERVICE})
            unknown = await client.call_tool("restart_service", {"service": "pay\x00ments"})
        decisions = rows(app.journal)
    finally:
        app.journal.close()
    assert text_of(result) == "NOT RESTARTED -- a change ticket is required"
    assert text_of(unknown).startswith("No such service: pay\x00ments.")
    assert [(str(d.outcome), d.service, d.ticket) for d in decisions] == [
        # A ticket is kept text: masked, its control characters visible marks (issue 42), storable on PostgreSQL.
        ("no_ticket", SERVICE, ticket.replace("\x00", "\u2400")),
        ("refused_unknown_service", "pay\\x00ments", None),
    ]
    assert restarts.executions() == []


def test_journal_fields_escape_what_postgres_cannot_store() -> None:
    decision = Decision("a\x00b", Outcome.APPROVED, "t\ud800", "os:x", "2025-11-25", detail="x\x00")
    # A detail is kept text: its control characters become visible marks (issue 42), storable too.
    assert (decision.service, decision.ticket, decision.detail) == ("a\\x00b", "t\\ud800", "x\u2400")
    assert json.dumps(decision.service)  # a plain string, storable anywhere
