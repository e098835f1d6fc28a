"""Tool-argument errors answer in the desk's words, not the SDK's raw pydantic text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from tests.helpers import connect, text_of

pytestmark = pytest.mark.anyio

SDK_WORDS = ("pydantic", "[type=", "validation error", "https://", "Arguments\n", "input_value", "Error executing")


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        (
            "search_incident_log",
            {"incidentId": "INC-1042", "pattern": ""},
            "Invalid arguments for search_incident_log: pattern must not be empty.",
        ),
        ("read_incident_log", {}, "Invalid arguments for read_incident_log: incidentId is required."),
        ("get_audit_log", {"limit": 0}, "Invalid arguments for get_audit_log: limit must be at least 1."),
        ("get_audit_log", {"limit": "sk-ant-api03-secretvalue"}, "get_audit_log: limit must be a whole number."),
        ("get_runbook", {"service": 5}, "Invalid arguments for get_runbook: service must be a string."),
        (
            "read_incident_log",
            {"incidentId": "INC-1042", "limit": 0, "cursor": 7},
            "Invalid arguments for read_incident_log: cursor must be a string; limit must be at least 1.",
        ),
    ],
)
async def test_argument_errors_are_in_the_desks_words(
    make_server: Callable[..., MCPServer], era: str, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    async with connect(make_server(), era) as client:
        result = await client.call_tool(tool, arguments)
        still_serving = await client.call_tool("list_incidents", {})
    text = text_of(result)
    assert result.is_error
    assert expected in text
    assert text.endswith("Check the tool's input schema and call it again.")
    for word in SDK_WORDS:
        assert word not in text, (word, text)
    assert "secretvalue" not in text, "the rejected value is the caller's data: never echoed"
    assert not still_serving.is_error


async def test_a_tools_own_error_is_left_as_it_is(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        result = await client.call_tool("get_runbook", {"service": "no-such-service"})
    assert result.is_error and text_of(result) == "No such service: no-such-service"
