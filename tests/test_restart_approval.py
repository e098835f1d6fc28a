"""restart_service approval outcomes (the demo's transcript 05, docs/outcomes.md), in both protocol eras.

Every answer (accept with/without ticket, unticked, decline, cancel, timeout) gives its own outcome and only a
ticketed accept executes; the question is the designed form; the approver comes from the OS; answers to two
concurrent questions act only on the service each was asked about.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult, ErrorData

from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import (
    APPROVER,
    EXPECTED_SCHEMA,
    PROTOCOL,
    QUESTION,
    SERVICE,
    Operator,
    Restarts,
    approve,
    desk,
    outcomes,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
    rows,
)

pytestmark = pytest.mark.anyio


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
        "RESTARTED payments-api under CHG-2291 (simulated)\n"
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
    # The designed sentence, then what the restart will run (the preview the approval is bound to).
    first, preview = asked.message.split("\n")
    assert first == QUESTION
    assert preview == f"Will run: {restarts.services()[SERVICE]['argv']}"
    assert asked.requested_schema == EXPECTED_SCHEMA
    # Only the box is required (not the ticket too), so unticking the box needs no invented ticket.
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


@pytest.mark.timing
async def test_timeout_is_a_no(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    """Legacy: the server stops waiting. 2026: the retry carrying the (late) answer comes after the timeout."""
    app, server = desk(make_app, services=restarts.services(), approval_timeout_seconds=0.5)
    answered_at = 1.5  # a second after the timeout
    operator = Operator("accept", {"confirm": True, "ticket": "CHG-2291"}, delay=answered_at)
    async with connect(server, era, elicitation_callback=operator) as client:
        started = time.monotonic()
        result = await client.call_tool("restart_service", {"service": SERVICE})
        took = time.monotonic() - started
        # Give a late legacy answer every chance to (wrongly) act before checking nothing ran.
        await anyio.sleep(max(0.0, answered_at + 0.3 - took))
    assert text_of(result) == "NOT RESTARTED -- no answer within 0.5s"
    assert result.is_error is not True
    if era == "legacy":
        assert took < answered_at - 0.3  # answered at the 0.5 s timeout, not when the slow human answered
    assert result.structured_content is not None
    assert result.structured_content["outcome"] == "timed_out"
    assert restarts.executions() == []
    assert outcomes(app.journal) == ["timed_out"]


async def test_each_answer_acts_only_on_the_service_it_was_asked_for(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    """Two approvals in flight at once: the accept for payments-api must not restart search-api, or vice versa."""
    app, server = desk(make_app, services=restarts.services(SERVICE, "search-api"))

    async def operator(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        if params.message.split("\n")[0] == QUESTION:
            await anyio.sleep(0.3)  # answered last, so the answers cross
            return ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-1"})
        assert params.message.split("\n")[0] == "Restart search-api? This drops in-flight requests."
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
