"""summarize_incident's degrade chain (DESIGN §3) through a real MCP client, in both protocol eras.

Client sampling (transcript 04), then the desk's own model provider on a real loopback HTTP server, then the
raw log (transcript 06). A decline, a client error or a slow client (transcript 07) falls through to the
next step as a normal result, never an ``isError`` one, and ``skipped`` says why.
"""

from __future__ import annotations

import io
import logging
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
import structlog
from keyring.backends import fail
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ErrorData,
    ImageContent,
    InputRequiredResult,
    InputResponses,
    SamplingCapability,
    TextContent,
)

from incident_desk import client_features
from incident_desk import log as desk_logging
from tests.conftest import ROOT, SAMPLE_1043_LOG, child_env, connect, text_of
from tests.fakes import FakeProvider, MemoryKeyring, using_keyring

pytestmark = pytest.mark.anyio

SYSTEM_PROMPT = "You are an SRE. Answer in two sentences, no preamble."
USER_TEXT = "Summarize this incident log:\n" + SAMPLE_1043_LOG
RAW_TEXT = "SAMPLING_UNAVAILABLE -- client has no model to lend. Raw log:\n" + SAMPLE_1043_LOG
ANSWER = "Search p99 latency breached its 500ms SLO while an index segment merge ran. Let the merge finish."
PROVIDER_ANSWER = "A segment merge on search-api pushed p99 latency to 840ms. Throttle merges during peak."
KEY = "sk-proj-DESKKEY0123456789abcdefSECRET"
ENV_KEY = "sk-proj-ENVKEY9876543210zyxwvuSECRET"
NO_CAPABILITY = "sampling: the client did not declare the sampling capability"
NO_PROVIDER = "provider: no model provider is configured"
KEYRING_SERVICE = "incident-desk"
KEYRING_ENTRY = "provider-api-key"


class ScriptedModel:
    """A sampling callback playing the client's model: records every request, then answers as scripted."""

    def __init__(
        self,
        answer: CreateMessageResult | ErrorData | None = None,
        *,
        delay: float = 0.0,
        raises: Exception | None = None,
    ) -> None:
        self.answer = answer or CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=ANSWER), model="scripted-model"
        )
        self.delay = delay
        self.raises = raises
        self.requests: list[CreateMessageRequestParams] = []

    async def __call__(
        self, ctx: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        self.requests.append(params)
        if self.delay:
            await anyio.sleep(self.delay)
        if self.raises is not None:
            raise self.raises
        return self.answer


def _declined() -> ErrorData:
    return ErrorData(code=-1, message="User rejected sampling request")


async def _summarize(server: Any, mode: str, incident: str = "INC-1043", **callbacks: Any) -> CallToolResult:
    async with connect(server, mode, **callbacks) as client:
        return await client.call_tool("summarize_incident", {"incidentId": incident})


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


@pytest.fixture
def sampling_requests_sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every server-to-client request the server sessions send (the 2025-11-25 path), by method."""
    sent: list[str] = []
    original = ServerSession.send_request

    async def counting(self: ServerSession, request: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(request.method)
        return await original(self, request, *args, **kwargs)

    monkeypatch.setattr(ServerSession, "send_request", counting)
    return sent


@pytest.fixture
def ungated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend every client declared sampling: the probe the desk must never make, to show it would be seen."""
    real_view = client_features.view

    def lying_view(ctx: Any) -> client_features.ClientView:
        return replace(real_view(ctx), can_sample=True)

    monkeypatch.setattr(client_features, "view", lying_view)


@pytest.fixture
def desk_log() -> Iterator[io.StringIO]:
    """Everything the desk logs (structlog and stdlib, SDK and HTTP client included) at DEBUG, as JSON lines."""
    buffer = io.StringIO()
    saved_structlog = structlog.get_config()
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    noisy = {name: logging.getLogger(name).level for name in ("mcp", "uvicorn.access", "httpx2", "sse_starlette")}
    desk_logging.configure("debug", "json", stream=buffer)
    try:
        yield buffer
    finally:
        structlog.configure(**saved_structlog)
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
        for name, level in noisy.items():
            logging.getLogger(name).setLevel(level)


@pytest.fixture
def keyed(memory_keyring: MemoryKeyring) -> MemoryKeyring:
    """The provider key stored in the (in-memory) OS keychain, where `incident-desk key set` puts it."""
    memory_keyring.set_password(KEYRING_SERVICE, KEYRING_ENTRY, KEY)
    return memory_keyring


def _openai(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "provider_base_url": fake.url + "/v1", "provider_model": "gpt-test", **extra}


def _anthropic(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {"provider": "anthropic", "provider_base_url": fake.url, "provider_model": "claude-test", **extra}


def _assert_secret_absent(secret: str, *places: Any) -> None:
    """Neither the key nor its distinctive middle appears in a result (text + structured) or log text."""
    middle = secret[8:24]
    for place in places:
        text = place if isinstance(place, str) else place.model_dump_json(by_alias=True)
        assert secret not in text
        assert middle not in text


# Step 1: client sampling -----------------------------------------------------------------------------------


async def test_sampling_sends_exactly_transcript_04_and_returns_the_answer(make_server, era: str) -> None:
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


async def test_2026_asks_through_input_required_with_a_sealed_state(make_server) -> None:
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


async def test_unknown_incident_is_a_tool_error_and_asks_nobody(make_server, era: str) -> None:
    model = ScriptedModel()
    result = await _summarize(make_server(), era, incident="INC-9999", sampling_callback=model)
    assert result.is_error is True
    assert text_of(result) == "No such incident: INC-9999"
    assert model.requests == []


# No capability: transcript 06, and no request sent ---------------------------------------------------------


async def test_no_sampling_capability_gives_transcript_06_without_asking(
    make_server, era: str, sampling_requests_sent: list[str]
) -> None:
    async with connect(make_server(), era) as client:
        first = await client.session.call_tool(
            "summarize_incident", {"incidentId": "INC-1043"}, allow_input_required=True
        )
    # 2025-11-25: no sampling/createMessage left the server. 2026-07-28: no input_required round was asked.
    assert sampling_requests_sent == []
    assert isinstance(first, CallToolResult)
    assert first.is_error is False
    assert text_of(first) == RAW_TEXT
    assert first.structured_content == {
        "incident_id": "INC-1043",
        "mode": "raw",
        "text": RAW_TEXT,
        "model": None,
        "skipped": [NO_CAPABILITY, NO_PROVIDER],
    }


@pytest.mark.usefixtures("ungated")
async def test_the_no_probe_checks_would_see_an_ungated_request(
    make_server, era: str, sampling_requests_sent: list[str]
) -> None:
    """Control for the test above: with the capability gate lied to, both eras' instruments see the probe."""
    async with connect(make_server(), era) as client:
        first = await client.session.call_tool(
            "summarize_incident", {"incidentId": "INC-1043"}, allow_input_required=True
        )
    if era == "legacy":
        assert sampling_requests_sent == ["sampling/createMessage"]
        assert isinstance(first, CallToolResult)
        assert first.structured_content is not None
        assert first.structured_content["skipped"][0].startswith(
            "sampling: the client refused or failed the sampling request"
        )
    else:
        assert isinstance(first, InputRequiredResult)
        assert list(first.input_requests or {}) == ["summary"]


# Declined, failing and slow clients fall through -----------------------------------------------------------


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
    make_server, make_model: Callable[[], ScriptedModel], reason: str
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


async def test_legacy_slow_client_times_out_to_raw(make_server) -> None:
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


async def test_2026_sdk_client_turns_a_declined_sampling_into_a_protocol_error(make_server) -> None:
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


async def test_2026_retry_without_an_answer_is_a_decline_not_a_new_question(make_server) -> None:
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


async def test_2026_late_answer_falls_through_to_raw(make_server) -> None:
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


# Step 2: the desk's own model provider, on a real loopback HTTP server ------------------------------------


async def test_openai_provider_with_the_key_from_the_keychain(
    make_server, era: str, fake_provider: FakeProvider, keyed: MemoryKeyring, desk_log: io.StringIO
) -> None:
    fake_provider.answer_openai(f"  {PROVIDER_ANSWER}\n")
    result = await _summarize(make_server(**_openai(fake_provider)), era)
    (request,) = fake_provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": USER_TEXT}],
        "max_tokens": 120,
        "temperature": 0.2,
    }
    assert result.is_error is False
    assert text_of(result) == PROVIDER_ANSWER
    assert result.structured_content == {
        "incident_id": "INC-1043",
        "mode": "provider",
        "text": PROVIDER_ANSWER,
        "model": "gpt-test-served",
        "skipped": [NO_CAPABILITY],
    }
    logged = desk_log.getvalue()
    assert "summary step skipped" in logged  # the capture works: the desk's own lines are in it
    _assert_secret_absent(KEY, result, logged)


async def test_anthropic_provider_request_shape(
    make_server, era: str, fake_provider: FakeProvider, keyed: MemoryKeyring, desk_log: io.StringIO
) -> None:
    fake_provider.answer_anthropic(PROVIDER_ANSWER)
    result = await _summarize(make_server(**_anthropic(fake_provider)), era)
    (request,) = fake_provider.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert request.body == {
        "model": "claude-test",
        "system": SYSTEM_PROMPT,
        "messages": [{"role": "user", "content": USER_TEXT}],
        "max_tokens": 120,
        "temperature": 0.2,
    }
    assert text_of(result) == PROVIDER_ANSWER
    assert result.structured_content is not None
    assert (result.structured_content["mode"], result.structured_content["model"]) == (
        "provider",
        "claude-test-served",
    )
    _assert_secret_absent(KEY, result, desk_log.getvalue())


async def test_sampling_is_preferred_over_a_configured_provider(
    make_server, era: str, fake_provider: FakeProvider, keyed: MemoryKeyring
) -> None:
    fake_provider.answer_openai(PROVIDER_ANSWER)
    result = await _summarize(make_server(**_openai(fake_provider)), era, sampling_callback=ScriptedModel())
    assert text_of(result) == ANSWER
    assert fake_provider.requests == []


@pytest.mark.parametrize(
    ("era_mode", "make_model", "settings", "reason"),
    [
        (
            "legacy",
            lambda: ScriptedModel(_declined()),
            {},
            "sampling: the client refused or failed the sampling request (-1: User rejected sampling request)",
        ),
        (
            "legacy",
            lambda: ScriptedModel(delay=3.0),
            {"sampling_timeout_seconds": 0.5},
            "sampling: the client's model gave",
        ),
        (
            "2026-07-28",
            lambda: ScriptedModel(delay=0.8),
            {"sampling_timeout_seconds": 0.3},
            "sampling: no answer within 0.3s",
        ),
    ],
    ids=["legacy-declined", "legacy-slow", "2026-late"],
)
async def test_failed_sampling_falls_through_to_the_provider(
    make_server,
    fake_provider: FakeProvider,
    keyed: MemoryKeyring,
    era_mode: str,
    make_model: Callable[[], ScriptedModel],
    settings: dict[str, Any],
    reason: str,
) -> None:
    model = make_model()
    fake_provider.answer_openai(PROVIDER_ANSWER)
    server = make_server(**_openai(fake_provider, **settings))
    result = await _summarize(server, era_mode, sampling_callback=model)
    assert len(model.requests) == 1
    assert len(fake_provider.requests) == 1
    assert result.is_error is False
    assert text_of(result) == PROVIDER_ANSWER
    assert result.structured_content is not None
    assert result.structured_content["mode"] == "provider"
    (skipped,) = result.structured_content["skipped"]
    assert skipped.startswith(reason)


async def test_environment_key_wins_over_the_keychain(
    make_server, fake_provider: FakeProvider, keyed: MemoryKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_API_KEY", ENV_KEY)
    fake_provider.answer_openai(PROVIDER_ANSWER)
    result = await _summarize(make_server(**_openai(fake_provider)), "2026-07-28")
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {ENV_KEY}"
    assert text_of(result) == PROVIDER_ANSWER
    _assert_secret_absent(ENV_KEY, result)
    _assert_secret_absent(KEY, result)


async def test_environment_key_without_any_keychain(
    make_server, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_API_KEY", ENV_KEY)
    fake_provider.answer_anthropic(PROVIDER_ANSWER)
    with using_keyring(fail.Keyring()):
        result = await _summarize(make_server(**_anthropic(fake_provider)), "legacy")
    assert fake_provider.requests[0].headers["x-api-key"] == ENV_KEY
    assert text_of(result) == PROVIDER_ANSWER


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("mode", "status", "body", "headers", "expected"),
    [
        (
            "legacy",
            401,
            {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error"}},
            {},
            "HTTP 401 Unauthorized: Incorrect API key provided: [redacted].",
        ),
        (
            "2026-07-28",
            401,
            {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error"}},
            {},
            "HTTP 401 Unauthorized: Incorrect API key provided: [redacted].",
        ),
        ("2026-07-28", 500, b"<html>upstream exploded</html>", {}, "HTTP 500 Internal Server Error"),
        ("legacy", 200, b"not json{", {}, "answer was not valid JSON"),
        ("2026-07-28", 200, {"choices": []}, {}, "answer had no text"),
        ("legacy", 200, b"this is not gzip", {"content-encoding": "gzip"}, "failed unexpectedly (DecodingError)"),
    ],
    ids=["401-echoing-the-key", "401-2026", "500-html", "bad-json", "no-text", "undecodable-body"],
)
async def test_provider_failures_fall_through_to_raw_without_the_key(
    make_server,
    fake_provider: FakeProvider,
    keyed: MemoryKeyring,
    desk_log: io.StringIO,
    mode: str,
    status: int,
    body: Any,
    headers: dict[str, str],
    expected: str,
) -> None:
    fake_provider.answer(status, body, headers=headers)
    result = await _summarize(make_server(**_openai(fake_provider)), mode)
    assert len(fake_provider.requests) == 1
    assert result.is_error is False
    assert text_of(result) == RAW_TEXT
    assert result.structured_content is not None
    assert result.structured_content["mode"] == "raw"
    sampling_reason, provider_reason = result.structured_content["skipped"]
    assert sampling_reason == NO_CAPABILITY
    assert provider_reason == f"provider: openai provider at {fake_provider.url}/v1/chat/completions: {expected}"
    logged = desk_log.getvalue()
    assert provider_reason.removeprefix("provider: ") in logged
    _assert_secret_absent(KEY, result, logged)


async def test_provider_unreachable_or_slow_falls_through_to_raw(
    make_server, fake_provider: FakeProvider, keyed: MemoryKeyring, desk_log: io.StringIO
) -> None:
    port = _closed_port()
    refused = await _summarize(
        make_server(provider="openai", provider_base_url=f"http://127.0.0.1:{port}/v1", provider_model="m"),
        "legacy",
    )
    fake_provider.answer_openai("too late", model="m")
    fake_provider.delay = 3.0
    started = time.monotonic()
    slow = await _summarize(make_server(**_openai(fake_provider, provider_timeout_seconds=0.3)), "2026-07-28")
    assert time.monotonic() - started < 2.5
    assert refused.structured_content is not None
    assert slow.structured_content is not None
    assert refused.structured_content["skipped"][1] == (
        f"provider: openai provider at http://127.0.0.1:{port}/v1/chat/completions: connection refused"
    )
    assert slow.structured_content["skipped"][1] == (
        f"provider: openai provider at {fake_provider.url}/v1/chat/completions: timed out after 0.3s"
    )
    for result in (refused, slow):
        assert result.is_error is False
        assert text_of(result) == RAW_TEXT
    _assert_secret_absent(KEY, refused, slow, desk_log.getvalue())


async def test_headless_keychain_is_reported_and_the_chain_goes_on(
    make_server, era: str, fake_provider: FakeProvider, desk_log: io.StringIO
) -> None:
    """keyring's fail backend (headless Linux): Anthropic needs a key, so no request; the reason says why."""
    with using_keyring(fail.Keyring()):
        result = await _summarize(make_server(**_anthropic(fake_provider)), era)
    assert fake_provider.requests == []
    assert result.is_error is False
    assert text_of(result) == RAW_TEXT
    assert result.structured_content is not None
    sampling_reason, provider_reason = result.structured_content["skipped"]
    assert sampling_reason == NO_CAPABILITY
    assert provider_reason.startswith(
        f"provider: anthropic provider at {fake_provider.url}/v1/messages: needs an API key and none is configured"
    )
    assert "no OS keychain is available" in provider_reason
    assert "INCIDENT_DESK_PROVIDER_API_KEY" in provider_reason
    assert "no OS keychain is available" in desk_log.getvalue()


async def test_headless_keychain_with_a_keyless_openai_endpoint_still_answers_and_is_logged(
    make_server, fake_provider: FakeProvider, desk_log: io.StringIO
) -> None:
    """A local OpenAI-compatible server (Ollama, vLLM) needs no key; the broken keychain is still logged."""
    fake_provider.answer_openai(PROVIDER_ANSWER)
    with using_keyring(fail.Keyring()):
        result = await _summarize(make_server(**_openai(fake_provider)), "legacy")
    (request,) = fake_provider.requests
    assert "authorization" not in request.headers
    assert text_of(result) == PROVIDER_ANSWER
    warnings = [line for line in desk_log.getvalue().splitlines() if "no OS keychain is available" in line]
    assert len(warnings) == 1
    assert '"level": "warning"' in warnings[0]


# The real thing: `python -m incident_desk` over stdio --------------------------------------------------


@pytest.mark.subprocess
async def test_stdio_subprocess_uses_the_provider_and_never_logs_the_key(
    tmp_path: Path, fake_provider: FakeProvider
) -> None:
    """What a desktop client launches, key from the environment, everything the server logs at DEBUG captured."""
    env = child_env(
        tmp_path / "audit.sqlite3",
        INCIDENT_DESK_PROVIDER="openai",
        INCIDENT_DESK_PROVIDER_BASE_URL=fake_provider.url + "/v1",
        INCIDENT_DESK_PROVIDER_MODEL="gpt-test",
        INCIDENT_DESK_PROVIDER_API_KEY=KEY,
        INCIDENT_DESK_LOG_LEVEL="debug",
        INCIDENT_DESK_LOG_FORMAT="json",
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    stderr_path = tmp_path / "server-stderr.log"
    with stderr_path.open("w", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            fake_provider.answer_openai(PROVIDER_ANSWER)
            answered = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
            fake_provider.answer(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
            rejected = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    stderr = stderr_path.read_text(encoding="utf-8")
    assert [r.headers["authorization"] for r in fake_provider.requests] == [f"Bearer {KEY}"] * 2
    assert answered.structured_content is not None
    assert (answered.structured_content["mode"], text_of(answered)) == ("provider", PROVIDER_ANSWER)
    assert rejected.structured_content is not None
    assert rejected.structured_content["mode"] == "raw"
    assert text_of(rejected) == RAW_TEXT
    assert rejected.structured_content["skipped"][1].endswith(
        "HTTP 401 Unauthorized: Incorrect API key provided: [redacted]"
    )
    assert "summary step skipped" in stderr  # the server did log, at debug, to the captured stream
    _assert_secret_absent(KEY, answered, rejected, stderr)
