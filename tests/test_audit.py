"""The audit journal keeps every decision, durably, and refuses files it does not own."""

from __future__ import annotations

import signal
import sqlite3
import stat
import subprocess
import sys
import threading
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import anyio
import pytest

from incident_desk.core.journal.audit import (
    SCHEMA_VERSION,
    AuditError,
    AuditJournal,
    Decision,
    DuplicateApproval,
    format_decisions,
)
from incident_desk.core.outcomes import RESTART_OUTCOMES, Outcome

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def journal(tmp_path: Path) -> AuditJournal:
    return AuditJournal(tmp_path / "state" / "audit.sqlite3")


def _decision(service: str = "checkout-api", **overrides: object) -> Decision:
    values: dict[str, object] = {
        "service": service,
        "outcome": "executed",
        "ticket": "CHG-2291",
        "approver": "alice",
        "protocol_era": "2025-11-25",
    }
    values.update(overrides)
    return Decision(**values)  # type: ignore[arg-type]


def test_round_trip_keeps_every_field(journal: AuditJournal) -> None:
    when = datetime(2026, 3, 1, 12, 30, 45, 123456, tzinfo=UTC)
    original = Decision(
        service="payments",
        outcome=Outcome.FAILED,
        ticket="CHG-7",
        approver="bob@example",
        protocol_era="2026-07-28",
        exit_status=3,
        detail="exit 3: port busy\nsecond line",
        time=when,
    )
    row_id = journal.record(original)
    (back,) = journal.recent()
    assert back.id == row_id
    assert back.service == "payments"
    assert back.outcome == "failed"
    assert back.ticket == "CHG-7"
    assert back.approver == "bob@example"
    assert back.protocol_era == "2026-07-28"
    assert back.exit_status == 3
    assert back.detail == "exit 3: port busy\nsecond line"
    assert back.time == when
    assert back.time.tzinfo is not None


def test_none_values_and_defaults_round_trip(journal: AuditJournal) -> None:
    journal.record(_decision(outcome="refused_no_channel", ticket=None))
    (back,) = journal.recent()
    assert back.ticket is None
    assert back.exit_status is None
    assert back.detail == ""
    assert abs(datetime.now(UTC) - back.time) < timedelta(minutes=1)


def test_recent_is_newest_first_and_limited(journal: AuditJournal) -> None:
    ids = [journal.record(_decision(f"svc-{i}")) for i in range(5)]
    assert ids == sorted(ids)
    assert [d.service for d in journal.recent()] == ["svc-4", "svc-3", "svc-2", "svc-1", "svc-0"]
    assert [d.service for d in journal.recent(limit=2)] == ["svc-4", "svc-3"]
    assert journal.count() == 5
    with pytest.raises(ValueError):
        journal.recent(limit=0)


def test_every_outcome_is_accepted_and_unknown_ones_are_not(journal: AuditJournal) -> None:
    for outcome in RESTART_OUTCOMES:
        journal.record(_decision(outcome=outcome.value))
    assert {d.outcome for d in journal.recent(limit=100)} == set(RESTART_OUTCOMES)
    # lock_broken: an operator broke a stuck restart lock; approval_requested, page_opened and
    # refused_self_approval: out-of-band steps; refused_limit: an act limit refused without asking; limits_reset: an
    # operator started a service's limits again
    assert len(RESTART_OUTCOMES) == 21
    with pytest.raises(ValueError, match="unknown audit outcome"):
        _decision(outcome="rebooted")


def test_times_are_normalised_to_utc_and_naive_times_refused() -> None:
    plus_two = timezone(timedelta(hours=2))
    decision = _decision(time=datetime(2026, 1, 1, 14, 0, tzinfo=plus_two))
    assert decision.time == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert decision.time.utcoffset() == timedelta(0)
    with pytest.raises(ValueError, match="timezone-aware"):
        _decision(time=datetime(2026, 1, 1, 12, 0))


def test_wal_mode_and_schema_version(journal: AuditJournal) -> None:
    with closing(sqlite3.connect(journal.path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_new_directories_and_file_are_owner_only(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path / "a" / "b" / "audit.sqlite3")
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600


def test_reopening_keeps_rows(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    AuditJournal(path).record(_decision())
    assert AuditJournal(path).count() == 1


def test_two_threads_writing_lose_nothing(journal: AuditJournal) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def writer(name: str) -> None:
        try:
            start.wait()
            for i in range(50):
                journal.record(_decision(f"{name}-{i}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert journal.count() == 100
    services = {d.service for d in journal.recent(limit=1000)}
    assert services == {f"{n}-{i}" for n in "ab" for i in range(50)}


async def test_usable_from_a_worker_thread(journal: AuditJournal) -> None:
    row_id = await anyio.to_thread.run_sync(journal.record, _decision())
    recent = await anyio.to_thread.run_sync(journal.recent)
    assert [d.id for d in recent] == [row_id]


def test_garbage_file_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    path.write_bytes(b"this is not a database, just some notes\n" * 200)
    with pytest.raises(AuditError, match="not an SQLite database") as info:
        AuditJournal(path)
    assert str(path) in str(info.value)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    AuditJournal(path)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.commit()
    with pytest.raises(AuditError, match="newer") as info:
        AuditJournal(path)
    assert str(path) in str(info.value)


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.commit()
    with pytest.raises(AuditError, match="not an incident-desk audit journal"):
        AuditJournal(path)


def test_directory_in_the_way_is_an_audit_error(tmp_path: Path) -> None:
    (tmp_path / "audit.sqlite3").mkdir()
    with pytest.raises(AuditError, match=r"audit\.sqlite3"):
        AuditJournal(tmp_path / "audit.sqlite3")


@pytest.mark.subprocess
@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")
def test_recorded_decision_survives_a_kill_right_after_record(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from incident_desk.core.journal.audit import AuditJournal, Decision\n"
        "journal = AuditJournal(Path(sys.argv[1]))\n"
        "journal.record(Decision(service='checkout-api', outcome='executed', ticket='CHG-1',\n"
        "                        approver='alice', protocol_era='2025-11-25', exit_status=0))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, timeout=30, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    (back,) = AuditJournal(path).recent()
    assert (back.service, back.outcome, back.ticket, back.exit_status) == (
        "checkout-api",
        "executed",
        "CHG-1",
        0,
    )


def test_format_empty() -> None:
    assert format_decisions([]) == "no decisions recorded yet"


def test_format_is_an_aligned_table() -> None:
    decisions = [
        _decision(
            "checkout-api",
            exit_status=0,
            time=datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC),
        ),
        _decision(
            "db",
            outcome="no_ticket",
            ticket=None,
            approver="a-much-longer-approver",
            time=datetime(2026, 3, 1, 12, 1, 0, tzinfo=UTC),
        ),
    ]
    lines = format_decisions(decisions).splitlines()
    assert lines[0].split() == ["time", "service", "outcome", "ticket", "approver", "era", "exit"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split() == [
        "2026-03-01",
        "12:00:05Z",
        "checkout-api",
        "executed",
        "CHG-2291",
        "alice",
        "2025-11-25",
        "0",
    ]
    assert lines[3].split()[2:] == ["db", "no_ticket", "-", "a-much-longer-approver", "2025-11-25", "-"]
    # Columns line up: every column starts at the same offset on every line.
    for header in ("service", "outcome", "ticket", "approver", "era", "exit"):
        offset = lines[0].index(header)
        for row in lines[2:]:
            assert row[offset - 2 : offset] == "  "
            assert row[offset] != " "


def test_format_neutralises_control_characters_and_long_values() -> None:
    table = format_decisions([_decision(ticket="CHG-1\n\x1b[31mFAKE ROW\x1b[0m", approver="x" * 200)])
    assert len(table.splitlines()) == 3
    assert "\x1b" not in table
    assert "x" * 200 not in table


def test_an_approval_nonce_is_single_use(journal: AuditJournal) -> None:
    journal.record(_decision(outcome="approved", nonce="n-1"))
    with pytest.raises(DuplicateApproval):
        journal.record(_decision(outcome="approved", nonce="n-1"))
    journal.record(_decision(outcome="declined"))
    journal.record(_decision(outcome="declined"))
    assert journal.count() == 3
    assert journal.recent(limit=3)[-1].nonce == "n-1"
