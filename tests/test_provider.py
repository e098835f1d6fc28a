"""The direct provider client against a real loopback HTTP server: request shapes, answers, and failures."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from incident_desk.core.neighbours.provider import ProviderAnswer, ProviderConfig, ProviderError, complete
from tests.fakes import FakeProvider, running_fake_provider
from tests.faulty_neighbour import faulty_neighbour

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdefSECRET"
SYSTEM = "You are an SRE. Answer in two sentences, no preamble."
USER = "Summarize this incident log:\nERROR db down"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with running_fake_provider() as provider:
        yield provider


def _openai(base: str, timeout: float = 5.0) -> ProviderConfig:
    return ProviderConfig(kind="openai", model="gpt-test", base_url=base + "/v1/", timeout_seconds=timeout)


def _anthropic(base: str, timeout: float = 5.0) -> ProviderConfig:
    return ProviderConfig(kind="anthropic", model="claude-test", base_url=base, timeout_seconds=timeout)


async def _ask(config: ProviderConfig, key: str | None = KEY) -> ProviderAnswer:
    return await complete(config, key, system=SYSTEM, user=USER, max_tokens=120, temperature=0.2)


def test_endpoints_default_and_trailing_slashes() -> None:
    assert ProviderConfig("openai", "m", None, 1).endpoint == "https://api.openai.com/v1/chat/completions"
    assert ProviderConfig("anthropic", "m", None, 1).endpoint == "https://api.anthropic.com/v1/messages"
    local = ProviderConfig("openai", "m", "http://localhost:11434/v1//", 1)
    assert local.endpoint == "http://localhost:11434/v1/chat/completions"
    proxied = ProviderConfig("anthropic", "m", "https://gw.example/anthropic/", 1)
    assert proxied.endpoint == "https://gw.example/anthropic/v1/messages"


async def test_openai_request_shape_and_answer(server: FakeProvider) -> None:
    server.answer(200, {"model": "gpt-test-2025", "choices": [{"message": {"content": "  DB is down.  "}}]})
    answer = await _ask(_openai(server.url))
    assert answer == ProviderAnswer(text="DB is down.", model="gpt-test-2025")
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert "x-api-key" not in request.headers
    assert request.body == {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
        "max_tokens": 120,
        "temperature": 0.2,
    }


async def test_openai_without_key_sends_no_authorization(server: FakeProvider) -> None:
    server.answer(200, {"choices": [{"message": {"content": [{"type": "text", "text": "local answer"}]}}]})
    answer = await _ask(_openai(server.url), key=None)
    assert answer == ProviderAnswer(text="local answer", model="gpt-test")
    assert "authorization" not in server.requests[0].headers


async def test_anthropic_request_shape_and_answer(server: FakeProvider) -> None:
    server.answer(
        200,
        {
            "model": "claude-test-1",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "Disk full. "},
                {"type": "text", "text": "Restart db."},
            ],
        },
    )
    answer = await _ask(_anthropic(server.url))
    assert answer == ProviderAnswer(text="Disk full. Restart db.", model="claude-test-1")
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert request.body == {
        "model": "claude-test",
        "system": SYSTEM,
        "messages": [{"role": "user", "content": USER}],
        "max_tokens": 120,
        "temperature": 0.2,
    }


async def test_anthropic_without_key_fails_before_any_request(server: FakeProvider) -> None:
    with pytest.raises(ProviderError, match="needs an API key"):
        await _ask(_anthropic(server.url), key=None)
    assert server.requests == []


async def test_an_answer_over_the_cap_is_refused_and_read_no_further(server: FakeProvider) -> None:
    server.answer(200, {"choices": [{"message": {"content": "x" * 50_000}}]})
    config = ProviderConfig("openai", "gpt-test", server.url + "/v1", 5.0, max_response_bytes=4096)
    with pytest.raises(ProviderError) as caught:
        await _ask(config)
    assert str(caught.value).startswith(f"openai provider at {server.url}/v1/chat/completions: answered too large")
    assert "over the cap of 4096 bytes" in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "status", "body", "expected"),
    [
        (
            "openai",
            401,
            {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error"}},
            "HTTP 401 Unauthorized: Incorrect API key provided: [redacted].",
        ),
        (
            "anthropic",
            400,
            {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too big"}},
            "HTTP 400 Bad Request: max_tokens: too big",
        ),
        (
            "openai",
            404,
            {"error": "model 'gpt-test' not found"},
            "HTTP 404 Not Found: model 'gpt-test' not found",
        ),
        ("openai", 500, b"<html>upstream exploded</html>", "HTTP 500 Internal Server Error"),
        ("anthropic", 200, b"not json{", "answer was not valid JSON"),
        ("openai", 200, {"choices": []}, "answer had no text"),
        ("openai", 200, {"choices": [{"message": {"content": None, "refusal": "no"}}]}, "answer had no text"),
        ("anthropic", 200, {"content": [{"type": "tool_use", "id": "x"}]}, "answer had no text"),
        ("anthropic", 200, {"content": [{"type": "text", "text": "   "}]}, "answer had no text"),
    ],
)
async def test_failures_are_provider_errors_without_the_key(
    server: FakeProvider, kind: str, status: int, body: Any, expected: str
) -> None:
    server.answer(status, body)
    config = _openai(server.url) if kind == "openai" else _anthropic(server.url)
    with pytest.raises(ProviderError) as caught:
        await _ask(config)
    message = str(caught.value)
    assert message == f"{kind} provider at {server.url}{config.endpoint.removeprefix(server.url)}: {expected}"
    assert KEY not in message
    assert "SECRET" not in message
    assert caught.value.__cause__ is None


async def test_long_error_message_is_truncated_and_keylike_strings_redacted(server: FakeProvider) -> None:
    server.answer(429, {"error": {"message": "slow down sk-otherkey123456789 " + "x" * 500}})
    with pytest.raises(ProviderError) as caught:
        await _ask(_openai(server.url))
    message = str(caught.value)
    assert "HTTP 429 Too Many Requests: slow down [redacted] xxx" in message
    assert "sk-otherkey" not in message
    assert message.endswith("…")
    assert len(message) < 300


async def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ProviderError) as caught:
        await _ask(_openai(f"http://127.0.0.1:{port}"))
    assert str(caught.value) == f"openai provider at http://127.0.0.1:{port}/v1/chat/completions: connection refused"
    assert KEY not in str(caught.value)


async def test_slow_server_times_out(server: FakeProvider) -> None:
    server.answer(200, {"choices": [{"message": {"content": "too late"}}]}, delay=3)
    with pytest.raises(ProviderError) as caught:
        await _ask(_anthropic(server.url, timeout=0.2))
    assert str(caught.value).endswith(": timed out after 0.2s")
    assert KEY not in str(caught.value)


async def test_credentials_in_base_url_stay_out_of_messages(server: FakeProvider) -> None:
    server.answer(503, b"")
    port = server.url.rsplit(":", 1)[1]
    config = ProviderConfig("openai", "m", f"http://user:hunter2@127.0.0.1:{port}/v1", 5)
    with pytest.raises(ProviderError) as caught:
        await _ask(config)
    assert "hunter2" not in str(caught.value)
    assert "HTTP 503" in str(caught.value)


@pytest.mark.timing
async def test_a_provider_dripping_its_answer_is_cut_off_at_the_whole_deadline() -> None:
    """A byte a second never trips a per-read timeout; the provider's timeout is the whole exchange's."""
    with faulty_neighbour("drip") as neighbour:
        began = time.monotonic()
        with pytest.raises(ProviderError) as caught:
            await _ask(_openai(neighbour.url, timeout=1.5))
        took = time.monotonic() - began
    assert str(caught.value) == f"openai provider at {neighbour.url}/v1/chat/completions: timed out after 1.5s"
    assert took < 2.5  # the drip never ends by itself: 1 s of slack for a loaded machine
