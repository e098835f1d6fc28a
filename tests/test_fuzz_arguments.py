"""Property-based fuzzing of tool, resource and prompt arguments through a real in-process client.

Whatever a client sends as an incident id, a cursor, a pattern, a service name or a ticket, the desk answers with
a result or a clean protocol error that names the problem, never a masked crash ("Error executing tool x" with
nothing after it, "Error creating resource ...", "Error rendering prompt ..."), and the session stays usable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from incident_desk.core.acts.approval import TICKET
from incident_desk.core.journal.audit import FIELD_LIMITS
from incident_desk.core.names import INCIDENT_ID
from tests.helpers import connect, text_of
from tests.restart_helpers import Operator

pytestmark = pytest.mark.anyio

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ANY_TEXT = st.text(max_size=200)
HOSTILE_NAMES = st.sampled_from(
    [
        *("", ".", "..", ".hidden", "INC-1042.", "../INC-1042", "INC-1042/../../etc/passwd", "INC-1042\x00"),
        *("a" * 65, "C:\\x", "%2e%2e", "\u202e"),
    ]
)
NAMES = st.one_of(ANY_TEXT, HOSTILE_NAMES, st.sampled_from(["INC-1042", "INC-1043", "payments-api", "search-api"]))
CURSORS = st.one_of(
    st.none(),
    ANY_TEXT,
    st.builds(lambda line, offset: f"L{line}@{offset}", st.integers(-3, 10**16), st.integers(-3, 10**16)),
    st.sampled_from(["L1@0", "L2@0", "L1@1", "L2@57", "L3@115", "L0@0", " L1@0 ", "L1@0\n"]),
)
PATTERNS = st.one_of(ANY_TEXT, st.sampled_from(["(", "[", "a{99999999}", "(a+)+", "(?P<x>", "\\", "(?<!a+)b"]))
TICKETS = st.one_of(st.none(), st.booleans(), st.integers(), ANY_TEXT, st.sampled_from(["CHG-1", "x" * 201]))

# Texts a crash turns into, in both protocol eras.
_CRASHES = re.compile(
    r"Error executing tool \w+$|Error creating resource|Error reading resource|Error rendering prompt"
)


def _assert_clean_tool_result(result: CallToolResult, tool: str) -> str:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    assert texts, f"{tool} answered no text"
    text = "\n".join(texts)
    assert not _CRASHES.search(texts[0]), f"{tool} crashed: {text[:300]!r}"
    assert not texts[0].startswith(f"Error executing tool {tool}"), f"{tool} crashed: {text[:300]!r}"
    assert "pydantic.dev" not in text, f"{tool} answered in the SDK's words: {text[:300]!r}"
    return text


def _assert_clean_protocol_error(error: MCPError, what: str) -> None:
    assert not _CRASHES.search(str(error)), f"{what} crashed: {error}"


@FUZZ
@given(incident_id=NAMES, cursor=CURSORS, pattern=PATTERNS)
async def test_log_tools_answer_any_id_cursor_and_pattern_cleanly(
    make_server: Callable[..., MCPServer], incident_id: str, cursor: str | None, pattern: str
) -> None:
    async with connect(make_server(), "legacy") as client:
        page_args: dict[str, Any] = {"incidentId": incident_id, "cursor": cursor}
        page = await client.call_tool("read_incident_log", page_args)
        text = _assert_clean_tool_result(page, "read_incident_log")
        if not page.is_error:
            assert INCIDENT_ID.fullmatch(incident_id)
        search_args: dict[str, Any] = {"incidentId": incident_id, "pattern": pattern, "cursor": cursor}
        _assert_clean_tool_result(await client.call_tool("search_incident_log", search_args), "search_incident_log")
        summary = await client.call_tool("summarize_incident", {"incidentId": incident_id})
        _assert_clean_tool_result(summary, "summarize_incident")
        try:
            await client.get_prompt("postmortem", {"incidentId": incident_id})
        except MCPError as exc:
            _assert_clean_protocol_error(exc, "postmortem")
        # The session is still usable after whatever came before.
        assert "INC-1043" in text_of(await client.call_tool("list_incidents", {})), text


@FUZZ
@given(incident_id=st.one_of(st.from_regex(r"[A-Za-z0-9._~%-]{0,80}", fullmatch=True), HOSTILE_NAMES))
async def test_the_log_resource_answers_any_id_cleanly(make_server: Callable[..., MCPServer], incident_id: str) -> None:
    async with connect(make_server(), "2026-07-28") as client:
        try:
            await client.read_resource(f"incident://{incident_id}/log")
        except MCPError as exc:
            _assert_clean_protocol_error(exc, "incident log resource")
        assert "INC-1043" in text_of(await client.read_resource("incident://index"))


@FUZZ
@given(service=NAMES, confirm=st.one_of(st.booleans(), st.none(), st.integers(), ANY_TEXT), ticket=TICKETS)
async def test_restart_and_runbook_answer_any_service_and_ticket_cleanly(
    make_server: Callable[..., MCPServer], service: str, confirm: Any, ticket: Any
) -> None:
    content = {key: value for key, value in (("confirm", confirm), ("ticket", ticket)) if value is not None}
    operator = Operator("accept", content)
    async with connect(make_server(), "legacy", elicitation_callback=operator) as client:
        runbook = await client.call_tool("get_runbook", {"service": service})
        _assert_clean_tool_result(runbook, "get_runbook")
        result = await client.call_tool("restart_service", {"service": service})
        text = _assert_clean_tool_result(result, "restart_service")
        audit = await client.call_tool("get_audit_log", {"limit": 1})
    if text.startswith("RESTARTED"):
        assert confirm is True and isinstance(ticket, str) and TICKET.fullmatch(ticket.strip())
    else:
        assert text.startswith(("NOT RESTARTED -- ", "No such service: ")), text[:300]
    (decision,) = audit.structured_content["decisions"]
    for name in ("service", "ticket", "approver"):
        assert decision[name] is None or len(decision[name]) <= FIELD_LIMITS[name]
