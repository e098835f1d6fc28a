"""The journal keeps bounded fields whatever a client sends, and its readers never load more than they show.

A red-team pass stored 20 refused answers carrying 10 MB tickets: a 200 MB journal, after which get_audit_log took
14 s and 0.7 GB. Every field is now cut (and marked as cut) on the way in, and cut again on the way out for rows
written before the bounds or by hand.
"""

from __future__ import annotations

import sqlite3
import tracemalloc
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from mcp_types import ErrorData

from incident_desk.cli.main import main as cli_main
from incident_desk.core.journal.audit import DEFAULT_DESK, FIELD_LIMITS, AuditJournal, Decision
from incident_desk.core.outcomes import Outcome
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import SERVICE, Operator, desk, rows

pytestmark = pytest.mark.anyio

HUGE = 1_000_000


def _huge(prefix: str) -> str:
    return prefix + "9" * (HUGE - len(prefix))


async def test_an_over_long_ticket_is_refused_with_its_own_text_and_journalled_cut(
    make_app: AppFactory, era: str
) -> None:
    app, server = desk(make_app)
    ticket = _huge("CHG-")
    async with connect(server, era, elicitation_callback=Operator("accept", {"confirm": True, "ticket": ticket})) as c:
        result = await c.call_tool("restart_service", {"service": SERVICE})
    assert text_of(result) == f"NOT RESTARTED -- the change ticket is too long ({HUGE} characters, at most 200)"
    assert not result.is_error
    (row,) = rows(app.journal)
    assert row.outcome == "no_ticket"
    assert row.ticket is not None and len(row.ticket) <= FIELD_LIMITS["ticket"]
    assert row.ticket.startswith("CHG-9999") and row.ticket.endswith(f"…[cut: {HUGE} characters]")
    assert result.structured_content is not None and result.structured_content["ticket"] == row.ticket


async def test_client_chosen_texts_cannot_grow_the_journal(make_app: AppFactory, tmp_path: Path) -> None:
    """Megabyte tickets and service names, a client error far longer than a reason: the journal stays small."""
    app, server = desk(make_app)
    unticked = Operator("accept", {"confirm": False, "ticket": _huge("CHG-")})

    async def failing(ctx: Any, params: Any) -> ErrorData:
        return ErrorData(code=-32603, message="form crashed: " + "9" * 20_000)

    for _ in range(5):
        async with connect(server, "legacy", elicitation_callback=unticked) as client:
            await client.call_tool("restart_service", {"service": SERVICE})
            await client.call_tool("restart_service", {"service": _huge("svc-")})
        async with connect(server, "legacy", elicitation_callback=failing) as client:
            await client.call_tool("restart_service", {"service": SERVICE})
    journal_bytes = sum(path.stat().st_size for path in app.settings.audit_path.parent.iterdir())
    assert journal_bytes < 512 * 1024, f"15 decisions took {journal_bytes} bytes"
    decisions = rows(app.journal)
    assert sorted({str(d.outcome) for d in decisions}) == ["client_error", "refused_unknown_service", "unticked"]
    for decision in decisions:
        for name, limit in FIELD_LIMITS.items():
            value = getattr(decision, name)
            assert value is None or len(value) <= limit, name
    assert any(d.ticket and d.ticket.endswith(f"…[cut: {HUGE} characters]") for d in decisions)
    assert any(d.service.endswith(f"…[cut: {HUGE} characters]") for d in decisions)
    assert any("…[cut: " in d.detail for d in decisions if d.outcome == "client_error")


def test_every_stored_field_is_cut_and_marked(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path / "audit.sqlite3")
    journal.record(
        Decision(
            service=_huge("s"),
            outcome=Outcome.FAILED,
            ticket=_huge("t"),
            approver=_huge("a"),
            protocol_era=_huge("e"),
            detail=_huge("d"),
        )
    )
    (back,) = journal.recent()
    for name, limit in FIELD_LIMITS.items():
        value = getattr(back, name)
        assert len(value) <= limit and value.endswith(f"…[cut: {HUGE} characters]"), name
        assert value[0] == name[0] if name != "protocol_era" else value[0] == "e"
    assert (tmp_path / "audit.sqlite3").stat().st_size < 64 * 1024


def test_a_nonce_is_never_cut(tmp_path: Path) -> None:
    """Cutting a nonce could make two approvals collide: one too long is refused, not stored."""
    journal = AuditJournal(tmp_path / "audit.sqlite3")
    with pytest.raises(ValueError, match="nonce of 65 characters"):
        journal.record(
            Decision(service="x", outcome=Outcome.APPROVED, ticket="T", approver="a", protocol_era="e", nonce="n" * 65)
        )
    assert journal.count() == 0


def _hand_written_journal(path: Path, count: int, size: int) -> None:
    """Rows as a journal written before the bounds (or edited by hand) may hold them: megabytes per field."""
    AuditJournal(path)
    with closing(sqlite3.connect(path)) as conn, conn:
        for index in range(count):
            # Written as the default desk: each desk reads only its own rows.
            conn.execute(
                "INSERT INTO decisions (time, service, outcome, ticket, approver, protocol_era, exit_status, detail, "
                "desk) VALUES (?, ?, 'no_ticket', ?, ?, ?, NULL, ?, ?)",
                (
                    "2026-01-01T00:00:00+00:00",
                    f"svc{index}-" + "s" * size,
                    "T" * size,
                    "a" * size,
                    "2025-11-25",
                    "d" * size,
                    DEFAULT_DESK,
                ),
            )


def test_reading_the_journal_loads_no_more_than_it_shows(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    _hand_written_journal(path, count=5, size=2_000_000)
    journal = AuditJournal(path)
    tracemalloc.start()
    try:
        decisions = journal.recent(50)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(decisions) == 5
    assert peak < 1_000_000, f"reading 5 rows peaked at {peak} bytes"
    for decision in decisions:
        assert decision.ticket is not None and decision.ticket.endswith("…[cut: over 200 characters]")
        assert len(decision.ticket) == FIELD_LIMITS["ticket"]
        assert len(decision.detail) == FIELD_LIMITS["detail"]


async def test_every_audit_reader_shows_oversized_rows_cut(
    make_server: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], era: str
) -> None:
    path = tmp_path / "audit.sqlite3"
    _hand_written_journal(path, count=3, size=2_000_000)
    server = make_server(audit_db=path, desk_name=DEFAULT_DESK)
    async with connect(server, era) as client:
        tool = await client.call_tool("get_audit_log", {"limit": 50})
        resource = text_of(await client.read_resource("audit://recent"))
    assert not tool.is_error
    assert len(tool.model_dump_json()) < 10_000
    assert len(resource) < 5_000
    for decision in tool.structured_content["decisions"]:
        assert decision["ticket"].endswith("…[cut: over 200 characters]")
    assert cli_main(["audit", "--audit-db", str(path)]) == 0
    assert len(capsys.readouterr().out) < 5_000
