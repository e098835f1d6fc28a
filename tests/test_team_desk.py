"""A desk for a team: replicas sharing one PostgreSQL journal (a real cluster, started by these tests).

Single-use approvals and one restart per service at a time hold across replicas, because the database enforces
them; a dead replica's lock goes with its connection; the journal's outages are refused clearly, and survived.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult, InputRequiredResult, InputResponses

from incident_desk.core.journal.audit import AuditError, Decision, DuplicateApproval
from incident_desk.core.journal.audit_pg import PostgresJournal
from incident_desk.core.journal.locks import ServiceBusy
from incident_desk.core.outcomes import Outcome
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import load_settings
from tests.helpers import ROOT, child_env, free_port, text_of
from tests.http_desk import run_desk
from tests.postgres_cluster import PASSWORD, Cluster, running_cluster, unavailable_reason
from tests.restart_helpers import SERVICE, Restarts, approve
from tests.restart_helpers import restarts_fixture as restarts_fixture

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.http,
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]

SEALING_KEY = "shared-sealing-key-for-the-team-desk-0001"


@pytest.fixture
def journal_url(postgres_cluster: Cluster) -> str:
    """A database of its own per test, on the shared postgres_cluster."""
    return postgres_cluster.new_database(f"desk_{uuid.uuid4().hex[:12]}")


def _journal(url: str) -> PostgresJournal:
    return PostgresJournal(url, PASSWORD)


def _replica_env(url: str, restarts: Restarts, **extra: str) -> dict[str, str]:
    return {
        "INCIDENT_DESK_AUDIT_DB": url,
        "INCIDENT_DESK_AUDIT_DB_PASSWORD": PASSWORD,
        "INCIDENT_DESK_SEALING_KEY": SEALING_KEY,
        "INCIDENT_DESK_SERVICES": json.dumps(restarts.services()),
        **extra,
    }


def _restart_env(restarts: Restarts, *, sleep: float) -> str:
    return json.dumps(restarts.services(sleep=sleep))


@asynccontextmanager
async def _client(url: str, mode: str, **callbacks: Any) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **callbacks) as client,
    ):
        yield client


async def _approved_restart(url: str) -> None:
    """Ask the replica at ``url`` to restart the service, a human approving."""
    async with _client(url, "legacy", elicitation_callback=approve()) as client:
        await client.call_tool("restart_service", {"service": SERVICE})


async def _until_restarting(restarts: Restarts, replica: str) -> None:
    """Wait until the restart command runs (it then sleeps, holding the service)."""
    deadline = time.monotonic() + 20
    while not restarts.executions():
        assert time.monotonic() < deadline, f"{replica} never started the restart"
        await anyio.sleep(0.05)


def _outcomes(url: str) -> list[str]:
    journal = _journal(url)
    try:
        return [str(d.outcome) for d in reversed(journal.recent(500))]
    finally:
        journal.close()


# --- the journal itself ------------------------------------------------------------------------------------------


def test_the_postgres_journal_keeps_decisions_and_refuses_a_nonce_twice_across_replicas(journal_url: str) -> None:
    first, second = _journal(journal_url), _journal(journal_url)
    try:
        decision = Decision(SERVICE, Outcome.APPROVED, "CHG-1", "os:alice", "2026-07-28", nonce="n" * 32)
        first.record(decision)
        with pytest.raises(DuplicateApproval):
            second.record(decision)
        second.record(Decision(SERVICE, Outcome.REFUSED_STALE, "CHG-1", "os:alice", "2026-07-28", detail="replayed"))
        assert [str(d.outcome) for d in first.recent()] == ["refused_stale", "approved"]
        assert first.count() == 2 and first.schema_version() == 2
        first.probe()  # doctor's check: written, read back, rolled back
        assert second.count() == 2
    finally:
        first.close()
        second.close()


def test_a_journal_newer_than_this_desk_is_refused_naming_the_setting(
    postgres_cluster: Cluster, journal_url: str
) -> None:
    _journal(journal_url).close()
    with postgres_cluster.connect(journal_url.rsplit("/", 1)[1]) as conn:
        conn.execute("UPDATE incident_desk_schema SET version = 99")
    with pytest.raises(AuditError, match=r"\(setting audit_db\) has schema version 99, newer than"):
        _journal(journal_url)


def test_a_password_in_the_url_is_refused_without_echoing_it() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({"audit_db": "postgresql://desk:hunter2-secret@db.example/desk"})
    assert "must not carry a password" in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_no_password_is_a_clear_error_that_says_where_it_goes(journal_url: str) -> None:
    with pytest.raises(AuditError, match="no password was given: store it with `incident-desk key set"):
        PostgresJournal(journal_url)


async def test_one_service_lock_across_journals_says_who_holds_it_and_is_released(journal_url: str) -> None:
    first, second = _journal(journal_url), _journal(journal_url)
    try:
        async with first.locks.hold(SERVICE, "replica-a for os:alice"):
            with pytest.raises(ServiceBusy, match=r"held by replica-a for os:alice since \d{4}-"):
                async with second.locks.hold(SERVICE, "replica-b"):
                    pytest.fail("two holders of one service")
            async with second.locks.hold("search-api", "replica-b"):
                pass  # another service is free
        async with second.locks.hold(SERVICE, "replica-b"):
            pass
    finally:
        first.close()
        second.close()


async def test_a_released_service_is_free_at_once_while_the_old_lock_session_is_still_ending(
    postgres_cluster: Cluster, journal_url: str
) -> None:
    """The lock is unlocked before its connection closes: a closed session frees its locks only when its backend
    exits, which a busy machine delays. A SIGSTOPped backend, resumed a second later, stands in for that delay."""
    first, second = _journal(journal_url), _journal(journal_url)
    resume = threading.Timer(1.0, lambda: None)
    try:
        async with first.locks.hold(SERVICE, "replica-a"):
            with postgres_cluster.connect(journal_url.rsplit("/", 1)[1]) as conn:
                found = conn.execute(
                    "SELECT pid FROM pg_stat_activity "
                    "WHERE application_name = 'incident-desk restart lock' AND datname = current_database()"
                ).fetchone()
            assert found is not None, "no restart lock session in pg_stat_activity"
            backend = int(found[0])
            os.kill(backend, signal.SIGSTOP)
            resume = threading.Timer(1.0, os.kill, (backend, signal.SIGCONT))
            resume.start()
        async with second.locks.hold(SERVICE, "replica-b"):
            pass
    finally:
        if resume.is_alive():
            resume.join()  # the backend runs again before the test ends, whatever happened
        first.close()
        second.close()


# --- replicas over HTTP -------------------------------------------------------------------------------------------


async def test_an_approval_asked_by_one_replica_is_answered_through_another_once(
    tmp_path: Path, journal_url: str, restarts: Restarts
) -> None:
    env = _replica_env(journal_url, restarts)
    with (
        run_desk(tmp_path, "--stateless", name="a", **env) as replica_a,
        run_desk(tmp_path, "--stateless", name="b", **env) as replica_b,
    ):
        async with _client(replica_a.url, "2026-07-28", elicitation_callback=approve()) as client:
            asked = await client.session.call_tool("restart_service", {"service": SERVICE}, allow_input_required=True)
        assert isinstance(asked, InputRequiredResult)
        (key,) = asked.input_requests or {}
        answer: InputResponses = {key: ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-7"})}
        texts = []
        for replica in (replica_b, replica_a, replica_b):
            async with _client(replica.url, "2026-07-28", elicitation_callback=approve()) as client:
                result = await client.session.call_tool(
                    "restart_service", {"service": SERVICE}, input_responses=answer, request_state=asked.request_state
                )
            texts.append(text_of(result))
        asked_by, answered_by = replica_a.process.pid, replica_b.process.pid
        logged_by_a, logged_by_b = replica_a.logged_decisions(), replica_b.logged_decisions()
    assert texts[0].startswith("RESTARTED payments-api under CHG-7")
    assert texts[1:] == ["NOT RESTARTED -- this approval was already used"] * 2
    # Replica A only asked (and later refused the replay); B took the answer, journalled it and ran the restart.
    assert restarts.executions() == [SERVICE] and restarts.executed_by() == [answered_by] != [asked_by]
    assert logged_by_a == [("refused_stale", "CHG-7")]
    assert logged_by_b == [("approved", "CHG-7"), ("executed", "CHG-7"), ("refused_stale", "CHG-7")]
    assert _outcomes(journal_url) == ["approved", "executed", "refused_stale", "refused_stale"]


async def test_concurrent_restarts_through_two_replicas_run_exactly_one(
    tmp_path: Path, journal_url: str, restarts: Restarts
) -> None:
    env = _replica_env(journal_url, restarts, INCIDENT_DESK_SERVICES=_restart_env(restarts, sleep=3))
    results: list[str] = []
    with (
        run_desk(tmp_path, name="a", **env) as replica_a,
        run_desk(tmp_path, name="b", **env) as replica_b,
    ):

        async def restart_through(url: str) -> None:
            async with _client(url, "legacy", elicitation_callback=approve()) as client:
                results.append(text_of(await client.call_tool("restart_service", {"service": SERVICE})))

        async with anyio.create_task_group() as group:
            group.start_soon(restart_through, replica_a.url)
            group.start_soon(restart_through, replica_b.url)
    busy = [text for text in results if text.startswith("NOT RESTARTED")]
    done = [text for text in results if text.startswith("RESTARTED")]
    assert len(busy) == 1 and len(done) == 1, results
    # The refusal names the other replica's process and approver, and since when it holds the service.
    pids = {replica_a.process.pid, replica_b.process.pid}
    held = re.fullmatch(
        r"NOT RESTARTED -- a restart of payments-api is already running \(held by \S+ pid (\d+) for \S+ "
        r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\)",
        busy[0],
    )
    assert held is not None and int(held.group(1)) in pids, busy[0]
    assert restarts.executions() == [SERVICE]
    assert sorted(_outcomes(journal_url)) == ["approved", "executed", "refused_busy"]


async def test_a_replica_killed_mid_restart_keeps_its_decision_and_frees_the_service(
    tmp_path: Path, journal_url: str, restarts: Restarts
) -> None:
    env = _replica_env(journal_url, restarts, INCIDENT_DESK_SERVICES=_restart_env(restarts, sleep=4))
    with (
        run_desk(tmp_path, name="a", **env) as replica_a,
        run_desk(tmp_path, name="b", **env) as replica_b,
    ):
        async with anyio.create_task_group() as group:
            group.start_soon(_approved_restart, replica_a.url)
            await _until_restarting(restarts, "replica A")
            async with _client(replica_b.url, "legacy", elicitation_callback=approve("CHG-B1")) as client:
                held = text_of(await client.call_tool("restart_service", {"service": SERVICE}))
            replica_a.process.send_signal(signal.SIGKILL)
            replica_a.process.wait()
            group.cancel_scope.cancel()
        async with _client(replica_b.url, "legacy", elicitation_callback=approve("CHG-B2")) as client:
            after = text_of(await client.call_tool("restart_service", {"service": SERVICE}))
    assert held.startswith("NOT RESTARTED -- a restart of payments-api is already running (held by ")
    assert after.startswith("RESTARTED payments-api under CHG-B2"), after
    assert restarts.executions() == [SERVICE, SERVICE]
    # A's approval was committed before its command ran; its end died with it.
    assert _outcomes(journal_url) == ["approved", "refused_busy", "approved", "executed"]


def test_postgres_down_at_start_is_a_clear_error_naming_the_setting(tmp_path: Path, restarts: Restarts) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # a loopback port nothing listens on
    started = subprocess.run(
        [sys.executable, "-m", "incident_desk", "--transport", "http", "--port", "8999"],
        cwd=ROOT,
        env=child_env(tmp_path / "unused.sqlite3", **_replica_env(url, restarts)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2
    assert started.stdout == ""
    assert f"invalid setting audit_db: audit journal {url} (setting audit_db) cannot be reached" in started.stderr
    assert "Connection refused" in started.stderr
    assert PASSWORD not in started.stderr


async def test_postgres_down_mid_run_refuses_restarts_keeps_reads_and_recovers(
    tmp_path: Path, restarts: Restarts
) -> None:
    with running_cluster() as own:
        url = own.new_database("desk")
        with run_desk(tmp_path, name="a", **_replica_env(url, restarts)) as replica:
            async with _client(replica.url, "legacy", elicitation_callback=approve()) as client:
                before = text_of(await client.call_tool("restart_service", {"service": SERVICE}))
                own.stop()
                during = await client.call_tool("restart_service", {"service": SERVICE})
                listing = await client.call_tool("list_incidents", {})
                log = await client.read_resource("incident://INC-1043/log")
                own.start()
                after = text_of(await client.call_tool("restart_service", {"service": SERVICE}))
            assert PASSWORD not in replica.stderr()
        outcomes = _outcomes(url)
    assert before.startswith("RESTARTED payments-api under CHG-2291")
    assert during.is_error is True
    assert text_of(during).startswith("NOT RESTARTED -- the audit journal cannot be written, so nothing was done: ")
    assert listing.is_error is not True and "INC-1043" in text_of(listing)
    assert "search-api" in text_of(log)
    assert after.startswith("RESTARTED payments-api under CHG-2291"), after
    assert restarts.executions() == [SERVICE, SERVICE]
    assert outcomes == ["approved", "executed", "approved", "executed"]


def test_doctor_checks_the_postgres_journal(tmp_path: Path, postgres_cluster: Cluster, journal_url: str) -> None:
    def doctor(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "incident_desk", "doctor", "--audit-db", journal_url],
            cwd=ROOT,
            env=child_env(tmp_path / "unused.sqlite3", **env),
            capture_output=True,
            text=True,
            timeout=120,
        )

    healthy = doctor(INCIDENT_DESK_AUDIT_DB_PASSWORD=PASSWORD)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert (
        f"[ok] audit journal: {journal_url} (schema version 2, 0 decisions, a test row written and read back)"
        in healthy.stdout
    )
    assert _outcomes(journal_url) == []  # the doctor's row was rolled back
    with postgres_cluster.connect(journal_url.rsplit("/", 1)[1]) as conn:
        conn.execute("REVOKE INSERT ON decisions FROM PUBLIC")
        conn.execute("CREATE ROLE reader LOGIN PASSWORD 'reader-pw-1'")
        conn.execute("GRANT SELECT ON decisions, incident_desk_schema TO reader")
    unwritable = subprocess.run(
        [sys.executable, "-m", "incident_desk", "doctor", "--audit-db", journal_url.replace("postgres@", "reader@")],
        cwd=ROOT,
        env=child_env(tmp_path / "unused.sqlite3", INCIDENT_DESK_AUDIT_DB_PASSWORD="reader-pw-1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert unwritable.returncode != 0
    assert "[FAIL] audit journal" in unwritable.stdout and "cannot be written" in unwritable.stdout
    assert "reader-pw-1" not in unwritable.stdout + unwritable.stderr
    missing_password = doctor()
    assert missing_password.returncode != 0
    assert "no password was given" in missing_password.stdout


def _guide_commands() -> list[str]:
    """The team-desk guide's step-by-step commands (docs/team-desk.md), continuation lines joined."""
    guide = (ROOT / "docs" / "team-desk.md").read_text(encoding="utf-8")
    section = guide.split("Step by step on one Debian host", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [command.strip() for command in block.replace("\\\n", " ").splitlines()]


def test_the_team_desk_guides_config_and_doctor_lines_work_as_written(
    tmp_path: Path, postgres_cluster: Cluster
) -> None:
    """The guide's config file and its doctor check, as written: only `sudo`, /etc and the port are moved here."""
    commands = _guide_commands()
    (write_config,) = [command for command in commands if command.startswith("printf 'audit_db")]
    (doctor,) = [command for command in commands if "incident-desk doctor" in command]
    etc = tmp_path / "etc"
    etc.mkdir()

    def here(command: str) -> str:
        moved = command.replace("sudo ", "").replace("/etc/incident-desk", str(etc))
        return moved.replace("127.0.0.1:5432", f"127.0.0.1:{postgres_cluster.port}")

    guide_password = "guide-desk-password-9b2e"
    with postgres_cluster.connect() as conn:  # the guide's createuser and createdb
        conn.execute(f"CREATE ROLE desk LOGIN PASSWORD '{guide_password}'")
        conn.execute("CREATE DATABASE desk OWNER desk")
    secrets_env = etc / "secrets.env"  # what the guide's sudoedit step writes
    secrets_env.write_text(f"INCIDENT_DESK_AUDIT_DB_PASSWORD={guide_password}\n", encoding="utf-8")
    secrets_env.chmod(0o600)
    env = {name: value for name, value in os.environ.items() if not name.startswith("INCIDENT_DESK_")}
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `incident-desk` on PATH

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", here(command)], env=env, capture_output=True, text=True, timeout=120)

    written = run(write_config)
    assert written.returncode == 0, written.stderr
    checked = run(doctor)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (
        f"[ok] audit journal: postgresql://desk@127.0.0.1:{postgres_cluster.port}/desk (schema version 2, 0 decisions, "
        "a test row written and read back)" in checked.stdout
    )
    assert guide_password not in checked.stdout + checked.stderr
