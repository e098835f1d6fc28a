"""Where the provider key comes from: the environment over the keychain, and a headless (failing) keychain.

A missing keychain is reported in ``skipped`` and logged, and the chain goes on.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from mcp.server.mcpserver import MCPServer

from tests.fakes import FakeProvider, MemoryKeyring, failing_keyring, using_keyring
from tests.helpers import text_of
from tests.summarize_helpers import (
    ENV_KEY,
    KEY,
    NO_CAPABILITY,
    PROVIDER_ANSWER,
    RAW_TEXT,
    _anthropic,
    _assert_secret_absent,
    _openai,
    _summarize,
    desk_log_fixture,  # noqa: F401 -- the `desk_log` fixture
    keyed_fixture,  # noqa: F401 -- the `keyed` fixture
)

pytestmark = pytest.mark.anyio


async def test_environment_key_wins_over_the_keychain(
    make_server: Callable[..., MCPServer],
    fake_provider: FakeProvider,
    keyed: MemoryKeyring,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_API_KEY", ENV_KEY)
    fake_provider.answer_openai(PROVIDER_ANSWER)
    result = await _summarize(make_server(**_openai(fake_provider)), "2026-07-28")
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {ENV_KEY}"
    assert text_of(result) == PROVIDER_ANSWER
    _assert_secret_absent(ENV_KEY, result)
    _assert_secret_absent(KEY, result)


async def test_environment_key_without_any_keychain(
    make_server: Callable[..., MCPServer], fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_API_KEY", ENV_KEY)
    fake_provider.answer_anthropic(PROVIDER_ANSWER)
    with using_keyring(failing_keyring()):
        result = await _summarize(make_server(**_anthropic(fake_provider)), "legacy")
    assert fake_provider.requests[0].headers["x-api-key"] == ENV_KEY
    assert text_of(result) == PROVIDER_ANSWER


async def test_headless_keychain_is_reported_and_the_chain_goes_on(
    make_server: Callable[..., MCPServer], era: str, fake_provider: FakeProvider, desk_log: io.StringIO
) -> None:
    """keyring's fail backend (headless Linux): Anthropic needs a key, so no request; the reason says why."""
    with using_keyring(failing_keyring()):
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
    make_server: Callable[..., MCPServer], fake_provider: FakeProvider, desk_log: io.StringIO
) -> None:
    """A local OpenAI-compatible server (Ollama, vLLM) needs no key; the broken keychain is still logged."""
    fake_provider.answer_openai(PROVIDER_ANSWER)
    with using_keyring(failing_keyring()):
        result = await _summarize(make_server(**_openai(fake_provider)), "legacy")
    (request,) = fake_provider.requests
    assert "authorization" not in request.headers
    assert text_of(result) == PROVIDER_ANSWER
    warnings = [line for line in desk_log.getvalue().splitlines() if "no OS keychain is available" in line]
    assert len(warnings) == 1
    assert '"level": "warning"' in warnings[0]
