"""A value a client sends is never echoed whole: an error names the argument and shows a capped head of it.

A red team sent an incident id of 960,000 characters and got it back whole in the error. Every string argument of
every tool, prompt and resource template gets a long value here, one at a time, the others plausible.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from incident_desk.core.errors import ECHO_CHARS, echoed
from tests.helpers import connect

pytestmark = pytest.mark.anyio

LONG = "INC-" + "Z" * 200_000
# The longest run of the long value an answer may carry: the capped head.
_SHOWN = "Z" * (ECHO_CHARS + 1)
PLAUSIBLE = {
    "incidentId": "INC-1042",
    "service": "payments-api",
    "audience": "the on-call manager",
    "pattern": "pool",
    "action": "restart",
    "ticket": "CHG-1",
}


def _plausible(schema: dict[str, Any]) -> dict[str, Any]:
    """Every required argument of a tool given a value that passes its schema."""
    arguments: dict[str, Any] = {}
    for name in schema.get("required", []):
        kind = schema["properties"][name].get("type")
        if name in PLAUSIBLE:
            arguments[name] = PLAUSIBLE[name]
        elif kind == "string":
            arguments[name] = "x"
        elif kind == "object":
            arguments[name] = {}
        elif kind == "array":
            arguments[name] = []
        elif kind in ("integer", "number"):
            arguments[name] = schema["properties"][name].get("minimum", 1)
        elif kind == "boolean":
            arguments[name] = False
    return arguments


def _accepts_a_string(prop: dict[str, Any]) -> bool:
    kinds = [prop.get("type")] + [option.get("type") for option in prop.get("anyOf", [])]
    return "string" in kinds and "enum" not in prop and "const" not in prop


def test_a_short_value_is_shown_whole_and_a_long_one_capped_with_its_argument() -> None:
    assert echoed("INC-9999", "incidentId") == "INC-9999"
    shown = echoed("A" * 960_000, "incidentId")
    assert shown == "A" * ECHO_CHARS + "… (incidentId: 960000 characters)"


async def test_no_tool_echoes_a_long_argument_whole(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        tools = (await client.list_tools()).tools
        tried = 0
        for tool in tools:
            schema = tool.input_schema
            for name, prop in schema.get("properties", {}).items():
                if not _accepts_a_string(prop):
                    continue
                arguments = {**_plausible(schema), name: LONG}
                result = await client.call_tool(tool.name, arguments)
                tried += 1
                text = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
                assert _SHOWN not in text, f"{tool.name} echoed {name} whole: {text[:200]!r}"
                assert _SHOWN not in str(result.structured_content), f"{tool.name} echoed {name} in its content"
                if "Z" * 10 in text:
                    assert name in text, f"{tool.name} echoed {name} without naming it: {text[:300]!r}"
        assert tried >= 15


async def test_no_prompt_or_resource_echoes_a_long_argument_whole(
    make_server: Callable[..., MCPServer], era: str
) -> None:
    async with connect(make_server(), era) as client:
        for prompt in (await client.list_prompts()).prompts:
            required = {argument.name: PLAUSIBLE.get(argument.name, "x") for argument in prompt.arguments or []}
            for argument in prompt.arguments or []:
                if argument.name == "audience":
                    continue  # inserted into the prompt exactly as given (DESIGN §2): not an error's echo
                with pytest.raises(MCPError) as caught:
                    await client.get_prompt(prompt.name, {**required, argument.name: LONG})
                assert _SHOWN not in str(caught.value), f"{prompt.name} echoed {argument.name} whole"
        for template in (await client.list_resource_templates()).resource_templates:
            uri = template.uri_template
            for placeholder in ("{incidentId}", "{id}", "{service}", "{incident_id}"):
                uri = uri.replace(placeholder, LONG)
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert _SHOWN not in str(caught.value), f"{template.uri_template} echoed its parameter whole"
