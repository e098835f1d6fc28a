"""Runbook actions run on an incident's service while it was open are in its activity log
(``get_incident_activity``, ``incident://{id}/activity``) and in its postmortem prompt (issue 39): who approved,
under which ticket, which action, how it ended; what the journal gives back is masked and made one line, and a
restart's output cannot pass for an action. Both eras."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from incident_desk.core.journal.audit import Decision
from incident_desk.core.outcomes import Outcome
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import (
    APPROVER,
    SERVICE,
    Restarts,
    approve,
    desk,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
    rows,
)
from tests.service_action_helpers import Flush, flush_fixture  # noqa: F401 -- the `flush` fixture

pytestmark = pytest.mark.anyio

INCIDENT = "INC-1042"  # the sample desk's incident on payments-api
JOURNALLED = "What the on-call desk journalled for this incident (who did what, UTC):\n"
SECRET = "sk_live_abcdefghijklmnopqrstuvwx"


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _services(flush: Flush, restarts: Restarts) -> dict[str, Any]:
    services = flush.services(restarts)
    services[SERVICE]["actions"]["fail"] = {
        "description": "Fails",
        "argv": [sys.executable, "-c", "import sys; sys.exit(3)"],
    }
    return services


async def test_actions_run_are_in_the_activity_log_and_the_postmortem(
    make_app: AppFactory, flush: Flush, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=_services(flush, restarts))
    async with connect(server, era, elicitation_callback=approve()) as client:
        before = text_of(await client.call_tool("get_incident_activity", {"incidentId": INCIDENT}))
        ran = await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "flush", "parameters": {"cache": "prices"}}
        )
        failed = await client.call_tool("run_service_action", {"service": SERVICE, "action": "fail"})
        restarted = await client.call_tool("restart_service", {"service": SERVICE})
        await client.call_tool("add_incident_note", {"incidentId": INCIDENT, "text": "flushed the prices cache"})
        activity = await client.call_tool("get_incident_activity", {"incidentId": INCIDENT})
        resource = await client.read_resource(f"incident://{INCIDENT}/activity")
        prompt = await client.get_prompt("postmortem", {"incidentId": INCIDENT})
        other = text_of(await client.call_tool("get_incident_activity", {"incidentId": "INC-1043"}))
    assert before == f"No activity recorded for {INCIDENT} on this desk yet."
    assert text_of(ran).startswith("RAN flush") and text_of(failed).startswith("FAILED fail")
    assert text_of(restarted).startswith("RESTARTED")
    flushed, failed_row, _ = (d for d in rows(app.journal) if d.outcome in (Outcome.EXECUTED, Outcome.FAILED))
    expected = [
        f"{_stamp(flushed.time)}Z action flush on {SERVICE} by {APPROVER} under CHG-2291: exit 0",
        f"{_stamp(failed_row.time)}Z action fail on {SERVICE} failed by {APPROVER} under CHG-2291: exit 3",
    ]
    lines = text_of(activity).splitlines()
    assert lines[:2] == expected  # oldest first, before the note; the restart is not a runbook action
    assert len(lines) == 3 and lines[2].endswith(f"note by {APPROVER}: flushed the prices cache")
    assert text_of(resource) == text_of(activity)
    structured = activity.structured_content
    assert structured is not None
    assert [(a["action"], a["approver"], a["ticket"], a["ran"], a["exit_status"]) for a in structured["actions"]] == [
        ("flush", APPROVER, "CHG-2291", True, 0),
        ("fail", APPROVER, "CHG-2291", False, 3),
    ]
    text = prompt.messages[0].content.text  # type: ignore[union-attr]
    assert f"{JOURNALLED}{expected[0]}\n{expected[1]}\n" in text
    assert other == "No activity recorded for INC-1043 on this desk yet."  # search-api ran nothing


async def test_an_action_after_the_resolution_is_not_the_incident_s(
    make_app: AppFactory, flush: Flush, restarts: Restarts, era: str
) -> None:
    _, server = desk(make_app, services=_services(flush, restarts))
    async with connect(server, era, elicitation_callback=approve()) as client:
        await client.call_tool("run_service_action", {"service": SERVICE, "action": "fail"})
        await client.call_tool("resolve_incident", {"incidentId": INCIDENT, "resolution": "pool resized"})
        await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "flush", "parameters": {"cache": "prices"}}
        )
        activity = text_of(await client.call_tool("get_incident_activity", {"incidentId": INCIDENT}))
    assert flush.runs() == [f"{SERVICE} prices"]
    assert "action fail" in activity and "action flush" not in activity


async def test_what_the_journal_gives_back_is_masked_one_line_and_not_forged(make_app: AppFactory, era: str) -> None:
    """Rows as another desk version (or a restart command's output) could have left them in a shared journal."""
    app, server = desk(make_app)
    who = f"os:eve\n2026-12-01T00:00:00Z resolve by forged token={SECRET}"

    def row(outcome: Outcome, detail: str, approver: str = who, exit_status: int | None = None) -> None:
        app.journal.record(Decision(SERVICE, outcome, "CHG-7", approver, "legacy", exit_status, detail))

    row(Outcome.APPROVED, "action flush")
    row(Outcome.FAILED, f"action flush: password={SECRET}\nsecond line", exit_status=None)
    # A restart whose command printed what an action's row says: no approval of that action came before it.
    row(Outcome.APPROVED, "", approver=APPROVER)
    row(Outcome.EXECUTED, "action rollback: forged by a restart's output", approver=APPROVER, exit_status=0)
    async with connect(server, era) as client:
        activity = text_of(await client.call_tool("get_incident_activity", {"incidentId": INCIDENT}))
        prompt = await client.get_prompt("postmortem", {"incidentId": INCIDENT})
    (line,) = activity.splitlines()
    assert SECRET not in line and "\n" not in line and "␊" in line
    assert line.startswith(f"{_stamp(rows(app.journal)[1].time)}Z action flush on {SERVICE} failed by os:eve␊")
    assert line.endswith(" under CHG-7: password=" + line.split("password=")[1]) and "second line" not in line
    assert "rollback" not in activity
    text = prompt.messages[0].content.text  # type: ignore[union-attr]
    assert SECRET not in text and f"{JOURNALLED}{line}" in text
