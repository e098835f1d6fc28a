"""summarize_incident step 1, client sampling (transcript 04), in both protocol eras.

The client's model is asked exactly transcript 04's request and its answer is returned; in 2026-07-28 the
question travels in an input_required round with a sealed state; an unknown incident asks nobody.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    InputRequiredResult,
    TextContent,
)

from tests.helpers import connect, text_of
from tests.summarize_helpers import ANSWER, SYSTEM_PROMPT, USER_TEXT, ScriptedModel, _summarize

pytestmark = pytest.mark.anyio


def _assert_transcript_04_request(params: CreateMessageRequestParams) -> None:
    """Exactly what transcript 04's client received, and nothing more."""
    assert params.system_prompt == SYSTEM_PROMPT
    assert len(params.messages) == 1
    (message,) = params.messages
    assert message.role == "user"
    assert isinstance(message.content, TextContent)
    assert message.content.text == USER_TEXT
    assert params.max_tokens == 120
    assert params.temperature == 0.2
    assert params.include_context is None
    # Absent from the wire, not merely null: the params were parsed from what the server sent.
    assert params.model_fields_set == {"messages", "system_prompt", "max_tokens", "temperature"}


async def test_sampling_sends_exactly_transcript_04_and_returns_the_answer(
    make_server: Callable[..., MCPServer], era: str
) -> None:
    model = ScriptedModel()
    result = await _summarize(make_server(), era, sampling_callback=model)
    (params,) = model.requests
    _assert_transcript_04_request(params)
    assert result.is_error is False
    assert text_of(result) == ANSWER
    assert result.structured_content == {
        "incident_id": "INC-1043",
        "mode": "sampled",
        "text": ANSWER,
        "model": "scripted-model",
        "skipped": [],
    }


async def test_2026_asks_through_input_required_with_a_sealed_state(make_server: Callable[..., MCPServer]) -> None:
    """Driven by hand: the first call ends with input_required holding the question; the retry gets the answer."""
    model = ScriptedModel()
    async with connect(make_server(), "2026-07-28", sampling_callback=model) as client:
        first = await client.session.call_tool(
            "summarize_incident", {"incidentId": "INC-1043"}, allow_input_required=True
        )
        assert isinstance(first, InputRequiredResult)
        assert list(first.input_requests or {}) == ["summary"]
        request = (first.input_requests or {})["summary"]
        assert isinstance(request, CreateMessageRequest)
        _assert_transcript_04_request(request.params)
        assert first.request_state
        assert "INC-1043" not in first.request_state  # sealed by the SDK, not readable by the client
        answer = CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=ANSWER), model="scripted-model"
        )
        second = await client.session.call_tool(
            "summarize_incident",
            {"incidentId": "INC-1043"},
            input_responses={"summary": answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(second, CallToolResult)
    assert second.is_error is False
    assert text_of(second) == ANSWER
    assert second.structured_content is not None
    assert second.structured_content["mode"] == "sampled"


async def test_unknown_incident_is_a_tool_error_and_asks_nobody(
    make_server: Callable[..., MCPServer], era: str
) -> None:
    model = ScriptedModel()
    result = await _summarize(make_server(), era, incident="INC-9999", sampling_callback=model)
    assert result.is_error is True
    assert text_of(result) == "No such incident: INC-9999"
    assert model.requests == []
