"""A failing provider (HTTP errors, bad bodies, refused or slow connections) falls through to the raw log.

The reason names the endpoint and the failure, and the key is never in the result or the log.
"""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from tests.fakes import FakeProvider, MemoryKeyring
from tests.helpers import text_of
from tests.summarize_helpers import (
    KEY,
    NO_CAPABILITY,
    RAW_TEXT,
    _assert_secret_absent,
    _openai,
    _summarize,
    desk_log_fixture,  # noqa: F401 -- the `desk_log` fixture
    keyed_fixture,  # noqa: F401 -- the `keyed` fixture
)

pytestmark = pytest.mark.anyio


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
    make_server: Callable[..., MCPServer],
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
    make_server: Callable[..., MCPServer], fake_provider: FakeProvider, keyed: MemoryKeyring, desk_log: io.StringIO
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
