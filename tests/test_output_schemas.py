"""Every tool's structured content matches the output schema it declares, formats included, for every incident
shape the data layout allows. Strict clients (MCP Inspector) reject a whole result over one bad field."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, CreateMessageResult, ElicitResult, TextContent
from pydantic import BaseModel

from incident_desk.protocol.tool_results import written_out
from tests.helpers import connect
from tests.prometheus import canned_prometheus

pytestmark = pytest.mark.anyio

# Every way `opened` may be written (docs/data.md): TOML offset and local date-times, dates, strings.
OPENED_SHAPES = {
    "INC-1": "2026-11-29T10:58:12Z",
    "INC-2": "2026-11-29T10:58:12+02:00",
    "INC-3": "2026-11-29 10:58:12",  # a TOML local date-time: no zone
    "INC-4": "2026-11-29T10:58:12.250",  # local, with a fraction
    "INC-5": "2026-11-29",  # a TOML local date
    "INC-6": '"2026-11-29T10:58:12"',  # an ISO string with no zone
    "INC-7": '"2026-11-29T10:58:12Z"',
    "INC-8": '"2026-11-29"',
}
FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def _desk(root: Path) -> Path:
    for number, (incident_id, opened) in enumerate(OPENED_SHAPES.items()):
        entry = root / "incidents" / incident_id
        entry.mkdir(parents=True)
        status = "resolved" if number % 3 == 2 else "open"
        entry.joinpath("incident.toml").write_text(
            f'title = "Ünïcode title {number} — p99 ↑"\nservice = "payments-api"\nseverity = "SEV{number % 4}"\n'
            f'status = "{status}"\nopened = {opened}\n',
            encoding="utf-8",
        )
        entry.joinpath("log.txt").write_text(f"10:58:12 payments-api ERROR pool exhausted {number}\nlast line\n")
    broken = root / "incidents" / "INC-9"
    broken.mkdir()
    broken.joinpath("incident.toml").write_text('title = "no service"\n')
    (root / "runbooks").mkdir()
    (root / "runbooks" / "payments-api.md").write_text("# payments-api\n")
    return root


CHECKED_WITH_ALERTMANAGER = {"silence_incident", "unsilence_incident"}


async def _accept(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-1"})


async def _sample(context: Any, params: Any) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text="Two sentences."), model="m")


def test_the_format_checker_knows_a_date_time_needs_a_zone() -> None:
    """Guards the guard: without a date-time checker installed, every format below would pass unchecked."""
    assert not FORMAT_CHECKER.conforms("2026-11-29T10:58:12", "date-time")
    assert FORMAT_CHECKER.conforms("2026-11-29T10:58:12Z", "date-time")


async def test_every_tool_result_matches_its_output_schema(
    tmp_path: Path, make_server: Callable[..., MCPServer], era: str
) -> None:
    with canned_prometheus([(1795000000.0, "0.5"), (1795000060.0, "NaN"), (1795000120.0, "2")]) as prometheus:
        await _check_every_tool(tmp_path, make_server, era, prometheus)


async def _check_every_tool(tmp_path: Path, make_server: Callable[..., MCPServer], era: str, prometheus: str) -> None:
    flush = {"description": "Flush a cache", "argv": [sys.executable, "-c", "print('flushed')"]}
    metrics = {
        "payments-api": {
            "metrics": {"prometheus": prometheus, "queries": {"errors": "up"}},
            "actions": {"flush": flush},
        }
    }
    server = make_server(data_dir=_desk(tmp_path / "desk"), services=metrics)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_incidents", {}),
        ("list_incidents", {"status": "all"}),
        *[("read_incident_log", {"incidentId": incident_id, "limit": 1}) for incident_id in OPENED_SHAPES],
        ("search_incident_log", {"incidentId": "INC-3", "pattern": "ERROR"}),
        ("search_incident_log", {"incidentId": "INC-3", "pattern": "nothing-matches"}),
        ("get_runbook", {"service": "payments-api"}),
        ("summarize_incident", {"incidentId": "INC-5"}),
        ("restart_service", {"service": "payments-api"}),
        ("list_service_actions", {"service": "payments-api"}),
        ("run_service_action", {"service": "payments-api", "action": "flush"}),
        ("get_audit_log", {}),
        ("acknowledge_incident", {"incidentId": "INC-3", "note": "on it"}),
        ("add_incident_note", {"incidentId": "INC-3", "text": "rolled back the deploy"}),
        ("get_incident_activity", {"incidentId": "INC-3"}),
        ("list_incidents", {"status": "all", "state": "acknowledged"}),
        ("resolve_incident", {"incidentId": "INC-3", "resolution": "rolled back"}),
        ("save_postmortem", {"incidentId": "INC-2", "markdown": "# INC-2\n\nPool exhausted; rolled back."}),
        ("find_similar_incidents", {"incidentId": "INC-3"}),
        ("find_similar_incidents", {"query": "payments-api ERROR pool exhausted"}),
        *[("show_incident_timeline", {"incidentId": incident_id}) for incident_id in OPENED_SHAPES],
        ("query_incident_metrics", {"incidentId": "INC-1", "minutes_after": 60}),
        ("get_shift_handoff", {"hours": 6}),
    ]
    checked: set[str] = set()
    for callbacks in ({}, {"elicitation_callback": _accept, "sampling_callback": _sample}):
        async with connect(server, era, **callbacks) as client:
            schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
            for name, arguments in calls:
                result: CallToolResult = await client.call_tool(name, arguments)
                assert not result.is_error, (name, arguments, result.content)
                assert result.structured_content is not None, name
                schema = schemas[name]
                assert schema is not None, f"{name} declares no output schema"
                jsonschema.validate(result.structured_content, schema, format_checker=FORMAT_CHECKER)
                checked.add(name)
            listing = await client.call_tool("list_incidents", {"status": "all"})
            assert listing.structured_content is not None
            listed = {entry["id"]: entry for entry in listing.structured_content["incidents"]}
            assert sorted(listed) == sorted(OPENED_SHAPES)
            assert listed["INC-3"]["opened"] == "2026-11-29T10:58:12Z"  # a time with no zone is taken as UTC
            assert listed["INC-5"]["opened"] == "2026-11-29T00:00:00Z"  # a date is its midnight, UTC
            assert listed["INC-2"]["opened"] == "2026-11-29T10:58:12+02:00"
            assert [s["entry"] for s in listing.structured_content["skipped"]] == ["incidents/INC-9"]
    # Silences need an Alertmanager: tests/test_silences.py checks their results against these same schemas.
    assert checked | CHECKED_WITH_ALERTMANAGER == set(schemas), f"tools never checked: {set(schemas) - checked}"


async def test_no_output_schema_refers_to_definitions(make_server: Callable[..., MCPServer], era: str) -> None:
    """Nested item schemas are written out: jsonschema resolves a $ref again for every item a Python client
    validates, about half of the validation of a small log page."""
    async with connect(make_server(), era) as client:
        tools = (await client.list_tools()).tools
    nested = {
        tool.name
        for tool in tools
        if "$ref" in json.dumps(tool.output_schema) or "$defs" in json.dumps(tool.output_schema)
    }
    assert nested == set()
    lines = next(tool for tool in tools if tool.name == "read_incident_log").output_schema
    assert lines is not None
    assert lines["properties"]["lines"]["items"]["required"] == ["number", "text"]


def test_a_model_with_nested_models_cannot_be_written_out() -> None:
    class Inner(BaseModel):
        value: int

    class Outer(BaseModel):
        inner: Inner

    schema = written_out(Inner).json_schema
    assert schema is not None
    assert schema["required"] == ["value"]
    with pytest.raises(ValueError, match="Outer nests other models"):
        written_out(Outer)
