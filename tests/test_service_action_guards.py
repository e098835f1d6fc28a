"""What stands between an approved runbook action and its run (issue 39, DESIGN section 4c), through a real client in
both eras: the preview is worked out again before the run and a changed one refuses; the act limits are checked
again when the approval is spent, so two questions asked at once cannot pass a limit; the lock and the limits are
shared with restart_service both ways; a command that times out or cannot start says so in words."""

from __future__ import annotations

import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from incident_desk.core.acts import limits
from incident_desk.core.acts.limits import ActLimits
from incident_desk.core.journal.activity import Counted
from incident_desk.core.outcomes import Outcome
from tests.approval_page_helpers import LinkFollower
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import (
    APPROVER,
    SERVICE,
    Restarts,
    approve,
    desk,
    outcomes,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
    rows,
)
from tests.service_action_helpers import Flush, flush_fixture  # noqa: F401 -- the `flush` fixture

pytestmark = pytest.mark.anyio

OFF = {"per_person_per_hour": 0, "restarts_per_service_per_hour": 0, "cooldown_seconds": 0}
CHANGED = "NOT RUN -- what it would touch changed after it was approved; ask again"
FLUSH_PRICES = {"service": SERVICE, "action": "flush", "parameters": {"cache": "prices"}}

# A preview whose output stays the same for its first ``stable`` runs, then changes: what the action would touch
# changed after the human saw (and approved) it.
COUNTING_PREVIEW = """\
import sys
from pathlib import Path
counter, stable = Path(sys.argv[1]), int(sys.argv[2])
runs = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(runs))
print("would flush 42 keys" if runs <= stable else "would flush 9000 keys")
"""


async def test_a_preview_that_changes_after_the_approval_runs_nothing(
    make_app: AppFactory, flush: Flush, tmp_path: Path, era: str
) -> None:
    """2025-11-25: the preview runs once for the question, then again just before the run. 2026-07-28: once for the
    question, once on the retry (bound to the answer), then again just before the run. Its last run differs."""
    script, counter = tmp_path / "counting_preview.py", tmp_path / "preview_runs"
    script.write_text(COUNTING_PREVIEW, encoding="utf-8")
    stable = 1 if era == "legacy" else 2
    action = flush.action(preview_argv=[sys.executable, str(script), str(counter), str(stable)])
    app, server = desk(make_app, services={SERVICE: {"actions": {"flush": action}}})
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        result = await client.call_tool("run_service_action", FLUSH_PRICES)
    assert result.is_error is True and text_of(result) == CHANGED
    (asked,) = operator.asked
    assert "would flush 42 keys" in asked.message
    assert counter.read_text() == str(stable + 1)
    assert flush.runs() == []
    assert outcomes(app.journal) == ["refused_stale"]
    (stale,) = rows(app.journal)
    assert stale.ticket == "CHG-2291" and "would flush 9000 keys" in stale.detail


async def test_a_preview_that_stays_the_same_runs(make_app: AppFactory, flush: Flush, tmp_path: Path, era: str) -> None:
    script, counter = tmp_path / "counting_preview.py", tmp_path / "preview_runs"
    script.write_text(COUNTING_PREVIEW, encoding="utf-8")
    action = flush.action(preview_argv=[sys.executable, str(script), str(counter), "99"])
    _, server = desk(make_app, services={SERVICE: {"actions": {"flush": action}}})
    async with connect(server, era, elicitation_callback=approve()) as client:
        result = await client.call_tool("run_service_action", FLUSH_PRICES)
    assert text_of(result).startswith(f"RAN flush on {SERVICE} under CHG-2291"), text_of(result)
    assert counter.read_text() == ("2" if era == "legacy" else "3")
    assert flush.runs() == [f"{SERVICE} prices"]


class HeldOperator:
    """Approves each question only when the test lets it (``let(n)``): questions asked at once, answered in turn."""

    def __init__(self) -> None:
        self.asked: list[ElicitRequestParams] = []
        self._go: list[anyio.Event] = []

    async def __call__(self, ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        go = anyio.Event()
        self._go.append(go)
        self.asked.append(params)
        await go.wait()
        return ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-2291"})

    async def until_asked(self, count: int) -> None:
        with anyio.fail_after(20):
            while len(self.asked) < count:
                await anyio.sleep(0.02)

    def let(self, index: int) -> None:
        self._go[index].set()


async def test_two_questions_asked_at_once_at_the_limit_run_once(
    make_app: AppFactory, flush: Flush, restarts: Restarts, era: str
) -> None:
    """At limit - 1 both questions are asked; both are approved; the first approval spent runs, the second is
    refused with the limit's text (2025-11-25: when its approval is spent; 2026-07-28: when its retry comes)."""
    limits_table = {**OFF, "restarts_per_service_per_hour": 2}
    app, server = desk(make_app, services=flush.services(restarts), act_limits=limits_table)
    async with connect(server, era, elicitation_callback=approve()) as client:
        restarted = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(restarted).startswith(f"RESTARTED {SERVICE} under CHG-2291")
    operator = HeldOperator()
    got: dict[int, Any] = {}

    async def flush_call(index: int) -> None:
        async with connect(server, era, elicitation_callback=operator) as client:
            got[index] = await client.call_tool("run_service_action", FLUSH_PRICES)

    async with anyio.create_task_group() as group:
        group.start_soon(flush_call, 0)
        group.start_soon(flush_call, 1)
        await operator.until_asked(2)
        operator.let(0)
        with anyio.fail_after(20):
            while not got:
                await anyio.sleep(0.02)
        operator.let(1)
    (ran,) = [result for result in got.values() if not result.is_error]
    (refused_result,) = [result for result in got.values() if result.is_error]
    assert text_of(ran).startswith(f"RAN flush on {SERVICE} under CHG-2291"), text_of(ran)
    assert flush.runs() == [f"{SERVICE} prices"]
    first = min(d.time for d in rows(app.journal) if d.outcome == Outcome.APPROVED)
    clears = (first + timedelta(hours=1)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert text_of(refused_result) == (
        f"NOT RUN -- limit reached: restarts of {SERVICE} (2 of 2 in the last hour); clears at {clears}Z"
    )
    assert [d.outcome for d in rows(app.journal)].count(Outcome.APPROVED) == 2  # the restart's and one flush's
    (refused,) = [d for d in rows(app.journal) if d.outcome == Outcome.REFUSED_LIMIT]
    assert refused.approver == APPROVER
    if era == "legacy":
        assert refused.ticket == "CHG-2291" and "it had been approved" in refused.detail


async def test_a_page_approval_counts_itself_once(make_app: AppFactory, flush: Flush, era: str) -> None:
    """The approval page journals the approval before the action spends it: at limit - 1 it still runs."""
    services = flush.services(approval="out-of-band")
    app, server = desk(make_app, services=services, act_limits={**OFF, "restarts_per_service_per_hour": 1})
    async with connect(server, era, elicitation_callback=LinkFollower()) as client:
        ran = await client.call_tool("run_service_action", FLUSH_PRICES)
        again = await client.call_tool("run_service_action", FLUSH_PRICES)
    assert text_of(ran).startswith(f"RAN flush on {SERVICE} under CHG-2291"), text_of(ran)
    assert text_of(again).startswith(f"NOT RUN -- limit reached: restarts of {SERVICE} (1 of 1 in the last hour)")
    assert flush.runs() == [f"{SERVICE} prices"]
    assert outcomes(app.journal) == ["approval_requested", "page_opened", "approved", "executed", "refused_limit"]


NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _approval(minutes_ago: float, nonce: str) -> Counted:
    return Counted(NOW - timedelta(minutes=minutes_ago), "restart", Outcome.APPROVED, "os:alice", SERVICE, nonce)


def test_an_approval_being_spent_counts_the_approvals_before_its_own() -> None:
    """Two page approvals given at once at limit - 1: the first given is spent, the second refused; an approval
    not yet journalled (in band) counts every row."""
    table = ActLimits.model_validate({**OFF, "restarts_per_service_per_hour": 2})
    rows_now = [_approval(30, "earlier"), _approval(2, "first"), _approval(1, "second")]

    def spend(nonce: str, rows_then: list[Counted] = rows_now) -> limits.Counter | None:
        return limits.reached(rows_then, table, act="run", person="os:alice", service=SERVICE, now=NOW, spending=nonce)

    assert spend("first") is None
    refused = spend("second")
    assert refused is not None and (refused.used, refused.limit) == (2, 2)
    assert spend("in-band", rows_now[:1]) is None
    assert spend("in-band", rows_now[:2]) is not None


async def test_a_running_action_holds_the_lock_restart_service_waits_on(
    make_app: AppFactory, flush: Flush, restarts: Restarts, era: str
) -> None:
    _, server = desk(make_app, services=flush.services(restarts, sleep=3.0))
    operator = approve()
    got: dict[str, Any] = {}

    async def run_flush() -> None:
        async with connect(server, era, elicitation_callback=approve()) as client:
            got["flush"] = await client.call_tool("run_service_action", FLUSH_PRICES)

    async with anyio.create_task_group() as group:
        group.start_soon(run_flush)
        with anyio.fail_after(20):
            while not flush.runs():
                await anyio.sleep(0.05)
        async with connect(server, era, elicitation_callback=operator) as client:
            got["restart"] = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(got["flush"]).startswith(f"RAN flush on {SERVICE}")
    assert got["restart"].is_error is True
    restart_text = text_of(got["restart"])
    assert restart_text.startswith(f"NOT RESTARTED -- a restart of {SERVICE} is already running (held by ")
    assert f"for {APPROVER} (flush)" in restart_text
    assert operator.asked == [] and restarts.executions() == []


async def test_an_action_counts_towards_restart_service_s_limit_and_cooldown(
    make_app: AppFactory, flush: Flush, restarts: Restarts, era: str
) -> None:
    for table, said in (
        ({"restarts_per_service_per_hour": 1}, f"restarts of {SERVICE} (1 of 1 in the last hour)"),
        ({"cooldown_seconds": 600}, f"the 600s cooldown after the last restart of {SERVICE} (1 of no limit"),
    ):
        app, server = desk(make_app, services=flush.services(restarts), act_limits={**OFF, **table})
        operator = approve()
        async with connect(server, era, elicitation_callback=operator) as client:
            ran = await client.call_tool("run_service_action", FLUSH_PRICES)
            refused = await client.call_tool("restart_service", {"service": SERVICE})
        assert text_of(ran).startswith(f"RAN flush on {SERVICE}"), text_of(ran)
        assert text_of(refused).startswith(f"NOT RESTARTED -- limit reached: {said}"), text_of(refused)
        assert len(operator.asked) == 1 and restarts.executions() == []
        app.journal.close()
        flush.ran.unlink()
        Path(app.journal.location).unlink()


FAILURES: dict[str, tuple[dict[str, Any], str, bool]] = {
    "timed-out": (
        {"argv": [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"]},
        "timed out after 0.5s; the command was killed",
        True,
    ),
    "not-started": (
        {"argv": ["/nonexistent/flush-tool"]},
        "cannot run '/nonexistent/flush-tool': program not found",
        False,
    ),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
async def test_a_command_without_an_exit_status_says_why(make_app: AppFactory, era: str, case: str) -> None:
    command, why, executed = FAILURES[case]
    action = {"description": "Slow", "timeout_seconds": 0.5, **command}
    app, server = desk(make_app, services={SERVICE: {"actions": {"slow": action}}})
    async with connect(server, era, elicitation_callback=approve()) as client:
        result = await client.call_tool("run_service_action", {"service": SERVICE, "action": "slow"})
    assert result.is_error is True
    lines = text_of(result).splitlines()
    assert lines[0] == f"FAILED slow on {SERVICE} under CHG-2291: {why}"
    assert ("started" in lines[1:]) is executed  # the output head, as for an exit status
    structured = result.structured_content
    assert structured is not None and (structured["outcome"], structured["ran"], structured["reason"]) == (
        "failed",
        False,
        why,
    )
    assert structured["exit_status"] == (-signal.SIGKILL if executed else None)
    approved, failed = rows(app.journal)
    assert (approved.outcome, failed.outcome) == ("approved", "failed")
    assert failed.detail.startswith(f"action slow: {why}")
