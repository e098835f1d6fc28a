"""restart_service (DESIGN §4, transcripts 05-07): human approval in both protocol eras, a real executor, a journal.

Every restart here runs a script the test wrote, which appends one line to a file per execution, so each test
can count exactly how often something was executed.
"""

from __future__ import annotations

import getpass
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    ClientCapabilities,
    ElicitationCapability,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    FormElicitationCapability,
    InputRequiredResult,
)

from incident_desk import client_features
from incident_desk.cli import main as cli_main
from incident_desk.core.audit import AuditJournal, Decision
from incident_desk.server import DeskApp, build_server
from tests.conftest import ROOT, AppFactory, child_env, connect, text_of

pytestmark = pytest.mark.anyio

SERVICE = "payments-api"
QUESTION = "Restart payments-api? This drops in-flight requests."
# Written out, not imported: the form is the product contract (DESIGN §4), so a change to it must fail here.
EXPECTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "description": "Tick to approve the restart"},
        "ticket": {"type": "string", "description": "Change ticket number, e.g. CHG-2291"},
    },
    "required": ["confirm"],
}
APPROVER = f"os:{getpass.getuser()}"
PROTOCOL = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}
NO_CHANNEL = "ELICITATION_UNAVAILABLE -- refusing to restart payments-api without an approval channel"

RESTART_SCRIPT = """\
import os, sys, time
ran, sleep, code = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
with open(ran, "a", encoding="utf-8") as f:
    f.write(os.environ.get("INCIDENT_DESK_SERVICE", "?") + "\\n")
print("restarting", os.environ.get("INCIDENT_DESK_SERVICE"), flush=True)
time.sleep(sleep)
print("exit", code, flush=True)
sys.exit(code)
"""


@dataclass
class Restarts:
    """A restart command the test controls; ``executions()`` lists one service name per run."""

    script: Path
    ran: Path

    def action(self, *, exit_code: int = 0, sleep: float = 0.0) -> dict[str, Any]:
        argv = [sys.executable, str(self.script), str(self.ran), str(sleep), str(exit_code)]
        return {"kind": "command", "argv": argv, "timeout_seconds": 30}

    def services(self, *names: str, exit_code: int = 0, sleep: float = 0.0) -> dict[str, Any]:
        return {name: self.action(exit_code=exit_code, sleep=sleep) for name in names or (SERVICE,)}

    def executions(self) -> list[str]:
        return self.ran.read_text(encoding="utf-8").splitlines() if self.ran.exists() else []


@pytest.fixture
def restarts(tmp_path: Path) -> Restarts:
    script = tmp_path / "restart_cmd.py"
    script.write_text(RESTART_SCRIPT, encoding="utf-8")
    return Restarts(script=script, ran=tmp_path / "ran.txt")


class Operator:
    """The human behind the client: answers every approval question one way, and remembers each question."""

    def __init__(self, action: str = "accept", content: dict[str, Any] | None = None, *, delay: float = 0.0) -> None:
        self.action, self.content, self.delay = action, content, delay
        self.asked: list[ElicitRequestParams] = []
        self.answered = 0

    async def __call__(self, ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        self.asked.append(params)
        if self.delay:
            await anyio.sleep(self.delay)
        self.answered += 1
        return ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


def approve(ticket: str = "CHG-2291") -> Operator:
    return Operator("accept", {"confirm": True, "ticket": ticket})


def rows(journal: AuditJournal) -> list[Decision]:
    """The journal, oldest first."""
    return list(reversed(journal.recent(1000)))


def outcomes(journal: AuditJournal) -> list[str]:
    return [str(d.outcome) for d in rows(journal)]


def desk(make_app: AppFactory, **settings: Any) -> tuple[DeskApp, Any]:
    app = make_app(**settings)
    return app, build_server(app)


# The outcome matrix (transcript 05 plus DESIGN §4) -----------------------------------------------------------

OUTCOMES: dict[str, tuple[str, dict[str, Any] | None, str, list[str], str | None]] = {
    # name: (action, content, text, journal outcomes, ticket journalled)
    "accept-with-ticket": (
        "accept",
        {"confirm": True, "ticket": "CHG-2291"},
        "RESTARTED payments-api under CHG-2291",
        ["approved", "executed"],
        "CHG-2291",
    ),
    "accept-unticked": (
        "accept",
        {"confirm": False, "ticket": "CHG-2291"},
        "NOT RESTARTED -- form submitted with the box unticked",
        ["unticked"],
        "CHG-2291",
    ),
    "accept-unticked-no-ticket": (
        "accept",
        {"confirm": False},
        "NOT RESTARTED -- form submitted with the box unticked",
        ["unticked"],
        None,
    ),
    "accept-without-ticket": (
        "accept",
        {"confirm": True},
        "NOT RESTARTED -- a change ticket is required",
        ["no_ticket"],
        None,
    ),
    "accept-blank-ticket": (
        "accept",
        {"confirm": True, "ticket": "   "},
        "NOT RESTARTED -- a change ticket is required",
        ["no_ticket"],
        None,
    ),
    "accept-confirm-as-string": (
        "accept",
        {"confirm": "true", "ticket": "CHG-2291"},
        "NOT RESTARTED -- form submitted with the box unticked",
        ["unticked"],
        "CHG-2291",
    ),
    "decline": ("decline", None, "NOT RESTARTED -- operator declined", ["declined"], None),
    "cancel": ("cancel", None, "NOT RESTARTED -- operator dismissed the dialog", ["cancelled"], None),
}


@pytest.mark.parametrize("case", list(OUTCOMES))
async def test_every_answer_gives_its_outcome_and_only_a_ticketed_accept_executes(
    make_app: AppFactory, restarts: Restarts, era: str, case: str
) -> None:
    action, content, expected_text, expected_outcomes, ticket = OUTCOMES[case]
    app, server = desk(make_app, services=restarts.services())
    operator = Operator(action, content)
    async with connect(server, era, elicitation_callback=operator) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    text = text_of(result)
    first_line, *more = text.split("\n")
    assert first_line == expected_text
    assert len(operator.asked) == 1
    structured = result.structured_content
    assert structured is not None
    assert structured["service"] == SERVICE
    assert structured["outcome"] == expected_outcomes[-1]
    assert structured["approver"] == APPROVER
    assert structured["ticket"] == ticket
    journal = rows(app.journal)
    assert [str(d.outcome) for d in journal] == expected_outcomes
    assert all(d.service == SERVICE and d.approver == APPROVER for d in journal)
    assert all(d.protocol_era == PROTOCOL[era] and d.ticket == ticket for d in journal)
    if case == "accept-with-ticket":
        assert result.is_error is not True
        assert restarts.executions() == [SERVICE]  # once, in both eras, though 2026 calls the tool twice
        assert re.fullmatch(r"command exited 0 after \d+\.\ds", more[0]), text
        assert (structured["restarted"], structured["executed"], structured["exit_status"]) == (True, True, 0)
        assert journal[0].nonce and journal[1].exit_status == 0
    else:
        assert result.is_error is not True  # a "no" is a normal outcome, not a failure
        assert more == []
        assert restarts.executions() == []
        assert (structured["restarted"], structured["executed"], structured["exit_status"]) == (False, False, None)
        assert structured["reason"] == expected_text


async def test_simulate_says_nothing_was_executed(make_server: Callable[..., Any], era: str) -> None:
    operator = approve()
    async with connect(make_server(), era, elicitation_callback=operator) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
        audit = text_of(await client.read_resource("audit://recent"))
    assert text_of(result) == (
        "RESTARTED payments-api under CHG-2291\n"
        "simulated: no restart command is configured for payments-api, so nothing was executed"
    )
    assert result.structured_content is not None
    assert result.structured_content["outcome"] == "simulated"
    assert result.structured_content["executed"] is False
    assert result.structured_content["restarted"] is False
    # The journal is readable as a resource: newest first, approved and then simulated.
    header, _rule, newest, oldest = audit.splitlines()
    assert header.split() == ["time", "service", "outcome", "ticket", "approver", "era", "exit"]
    assert newest.split()[2:] == [SERVICE, "simulated", "CHG-2291", APPROVER, PROTOCOL[era], "-"]
    assert oldest.split()[2:] == [SERVICE, "approved", "CHG-2291", APPROVER, PROTOCOL[era], "-"]


async def test_the_question_is_the_designed_form(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    _, server = desk(make_app, services=restarts.services())
    operator = Operator("decline")
    async with connect(server, era, elicitation_callback=operator) as client:
        await client.call_tool("restart_service", {"service": SERVICE})
    (asked,) = operator.asked
    assert isinstance(asked, ElicitRequestFormParams)
    assert asked.mode == "form"
    assert asked.message == QUESTION
    assert asked.requested_schema == EXPECTED_SCHEMA
    # Unlike the seed's record (required=[confirm, ticket]), unticking the box needs no invented ticket.
    assert asked.requested_schema["required"] == ["confirm"]


async def test_approver_comes_from_the_os_never_from_the_form(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services())
    operator = Operator("accept", {"confirm": True, "ticket": "CHG-2291", "approver": "mallory"})
    async with connect(server, era, elicitation_callback=operator) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(result).startswith("RESTARTED payments-api under CHG-2291\n")
    assert {d.approver for d in rows(app.journal)} == {APPROVER}
    assert result.structured_content is not None and result.structured_content["approver"] == APPROVER


async def test_timeout_is_a_no(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    """Legacy: the server stops waiting. 2026: the retry carrying the (late) answer comes after the timeout."""
    app, server = desk(make_app, services=restarts.services(), approval_timeout_seconds=0.5)
    operator = Operator("accept", {"confirm": True, "ticket": "CHG-2291"}, delay=1.2)
    async with connect(server, era, elicitation_callback=operator) as client:
        started = time.monotonic()
        result = await client.call_tool("restart_service", {"service": SERVICE})
        took = time.monotonic() - started
        # Give a late legacy answer every chance to (wrongly) act before checking nothing ran.
        await anyio.sleep(max(0.0, 1.5 - took))
    assert text_of(result) == "NOT RESTARTED -- no answer within 0.5s"
    assert result.is_error is not True
    if era == "legacy":
        assert took < 1.1  # answered at the timeout, not when the slow human finally answered
    assert result.structured_content is not None
    assert result.structured_content["outcome"] == "timed_out"
    assert restarts.executions() == []
    assert outcomes(app.journal) == ["timed_out"]


async def test_no_elicitation_capability_refuses_without_asking(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services())
    async with connect(server, era) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(result) == NO_CHANNEL
    assert result.structured_content is not None
    assert result.structured_content["outcome"] == "refused_no_channel"
    assert restarts.executions() == []
    (row,) = rows(app.journal)
    assert (row.outcome, row.service, row.protocol_era) == ("refused_no_channel", SERVICE, PROTOCOL[era])


@pytest.mark.parametrize("service", ["no-such-service", "../payments-api"])
async def test_unknown_service_is_refused_before_any_question(
    make_app: AppFactory, restarts: Restarts, era: str, service: str
) -> None:
    app, server = desk(make_app, services=restarts.services())
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        result = await client.call_tool("restart_service", {"service": service})
    assert result.is_error is True
    assert text_of(result) == f"No such service: {service}. Known services: payments-api, search-api"
    assert operator.asked == []
    assert restarts.executions() == []
    (row,) = rows(app.journal)
    assert (row.outcome, row.service) == ("refused_unknown_service", service)


async def test_each_answer_acts_only_on_the_service_it_was_asked_for(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    """Two approvals in flight at once: the accept for payments-api must not restart search-api, or vice versa."""
    app, server = desk(make_app, services=restarts.services(SERVICE, "search-api"))

    async def operator(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        if params.message == QUESTION:
            await anyio.sleep(0.3)  # answered last, so the answers cross
            return ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-1"})
        assert params.message == "Restart search-api? This drops in-flight requests."
        return ElicitResult(action="decline")

    texts: dict[str, str] = {}
    async with connect(server, era, elicitation_callback=operator) as client:

        async def restart(service: str) -> None:
            texts[service] = text_of(await client.call_tool("restart_service", {"service": service}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(restart, SERVICE)
            tg.start_soon(restart, "search-api")
    assert texts[SERVICE].startswith("RESTARTED payments-api under CHG-1\n")
    assert texts["search-api"] == "NOT RESTARTED -- operator declined"
    assert restarts.executions() == [SERVICE]
    assert sorted((d.service, str(d.outcome)) for d in rows(app.journal)) == [
        (SERVICE, "approved"),
        (SERVICE, "executed"),
        ("search-api", "declined"),
    ]


# 2026-07-28 round trips driven by hand -------------------------------------------------------------------------

ACCEPT = {"approval": ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-2291"})}


async def _first_round(client: Any, service: str = SERVICE) -> InputRequiredResult:
    first = await client.session.call_tool("restart_service", {"service": service}, allow_input_required=True)
    assert isinstance(first, InputRequiredResult)
    return first


async def test_2026_round_trip_asks_the_form_and_a_replayed_answer_does_not_act_twice(
    make_app: AppFactory, restarts: Restarts
) -> None:
    app, server = desk(make_app, services=restarts.services())
    async with connect(server, "2026-07-28", elicitation_callback=approve()) as client:
        first = await _first_round(client)
        assert restarts.executions() == [] and rows(app.journal) == []  # asking decides nothing
        state = first.request_state
        assert state
        (key,) = first.input_requests
        request = first.input_requests[key]
        assert request.method == "elicitation/create"
        assert isinstance(request.params, ElicitRequestFormParams)
        assert (request.params.message, request.params.requested_schema) == (QUESTION, EXPECTED_SCHEMA)

        answered = await client.session.call_tool(
            "restart_service", {"service": SERVICE}, input_responses=ACCEPT, request_state=state
        )
        replayed = await client.session.call_tool(
            "restart_service", {"service": SERVICE}, input_responses=ACCEPT, request_state=state
        )
    assert text_of(answered).startswith("RESTARTED payments-api under CHG-2291\ncommand exited 0")
    assert replayed.is_error is True
    assert text_of(replayed) == "NOT RESTARTED -- this approval was already used"
    assert restarts.executions() == [SERVICE]
    journal = rows(app.journal)
    assert [str(d.outcome) for d in journal] == ["approved", "executed", "refused_stale"]
    assert journal[0].nonce is not None and journal[2].nonce is None


async def test_2026_tampered_or_forged_state_is_refused(make_app: AppFactory, restarts: Restarts) -> None:
    app, server = desk(make_app, services=restarts.services())
    async with connect(server, "2026-07-28", elicitation_callback=approve()) as client:
        state = (await _first_round(client)).request_state
        assert state
        middle = len(state) // 2
        tampered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
        forged = client_features._Round(
            key="approval",
            binding={"tool": "restart_service", "service": SERVICE},
            nonce="f" * 32,
            asked_at=time.time(),
        ).encode()
        errors = []
        for bad in (tampered, forged):
            with pytest.raises(MCPError) as caught:
                await client.session.call_tool(
                    "restart_service", {"service": SERVICE}, input_responses=ACCEPT, request_state=bad
                )
            errors.append((caught.value.code, caught.value.message))
    assert errors == [(-32602, "Invalid or expired requestState")] * 2
    assert restarts.executions() == []
    assert rows(app.journal) == []


async def test_2026_answer_for_one_service_cannot_restart_another(make_app: AppFactory, restarts: Restarts) -> None:
    app, server = desk(make_app, services=restarts.services(SERVICE, "search-api"))
    async with connect(server, "2026-07-28", elicitation_callback=approve()) as client:
        state = (await _first_round(client, SERVICE)).request_state
        with pytest.raises(MCPError) as caught:
            await client.session.call_tool(
                "restart_service", {"service": "search-api"}, input_responses=ACCEPT, request_state=state
            )
    assert caught.value.code == -32602
    assert restarts.executions() == []
    assert rows(app.journal) == []


def _fake_2026_context(state: str, responses: dict[str, Any]) -> Any:
    capabilities = ClientCapabilities(elicitation=ElicitationCapability(form=FormElicitationCapability()))
    return SimpleNamespace(
        client_capabilities=capabilities,
        protocol_version="2026-07-28",
        request_state=state,
        input_responses=responses,
        session=None,
    )


async def test_the_desk_binds_the_answer_itself_too() -> None:
    """Defence in depth under the SDK's args binding: the desk's own state names the service it asked about."""
    form = client_features.ApprovalForm(QUESTION, EXPECTED_SCHEMA)
    asked = {"tool": "restart_service", "service": SERVICE}
    state = client_features._Round(key="approval", binding=asked, nonce="n" * 32, asked_at=time.time()).encode()
    ctx = _fake_2026_context(state, ACCEPT)

    other = await client_features.ask_approval(
        ctx, form, timeout=60, binding={"tool": "restart_service", "service": "search-api"}
    )
    same = await client_features.ask_approval(ctx, form, timeout=60, binding=asked)
    assert other == client_features.StaleRound(
        "unbound", "the answer was given for service=payments-api, tool=restart_service, not for this call"
    )
    assert same == client_features.Answered("accept", {"confirm": True, "ticket": "CHG-2291"}, nonce="n" * 32)

    late = client_features._Round(key="approval", binding=asked, nonce="n" * 32, asked_at=time.time() - 61).encode()
    timed_out = await client_features.ask_approval(_fake_2026_context(late, ACCEPT), form, timeout=60, binding=asked)
    assert isinstance(timed_out, client_features.NoAnswer) and timed_out.kind == "timed_out"


# The executor behind the approval ------------------------------------------------------------------------------


async def test_a_failing_command_is_reported_as_a_failure(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    app, server = desk(make_app, services=restarts.services(exit_code=3))
    async with connect(server, era, elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert result.is_error is True
    text = text_of(result)
    assert text.startswith("RESTART FAILED payments-api under CHG-2291 -- the restart command exited with status 3\n")
    assert "restarting payments-api" in text and "exit 3" in text  # the command's own output, for the operator
    structured = result.structured_content
    assert structured is not None
    assert (structured["outcome"], structured["exit_status"]) == ("failed", 3)
    assert (structured["executed"], structured["restarted"]) == (True, False)
    assert restarts.executions() == [SERVICE]
    approved, failed = rows(app.journal)
    assert (approved.outcome, failed.outcome, failed.exit_status, failed.ticket) == (
        "approved",
        "failed",
        3,
        "CHG-2291",
    )
    assert "exited with status 3" in failed.detail


@pytest.mark.parametrize("problem", ["missing-program", "command-timeout"])
async def test_a_command_that_cannot_finish_is_a_failure(
    make_app: AppFactory, restarts: Restarts, tmp_path: Path, problem: str
) -> None:
    if problem == "missing-program":
        action: dict[str, Any] = {"kind": "command", "argv": [str(tmp_path / "no-such-restart")]}
        why = f"cannot run '{tmp_path / 'no-such-restart'}': program not found"
    else:
        action = restarts.action(sleep=20) | {"timeout_seconds": 0.3}
        why = "timed out after 0.3s; the command was killed"
    app, server = desk(make_app, services={SERVICE: action})
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert result.is_error is True
    assert text_of(result).split("\n")[0] == f"RESTART FAILED payments-api under CHG-2291 -- the restart command {why}"
    assert result.structured_content is not None
    assert result.structured_content["restarted"] is False
    assert result.structured_content["executed"] is (problem == "command-timeout")
    approved, failed = rows(app.journal)
    assert (approved.outcome, failed.outcome) == ("approved", "failed")
    assert failed.exit_status == (None if problem == "missing-program" else -signal.SIGKILL)
    assert failed.detail.startswith(why)


async def test_a_successful_command_journals_its_exit_status_and_output(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services())
    async with connect(server, era, elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    structured = result.structured_content
    assert structured is not None
    assert structured["output"] == "restarting payments-api\nexit 0\n"
    _, executed = rows(app.journal)
    assert (executed.outcome, executed.exit_status) == ("executed", 0)
    assert executed.detail == "restarting payments-api\nexit 0\n"


async def test_progress_is_reported_while_the_command_runs(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    _, server = desk(make_app, services=restarts.services(sleep=1.5))
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with connect(server, era, elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE}, progress_callback=on_progress)
    assert text_of(result).startswith("RESTARTED payments-api under CHG-2291\n")
    messages = [m or "" for _, _, m in updates]
    assert messages[0] == f"restarting payments-api: running {sys.executable}"
    assert any(m.startswith("payments-api: restart command still running") for m in messages[1:-1]), messages
    assert messages[-1] == "payments-api: command finished with exit status 0"
    progress = [p for p, _, _ in updates]
    assert progress == sorted(progress) and progress[-1] >= 1.5


async def test_a_call_cancelled_mid_restart_journals_the_killed_restart(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services(sleep=20))
    async with connect(server, era, elicitation_callback=approve()) as client:
        with anyio.move_on_after(1.0):
            await client.call_tool("restart_service", {"service": SERVICE})
        deadline = time.monotonic() + 5
        while len(rows(app.journal)) < 2 and time.monotonic() < deadline:
            await anyio.sleep(0.05)
    assert restarts.executions() == [SERVICE]
    approved, failed = rows(app.journal)
    assert (approved.outcome, failed.outcome, failed.ticket) == ("approved", "failed", "CHG-2291")
    assert "cancelled" in failed.detail


async def test_a_call_cancelled_while_the_question_is_open_is_journalled(
    make_app: AppFactory, restarts: Restarts
) -> None:
    """Legacy only: in 2026-07-28 no call stays open while the human thinks."""
    app, server = desk(make_app, services=restarts.services())
    operator = Operator("accept", {"confirm": True, "ticket": "CHG-2291"}, delay=3)
    async with connect(server, "legacy", elicitation_callback=operator) as client:
        with anyio.move_on_after(0.5):
            await client.call_tool("restart_service", {"service": SERVICE})
        deadline = time.monotonic() + 5
        while not rows(app.journal) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
    assert len(operator.asked) == 1
    assert restarts.executions() == []
    (row,) = rows(app.journal)
    assert (row.outcome, row.detail) == ("disconnected", "the call was cancelled while the question was open")


# Over stdio, with the client or the server killed -------------------------------------------------------------


class RawDesk:
    """``python -m incident_desk`` driven by hand over stdio, one JSON-RPC message a line."""

    def __init__(self, tmp_path: Path, services: dict[str, Any], **settings: Any) -> None:
        self.audit = tmp_path / "journal" / "audit.sqlite3"
        config = tmp_path / "desk.toml"
        lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
        for name, action in services.items():
            lines += [f'[services."{name}"]', f'kind = "{action["kind"]}"', f"argv = {json.dumps(action['argv'])}"]
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        env = child_env(self.audit)
        self.stderr_path = tmp_path / "desk-stderr.log"
        self._stderr = self.stderr_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "incident_desk", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            cwd=ROOT,
            env=env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.process.stdin.flush()

    def receive(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            line = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line is not None, f"the desk closed stdout; stderr:\n{self.stderr()}"
            message: dict[str, Any] = json.loads(line)
            if predicate(message):
                return message

    def result(self, request_id: int) -> dict[str, Any]:
        message = self.receive(lambda m: m.get("id") == request_id and "method" not in m)
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result

    def question(self) -> dict[str, Any]:
        return self.receive(lambda m: m.get("method") == "elicitation/create")

    def initialize(self) -> None:
        capabilities = {"elicitation": {"form": {}}}
        info = {"name": "raw", "version": "1"}
        self.send(
            {
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": info},
            }
        )
        assert self.result(1)["protocolVersion"] == "2025-11-25"
        self.send({"method": "notifications/initialized"})

    def call_restart(self, request_id: int, service: str = SERVICE) -> None:
        params = {"name": "restart_service", "arguments": {"service": service}}
        self.send({"id": request_id, "method": "tools/call", "params": params})

    def answer(self, question: dict[str, Any], action: str, content: dict[str, Any] | None = None) -> None:
        result: dict[str, Any] = {"action": action}
        if content is not None:
            result["content"] = content
        self.send({"id": question["id"], "result": result})

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._reader.join(timeout=30)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()
        self._stderr.close()


@pytest.fixture
def raw_desks() -> Any:
    started: list[RawDesk] = []
    yield started
    for raw in started:
        raw.close()


def _text(result: dict[str, Any]) -> str:
    (content,) = result["content"]
    return str(content["text"])


@pytest.mark.subprocess
def test_client_killed_mid_approval_restarts_nothing(tmp_path: Path, restarts: Restarts, raw_desks: Any) -> None:
    raw = RawDesk(tmp_path, restarts.services())
    raw_desks.append(raw)
    raw.initialize()
    raw.call_restart(2)
    question = raw.question()
    assert question["params"]["message"] == QUESTION
    assert question["params"]["requestedSchema"] == EXPECTED_SCHEMA
    assert raw.process.stdin is not None
    raw.process.stdin.close()  # the client dies: its end of the pipe closes with the question open
    assert raw.process.wait(timeout=30) == 0, raw.stderr()
    assert restarts.executions() == []
    (row,) = rows(AuditJournal(raw.audit))
    assert (row.outcome, row.service, row.ticket) == ("disconnected", SERVICE, None)
    assert row.detail == "the client disconnected while the question was open"


@pytest.mark.subprocess
def test_one_timed_out_approval_does_not_stop_the_next_call(tmp_path: Path, restarts: Restarts, raw_desks: Any) -> None:
    raw = RawDesk(tmp_path, restarts.services(), approval_timeout_seconds=0.5)
    raw_desks.append(raw)
    raw.initialize()
    raw.call_restart(2)
    unanswered = raw.question()
    assert _text(raw.result(2)) == "NOT RESTARTED -- no answer within 0.5s"
    raw.answer(unanswered, "accept", {"confirm": True, "ticket": "CHG-LATE"})  # too late: must be ignored
    raw.call_restart(3)
    question = raw.question()
    assert question["id"] != unanswered["id"]
    raw.answer(question, "accept", {"confirm": True, "ticket": "CHG-2291"})
    assert _text(raw.result(3)).startswith("RESTARTED payments-api under CHG-2291\ncommand exited 0")
    assert raw.process.stdin is not None
    raw.process.stdin.close()
    assert raw.process.wait(timeout=30) == 0, raw.stderr()
    assert restarts.executions() == [SERVICE]
    assert outcomes(AuditJournal(raw.audit)) == ["timed_out", "approved", "executed"]
    assert "CHG-LATE" not in raw.stderr()


@pytest.mark.subprocess
@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")
def test_decisions_survive_sigkill_right_after_the_answer(
    tmp_path: Path, restarts: Restarts, raw_desks: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = RawDesk(tmp_path, restarts.services())
    raw_desks.append(raw)
    raw.initialize()
    raw.call_restart(2)
    raw.answer(raw.question(), "decline")
    assert _text(raw.result(2)) == "NOT RESTARTED -- operator declined"
    raw.process.send_signal(signal.SIGKILL)  # no shutdown, no flush: only what was committed survives
    assert raw.process.wait(timeout=30) == -signal.SIGKILL
    (declined,) = rows(AuditJournal(raw.audit))
    assert (declined.outcome, declined.service, declined.approver) == ("declined", SERVICE, APPROVER)

    raw = RawDesk(tmp_path, restarts.services())  # the same journal, a new server
    raw_desks.append(raw)
    raw.initialize()
    raw.call_restart(2)
    raw.answer(raw.question(), "accept", {"confirm": True, "ticket": "CHG-2291"})
    assert _text(raw.result(2)).startswith("RESTARTED payments-api under CHG-2291\n")
    raw.process.send_signal(signal.SIGKILL)
    assert raw.process.wait(timeout=30) == -signal.SIGKILL
    assert outcomes(AuditJournal(raw.audit)) == ["declined", "approved", "executed"]
    assert restarts.executions() == [SERVICE]

    assert cli_main(["audit", "--audit-db", str(raw.audit)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[3] for line in table[2:]] == ["executed", "approved", "declined"]


# The `incident-desk audit` command ------------------------------------------------------------------------------


def _journal_with(path: Path, *decisions: tuple[str, str | None, int | None]) -> AuditJournal:
    journal = AuditJournal(path)
    for outcome, ticket, exit_status in decisions:
        journal.record(
            Decision(
                service=SERVICE,
                outcome=outcome,
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


def test_restart_script_counts_runs(tmp_path: Path, restarts: Restarts) -> None:
    """The counting script itself works, so an empty count above means nothing ran."""
    argv = restarts.action(exit_code=3)["argv"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 3
    assert restarts.executions() == ["?"]
    assert done.stdout == "restarting None\nexit 3\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see the zombie")
async def test_a_killed_command_reports_the_signal_not_a_made_up_status(
    restarts: Restarts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killing must not reap the command behind asyncio's child watcher, or the real exit status is lost.

    Popen.kill() polls (waitpid) before it signals. Called after the group kill, it could reap the dead command
    first; asyncio's watcher then logs "Unknown child process" and reports 255. The race is widened here: the
    command is left a zombie before anything else runs, and the watcher is made slow to collect it.
    """
    from incident_desk.core import executor
    from incident_desk.settings import CommandAction

    real_killpg, real_waitpid = os.killpg, os.waitpid

    def zombie(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True

    def killpg_and_let_it_die(pgid: int, sig: int) -> None:
        real_killpg(pgid, sig)
        deadline = time.monotonic() + 5
        while not zombie(pgid) and time.monotonic() < deadline:
            time.sleep(0.01)

    def slow_blocking_waitpid(pid: int, options: int) -> tuple[int, int]:
        if options == 0:  # the watcher thread's blocking wait, never the event loop's
            while not zombie(pid):
                time.sleep(0.01)
            time.sleep(0.3)
        return real_waitpid(pid, options)

    monkeypatch.setattr(os, "killpg", killpg_and_let_it_die)
    monkeypatch.setattr(os, "waitpid", slow_blocking_waitpid)
    action = CommandAction.model_validate(restarts.action(sleep=20) | {"timeout_seconds": 0.3})
    result = await executor.run_restart(SERVICE, action)
    assert result.timed_out
    assert result.exit_status == -signal.SIGKILL


async def test_a_second_restart_of_a_running_service_is_refused(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services(sleep=1.5))
    results: list[Any] = []
    async with connect(server, era, elicitation_callback=approve()) as client:

        async def call(ticket_delay: float) -> None:
            await anyio.sleep(ticket_delay)
            results.append(await client.call_tool("restart_service", {"service": SERVICE}))

        async with anyio.create_task_group() as group:
            group.start_soon(call, 0.0)
            group.start_soon(call, 0.5)
    texts = sorted(text_of(result) for result in results)
    assert texts[0] == "NOT RESTARTED -- a restart of payments-api is already running"
    assert texts[1].startswith("RESTARTED payments-api under CHG-2291")
    assert restarts.executions() == [SERVICE]
    assert sorted(outcomes(app.journal)) == ["approved", "executed", "refused_busy"]


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


async def test_command_output_is_redacted_and_the_desks_secrets_are_withheld(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "leaky.py"
    script.write_text(
        "import os\n"
        "print('db password=hunter2secret')\n"
        "print('token seen:', os.environ.get('INCIDENT_DESK_HTTP_TOKEN', 'none'))\n"
        "print('key seen:', os.environ.get('INCIDENT_DESK_PROVIDER_API_KEY', 'none'))\n"
    )
    monkeypatch.setenv("INCIDENT_DESK_HTTP_TOKEN", "tok-0123456789abcdef0123")
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_API_KEY", "sk-ant-0123456789abcdefghij")
    app, server = desk(make_app, services={SERVICE: {"argv": [sys.executable, str(script)]}})
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    shown = json.dumps(result.model_dump(mode="json")) + json.dumps([d.detail for d in rows(app.journal)])
    assert "hunter2secret" not in shown
    assert "tok-0123456789abcdef0123" not in shown and "sk-ant-0123456789abcdefghij" not in shown
    assert "token seen: none" in result.structured_content["output"]
    assert "key seen: none" in result.structured_content["output"]


@pytest.mark.parametrize("failing", ["approved", "executed"])
async def test_a_journal_that_cannot_be_written_is_never_hidden(
    make_app: AppFactory, restarts: Restarts, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    from incident_desk.core.audit import AuditError

    app, server = desk(make_app, services=restarts.services())
    real_record = app.journal.record

    def record(decision: Decision) -> int:
        if decision.outcome == failing:
            raise AuditError("audit journal /x is not writable: disk full")
        return real_record(decision)

    monkeypatch.setattr(app.journal, "record", record)
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    texts = [block.text for block in result.content]
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
