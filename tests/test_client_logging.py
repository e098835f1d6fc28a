"""MCP logging: desk events reach clients that ask (setLevel in 2025, per-request level in 2026), and every
structured log line written while a request is handled carries its request id."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from mcp.server.mcpserver import MCPServer
from mcp_types import LoggingMessageNotificationParams

from incident_desk.observability import log
from tests.helpers import connect

pytestmark = pytest.mark.anyio


class Collected:
    def __init__(self) -> None:
        self.messages: list[LoggingMessageNotificationParams] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.messages.append(params)

    def events(self) -> list[tuple[str, Any]]:
        return [(m.level, m.data.get("event") if isinstance(m.data, dict) else m.data) for m in self.messages]


async def test_2025_clients_get_events_only_after_set_level(make_server: Callable[..., MCPServer]) -> None:
    collected = Collected()
    async with connect(make_server(), "legacy", logging_callback=collected) as client:
        assert client.server_capabilities.logging is not None, "the desk advertises logging to 2025 clients"
        await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
        before = list(collected.events())
        await client.set_logging_level("warning")
        await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
        at_warning = list(collected.events())
        await client.set_logging_level("error")
        await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
        at_error = list(collected.events())
    assert before == []
    assert at_warning == [("warning", "summary step skipped"), ("warning", "summary step skipped")]
    step_fields = [m.data["step"] for m in collected.messages]
    assert step_fields == ["sampling", "provider"]
    assert collected.messages[0].logger == "incident-desk"
    assert at_error == at_warning, "warnings must not reach a client that asked for errors only"


@pytest.mark.parametrize(("level", "expected"), [(None, 0), ("warning", 2), ("error", 0)])
async def test_2026_clients_opt_in_per_request(
    make_server: Callable[..., MCPServer], level: str | None, expected: int
) -> None:
    collected = Collected()
    async with connect(make_server(), "2026-07-28", logging_callback=collected, log_level=level) as client:
        await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    assert len(collected.messages) == expected
    assert all(event == "summary step skipped" for _, event in collected.events())


async def test_structured_log_lines_carry_the_request_id(make_server: Callable[..., MCPServer]) -> None:
    stream = io.StringIO()
    log.configure("info", "json", stream=stream)
    try:
        async with connect(make_server(), "legacy") as client:
            await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    finally:
        structlog.reset_defaults()
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    skipped = [line for line in lines if line.get("event") == "summary step skipped"]
    assert len(skipped) == 2
    assert all(line["method"] == "tools/call" and line["request_id"] for line in skipped)
    assert len({line["request_id"] for line in skipped}) == 1
