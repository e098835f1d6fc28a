"""Declined, failing, slow and late sampling clients (transcript 07) fall through to the raw log.

Each falls through as a normal result, never an ``isError`` one, and ``skipped`` says why; in 2026-07-28 a
retry without an answer is a decline and a late answer is judged by the time sealed in requestState.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    ClientCapabilities,
    CreateMessageResult,
    ErrorData,
    ImageContent,
    InputRequiredResult,
    InputResponses,
    SamplingCapability,
    TextContent,
)

from incident_desk.protocol import client_features
from tests.helpers import connect, text_of
from tests.summarize_helpers import (
    NO_PROVIDER,
    RAW_TEXT,
    SYSTEM_PROMPT,
    USER_TEXT,
    ScriptedModel,
    _declined,
    _summarize,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("make_model", "reason"),
    [
        (
            lambda: ScriptedModel(_declined()),
            "the client refused or failed the sampling request (-1: User rejected sampling request)",
        ),
        (
            lambda: ScriptedModel(ErrorData(code=-32603, message="model overloaded")),
            "the client refused or failed the sampling request (-32603: model overloaded)",
        ),
        (
            lambda: ScriptedModel(raises=RuntimeError("model crashed")),
            "the client refused or failed the sampling request (",
        ),
        (
            lambda: ScriptedModel(
                CreateMessageResult(role="assistant", content=TextContent(type="text", text=" "), model="m")
            ),
            "the client's model answered without text",
        ),
        (
            lambda: ScriptedModel(
                CreateMessageResult(
                    role="assistant", content=ImageContent(type="image", data="aGk=", mime_type="image/png"), model="m"
                )
            ),
            "the client's model answered without text",
        ),
    ],
    ids=["declined", "error-data", "callback-raises", "blank-text", "image"],
)
async def test_legacy_declined_or_failing_client_falls_through_to_raw(
    make_server: Callable[..., MCPServer], make_model: Callable[[], ScriptedModel], reason: str
) -> None:
    model = make_model()
    result = await _summarize(make_server(), "legacy", sampling_callback=model)
    assert len(model.requests) == 1
    assert result.is_error is False
    assert text_of(result) == RAW_TEXT
    assert result.structured_content is not None
    assert result.structured_content["mode"] == "raw"
    sampling_reason, provider_reason = result.structured_content["skipped"]
    assert sampling_reason.startswith("sampling: " + reason)
    assert provider_reason == NO_PROVIDER


@pytest.mark.timing
async def test_legacy_slow_client_times_out_to_raw(make_server: Callable[..., MCPServer]) -> None:
    """Transcript 07 without the isError: the desk stops waiting after sampling_timeout_seconds."""
    model = ScriptedModel(delay=3.0)
    started = time.monotonic()
    result = await _summarize(make_server(sampling_timeout_seconds=0.5), "legacy", sampling_callback=model)
    elapsed = time.monotonic() - started
    assert len(model.requests) == 1
    assert elapsed < 2.5, f"the desk waited {elapsed:.1f}s for a client it should have given up on after 0.5s"
    assert result.is_error is False
    assert text_of(result) == RAW_TEXT
    assert result.structured_content is not None
    assert result.structured_content["skipped"] == [
        "sampling: the client's model gave no answer within 0.5s",
        NO_PROVIDER,
    ]


async def test_2026_sdk_client_turns_a_declined_sampling_into_a_protocol_error(
    make_server: Callable[..., MCPServer],
) -> None:
    """Why "declined" is tested in the legacy era only.

    In 2026-07-28 the SDK client's MRTR driver (mcp/client/_input_required.py) raises ``MCPError`` as soon as a
    callback returns ``ErrorData``: the retry that would carry the decline never reaches the server, so the
    desk cannot turn it into a raw-log result. This pins that SDK behaviour; if it changes, the decline should
    fall through as it does in 2025-11-25 (and the retry-without-answer test below shows the desk is ready).
    """
    model = ScriptedModel(_declined())
    async with connect(make_server(), "2026-07-28", sampling_callback=model) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    assert (caught.value.code, caught.value.message) == (-1, "User rejected sampling request")
    assert len(model.requests) == 1


async def test_2026_retry_without_an_answer_is_a_decline_not_a_new_question(
    make_server: Callable[..., MCPServer],
) -> None:
    """A 2026 client that retries with the round's state but no answer has declined: fall through, don't re-ask."""
    model = ScriptedModel()
    async with connect(make_server(), "2026-07-28", sampling_callback=model) as client:
        first = await client.session.call_tool(
            "summarize_incident", {"incidentId": "INC-1043"}, allow_input_required=True
        )
        assert isinstance(first, InputRequiredResult)
        no_answers: tuple[InputResponses | None, ...] = ({}, None)
        retries = [
            await client.session.call_tool(
                "summarize_incident",
                {"incidentId": "INC-1043"},
                input_responses=responses,
                request_state=first.request_state,
                allow_input_required=True,
            )
            for responses in no_answers
        ]
    for retry in retries:
        assert isinstance(retry, CallToolResult), "the desk asked the same question again"
        assert retry.is_error is False
        assert text_of(retry) == RAW_TEXT
        assert retry.structured_content is not None
        sampling_reason, provider_reason = retry.structured_content["skipped"]
        assert sampling_reason == "sampling: the client retried without answering the sampling request"
        assert provider_reason == NO_PROVIDER


async def test_2026_late_answer_falls_through_to_raw(make_server: Callable[..., MCPServer]) -> None:
    """The server does not wait in 2026: it checks the time sealed in requestState when the retry arrives."""
    model = ScriptedModel(delay=0.8)
    result = await _summarize(make_server(sampling_timeout_seconds=0.3), "2026-07-28", sampling_callback=model)
    assert len(model.requests) == 1, "a late answer must not start a new round"
    assert result.is_error is False
    assert text_of(result) == RAW_TEXT
    assert result.structured_content is not None
    sampling_reason, provider_reason = result.structured_content["skipped"]
    assert sampling_reason.startswith("sampling: no answer within 0.3s (the retry came after ")
    assert provider_reason == NO_PROVIDER


class _FailingSession:
    """Stands in for the server session when a failure cannot be staged through a real client."""

    can_send_request = True

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.sent: list[str] = []

    async def send_request(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self.sent.append(request.method)
        raise self.error


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (MCPError(CONNECTION_CLOSED, "Connection closed"), "the client disconnected during the sampling request"),
        (anyio.BrokenResourceError(), "the client disconnected during the sampling request"),
        (MCPError(REQUEST_TIMEOUT, "timed out"), "the client's model gave no answer within 0.5s"),
        (ValueError("bad result"), "the client's sampling answer was malformed: ValueError"),
    ],
    ids=["connection-closed", "broken-stream", "timeout", "malformed"],
)
async def test_legacy_failures_that_a_client_cannot_stage_are_reasons_too(error: BaseException, reason: str) -> None:
    """A client vanishing mid-question (the SDK wakes the wait with CONNECTION_CLOSED) is no refusal."""
    session = _FailingSession(error)
    ctx: Any = SimpleNamespace(
        client_capabilities=ClientCapabilities(sampling=SamplingCapability()),
        protocol_version="2025-11-25",
        session=session,
        request_id=7,
        request_state=None,
        input_responses=None,
    )
    question = client_features.SamplingQuestion(SYSTEM_PROMPT, USER_TEXT, 120, 0.2)
    outcome = await client_features.sample(ctx, question, timeout=0.5, binding={"incidentId": "INC-1043"})
    assert session.sent == ["sampling/createMessage"]
    assert outcome == client_features.NotSampled(reason)
