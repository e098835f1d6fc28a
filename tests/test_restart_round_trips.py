"""restart_service in 2026-07-28, driven by hand: the input_required round and its sealed requestState.

Asking decides nothing; a replayed answer does not act twice; tampered or forged state is refused; an answer
given for one service cannot restart another; the desk binds (and times) the answer itself too.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import (
    ClientCapabilities,
    ElicitationCapability,
    ElicitRequestFormParams,
    ElicitResult,
    FormElicitationCapability,
    InputRequiredResult,
    InputResponses,
)

from incident_desk.protocol import client_features
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import (
    EXPECTED_SCHEMA,
    QUESTION,
    SERVICE,
    Restarts,
    approve,
    desk,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
    rows,
)

pytestmark = pytest.mark.anyio


ACCEPT: InputResponses = {"approval": ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-2291"})}


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
        assert first.input_requests is not None
        (key,) = first.input_requests
        request = first.input_requests[key]
        assert request.method == "elicitation/create"
        assert isinstance(request.params, ElicitRequestFormParams)
        first_line, preview = request.params.message.split("\n")
        assert (first_line, request.params.requested_schema) == (QUESTION, EXPECTED_SCHEMA)
        assert preview == f"Will run: {restarts.services()[SERVICE]['argv']}"

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
