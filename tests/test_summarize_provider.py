"""summarize_incident step 2, the desk's own model provider on a real loopback HTTP server.

The OpenAI and Anthropic requests have their exact shape and carry the keychain key without leaking it;
sampling is preferred when it answers, and the provider is used when sampling fails.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from tests.fakes import FakeProvider, MemoryKeyring
from tests.helpers import text_of
from tests.summarize_helpers import (
    ANSWER,
    KEY,
    NO_CAPABILITY,
    PROVIDER_ANSWER,
    PROVIDER_USER_TEXT,
    SYSTEM_PROMPT,
    ScriptedModel,
    _anthropic,
    _assert_secret_absent,
    _declined,
    _openai,
    _summarize,
    desk_log_fixture,  # noqa: F401 -- the `desk_log` fixture
    keyed_fixture,  # noqa: F401 -- the `keyed` fixture
)

pytestmark = pytest.mark.anyio


async def test_openai_provider_with_the_key_from_the_keychain(
    make_server: Callable[..., MCPServer],
    era: str,
    fake_provider: FakeProvider,
    keyed: MemoryKeyring,
    desk_log: io.StringIO,
) -> None:
    fake_provider.answer_openai(f"  {PROVIDER_ANSWER}\n")
    result = await _summarize(make_server(**_openai(fake_provider)), era)
    (request,) = fake_provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": PROVIDER_USER_TEXT}],
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
    make_server: Callable[..., MCPServer],
    era: str,
    fake_provider: FakeProvider,
    keyed: MemoryKeyring,
    desk_log: io.StringIO,
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
        "messages": [{"role": "user", "content": PROVIDER_USER_TEXT}],
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
    make_server: Callable[..., MCPServer], era: str, fake_provider: FakeProvider, keyed: MemoryKeyring
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
    make_server: Callable[..., MCPServer],
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


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_provider_answer_that_quotes_its_key_or_a_secret_is_masked(
    make_server: Callable[..., MCPServer],
    era: str,
    fake_provider: FakeProvider,
    keyed: MemoryKeyring,
    memory_keyring: MemoryKeyring,
    kind: str,
) -> None:
    """The provider's own key (whatever its shape) and any secret the answer quotes never come back."""
    plain_key = "plainkey-7Hq2xW9rT4vB8nL3mK6p"  # no vendor shape, no telling name: only the literal can catch it
    memory_keyring.set_password("incident-desk", "provider-api-key", plain_key)
    answer = f"Your key is {plain_key}. The log also shows password=Hunter2Secret99 and {KEY}."
    (fake_provider.answer_openai if kind == "openai" else fake_provider.answer_anthropic)(answer)
    options = _openai(fake_provider) if kind == "openai" else _anthropic(fake_provider)
    result = await _summarize(make_server(**options), era)
    assert result.structured_content is not None and result.structured_content["mode"] == "provider"
    for secret in (plain_key, "Hunter2Secret99", KEY):
        _assert_secret_absent(secret, result)
    assert "Your key is [REDACTED]" in text_of(result)
