"""``tools/list`` stays under its bound (protocol/tool_schemas.py) and loses nothing on the way: the same tools, and
lean input schemas that accept and refuse exactly the arguments the full ones do."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import jsonschema
import pytest
from mcp.server.mcpserver import MCPServer

from incident_desk.cli import reference_docs
from incident_desk.features import tool_catalog
from incident_desk.protocol import library_hooks
from incident_desk.protocol.tool_schemas import TOOLS_LIST_BOUND, compact_size, lean_input_schema, tools_list_weight
from tests.helpers import connect

pytestmark = pytest.mark.anyio

# Argument values that probe every keyword the desk's input schemas use: types, null, bounds, lengths, enums.
PROBES: tuple[Any, ...] = (
    None,
    "",
    "x",
    "open",
    "acknowledged",
    "nope",
    "INC-1042",
    "x" * 501,
    "x" * 2001,
    0,
    1,
    -1,
    50,
    5001,
    10081,
    10**9,
    1.5,
    True,
    False,
    [],
    ["x"],
    {},
    {"version": "v41"},
    {"count": 3},
    {"nested": {"a": 1}},
)


async def _listing(server: MCPServer, era: str) -> dict[str, Any]:
    async with connect(server, era) as client:
        return (await client.list_tools()).model_dump(mode="json", by_alias=True, exclude_none=True)


async def test_tools_list_stays_under_its_bound_with_every_tool(
    make_server: Callable[..., MCPServer], era: str
) -> None:
    listing = await _listing(make_server(), era)
    assert sorted(tool["name"] for tool in listing["tools"]) == list(tool_catalog())
    weights = tools_list_weight(listing)
    heaviest = sorted(weights.items(), key=lambda item: -item[1]["tool"])[:3]
    assert compact_size(listing) <= TOOLS_LIST_BOUND, f"tools/list is {compact_size(listing)} bytes: {heaviest}"


def test_the_docs_table_is_the_weight_a_client_sees(make_server: Callable[..., MCPServer]) -> None:
    listing = anyio.run(_listing, make_server(), "legacy")
    table = reference_docs.tools_list_table()
    for name, weight in tools_list_weight(listing).items():
        assert f"| `{name}` | {weight['tool']:,} |" in table
    assert f"**{compact_size(listing):,}** of {TOOLS_LIST_BOUND:,}" in table


def _argument_sets(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Arguments around ``schema``: none, each required one alone, and every probe in every argument beside a
    filling of the others (each required one with the first probe the schema takes for it)."""
    properties: dict[str, Any] = schema.get("properties", {})
    required: list[str] = schema.get("required", [])
    filling = {}
    for name in required:
        filling[name] = next(
            (probe for probe in PROBES if jsonschema.Draft202012Validator(properties[name]).is_valid(probe)), "x"
        )
    yield {}
    yield dict(filling)
    yield {**filling, "unknown_argument": 1}
    for name in required:
        yield {key: value for key, value in filling.items() if key != name}
    for name, probe in itertools.product(properties, PROBES):
        yield {**filling, name: probe}


def _verdicts(full: dict[str, Any], lean: dict[str, Any]) -> list[tuple[dict[str, Any], bool, bool]]:
    full_check, lean_check = jsonschema.Draft202012Validator(full), jsonschema.Draft202012Validator(lean)
    return [
        (arguments, full_check.is_valid(arguments), lean_check.is_valid(arguments))
        for arguments in _argument_sets(full)
    ]


async def test_lean_input_schemas_take_exactly_the_arguments_the_full_ones_do(
    make_server: Callable[..., MCPServer], era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lean = {tool["name"]: tool["inputSchema"] for tool in (await _listing(make_server(), era))["tools"]}
    monkeypatch.setattr(library_hooks, "sdk_publish_tool_schemas", lambda *_: False)  # the SDK's own schemas
    full = {tool["name"]: tool["inputSchema"] for tool in (await _listing(make_server(), era))["tools"]}
    assert sorted(full) == sorted(lean)
    for name in full:
        assert compact_size(lean[name]) < compact_size(full[name]), name
        assert sorted(lean[name].get("properties", {})) == sorted(full[name].get("properties", {})), name
        assert lean[name].get("required", []) == full[name].get("required", []), name
        verdicts = _verdicts(full[name], lean[name])
        assert {verdict for _, verdict, _ in verdicts} == {True, False}, f"{name}: the probes never tell"
        differ = [(arguments, was, now) for arguments, was, now in verdicts if was != now]
        assert differ == [], f"{name}: {differ[:3]}"


def test_the_comparison_sees_a_lost_bound() -> None:
    """Guards the guard: a lean schema that dropped a bound or a type would be told apart by the probes."""
    full = {
        "type": "object",
        "properties": {
            "limit": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 5000}, {"type": "null"}]},
            "reason": {"anyOf": [{"type": "string", "maxLength": 500}, {"type": "null"}], "default": None},
        },
        "required": ["limit"],
    }
    lean = lean_input_schema(full)
    assert lean["properties"]["limit"] == {"type": ["integer", "null"], "minimum": 1, "maximum": 5000}
    assert all(was == now for _, was, now in _verdicts(full, lean))
    unbounded = {**lean, "properties": {**lean["properties"], "limit": {"type": ["integer", "null"]}}}
    assert any(was != now for _, was, now in _verdicts(full, unbounded))
    nullless = {**lean, "properties": {**lean["properties"], "reason": {"type": "string", "maxLength": 500}}}
    assert any(was != now for _, was, now in _verdicts(full, nullless))
