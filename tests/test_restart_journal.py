"""The restart journal: how its rows are read back, and what happens when it cannot be written.

A journal write failure is never hidden (and before approval, stops the restart); decisions are logged to a
client that asked; the get_audit_log tool twins audit://recent; `incident-desk audit` prints the rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp_types import TextContent

from incident_desk.cli.main import main as cli_main
from incident_desk.core.journal.audit import AuditJournal, Decision
from incident_desk.core.outcomes import Outcome
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import (
    APPROVER,
    SERVICE,
    Restarts,
    approve,
    desk,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
)

pytestmark = pytest.mark.anyio


async def test_decisions_are_told_to_a_client_that_asked_for_logs(make_server: Callable[..., Any]) -> None:
    told: list[Any] = []

    async def collect(params: Any) -> None:
        told.append(params.data)

    server = make_server()
    async with connect(server, "legacy", elicitation_callback=approve(), logging_callback=collect) as client:
        await client.set_logging_level("info")
        await client.call_tool("restart_service", {"service": SERVICE})
    assert [(d["event"], d["outcome"]) for d in told] == [
        ("restart decision", "approved"),
        ("restart decision", "simulated"),
    ]


@pytest.mark.parametrize("failing", ["approved", "executed"])
async def test_a_journal_that_cannot_be_written_is_never_hidden(
    make_app: AppFactory, restarts: Restarts, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    from incident_desk.core.journal.audit import AuditError

    app, server = desk(make_app, services=restarts.services())
    real_record = app.journal.record

    def record(decision: Decision) -> int:
        if decision.outcome == failing:
            raise AuditError("audit journal /x is not writable: disk full")
        return real_record(decision)

    monkeypatch.setattr(app.journal, "record", record)
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert all(isinstance(block, TextContent) for block in result.content)
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    assert result.is_error
    if failing == "approved":
        assert texts == [
            "NOT RESTARTED -- the audit journal cannot be written, so nothing was done: "
            "audit journal /x is not writable: disk full"
        ]
        assert restarts.executions() == []
    else:
        assert texts[0].startswith("RESTARTED payments-api under CHG-2291")
        assert texts[-1] == (
            "WARNING: the audit journal could not record this outcome: audit journal /x is not writable: disk full"
        )
        assert restarts.executions() == [SERVICE]


async def test_the_audit_log_tool_twins_the_resource(make_server: Callable[..., Any], era: str) -> None:
    server = make_server()
    async with connect(server, era, elicitation_callback=approve()) as client:
        await client.call_tool("restart_service", {"service": SERVICE})
        await client.call_tool("restart_service", {"service": "no-such"})
        tool = await client.call_tool("get_audit_log", {"limit": 2})
        resource = text_of(await client.read_resource("audit://recent"))
    decisions = tool.structured_content["decisions"]
    assert [(d["service"], d["outcome"]) for d in decisions] == [
        ("no-such", "refused_unknown_service"),
        (SERVICE, "simulated"),
    ]
    assert decisions[1]["ticket"] == "CHG-2291" and decisions[1]["approver"] == APPROVER

    def cells(table: str) -> list[list[str]]:
        return [line.split() for line in table.splitlines()[2:]]

    assert cells(text_of(tool)) == cells(resource)[:2]


def _journal_with(path: Path, *decisions: tuple[str, str | None, int | None]) -> AuditJournal:
    journal = AuditJournal(path)
    for outcome, ticket, exit_status in decisions:
        journal.record(
            Decision(
                service=SERVICE,
                outcome=Outcome(outcome),
                ticket=ticket,
                approver="os:alice",
                protocol_era="2026-07-28",
                exit_status=exit_status,
            )
        )
    return journal


def test_audit_command_prints_the_rows_newest_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "audit.sqlite3"
    _journal_with(path, ("declined", None, None), ("approved", "CHG-2291", None), ("failed", "CHG-2291", 3))
    assert cli_main(["audit", "--audit-db", str(path)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split() == ["time", "service", "outcome", "ticket", "approver", "era", "exit"]
    assert set(lines[1]) <= {"-", " "}
    assert [line.split()[2:] for line in lines[2:]] == [
        [SERVICE, "failed", "CHG-2291", "os:alice", "2026-07-28", "3"],
        [SERVICE, "approved", "CHG-2291", "os:alice", "2026-07-28", "-"],
        [SERVICE, "declined", "-", "os:alice", "2026-07-28", "-"],
    ]
    assert captured.err == ""

    assert cli_main(["audit", "--audit-db", str(path), "--limit", "1"]) == 0
    assert [line.split()[3] for line in capsys.readouterr().out.splitlines()[2:]] == ["failed"]


def test_audit_command_with_no_journal_creates_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nowhere" / "audit.sqlite3"
    assert cli_main(["audit", "--audit-db", str(path)]) == 0
    assert capsys.readouterr().out == f"no decisions recorded yet ({path} does not exist)\n"
    assert not path.exists() and not path.parent.exists()


def test_audit_command_names_a_broken_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "audit.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    assert cli_main(["audit", "--audit-db", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert str(path) in captured.err


def test_audit_command_reads_the_configured_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --audit-db the command reads the journal the server writes (INCIDENT_DESK_AUDIT_DB here)."""
    path = Path(os.environ["INCIDENT_DESK_AUDIT_DB"])
    _journal_with(path, ("timed_out", None, None))
    assert cli_main(["audit"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[3] == "timed_out"


@pytest.mark.parametrize(
    ("limit", "reason"),
    [("0", "0 is not between 1 and 500"), ("99999999999999999999", "is not between 1 and 500"), ("x", "whole number")],
)
def test_audit_command_refuses_a_limit_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], limit: str, reason: str
) -> None:
    """Like get_audit_log's bounds: a clear usage error, never a traceback from the journal."""
    path = tmp_path / "audit.sqlite3"
    _journal_with(path, ("declined", None, None))
    with pytest.raises(SystemExit) as exited:
        cli_main(["audit", "--audit-db", str(path), "--limit", limit])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert f"argument --limit: {limit if limit != 'x' else repr(limit)}" in captured.err
    assert reason in captured.err and "Traceback" not in captured.err
