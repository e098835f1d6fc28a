"""The test-speed cache of the SDK's per-tool metadata (tests/sdk_metadata_cache.py) changes nothing a client sees."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from tests.helpers import connect
from tests.sdk_metadata_cache import SDK_METADATA

pytestmark = pytest.mark.anyio

# Settings that change which tools are served and what their arguments say.
VARIANTS: list[dict[str, Any]] = [{}, {"read_only": True}, {"disabled_tools": ["restart_service"]}]


async def _listed(server: MCPServer) -> list[dict[str, Any]]:
    """Every tool, resource template and prompt the desk lists, as a client reads them."""
    async with connect(server, "legacy") as client:
        tools = (await client.list_tools()).tools
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
    return [item.model_dump(mode="json") for item in [*tools, *templates, *prompts]]


async def test_cached_metadata_lists_everything_as_the_sdk_makes_it(make_server: Callable[..., MCPServer]) -> None:
    try:
        SDK_METADATA.enabled = False
        made = [await _listed(make_server(**settings)) for settings in VARIANTS]
        SDK_METADATA.enabled = True
        hits = SDK_METADATA.hits
        cached = [await _listed(make_server(**settings)) for settings in VARIANTS]
        cached_again = [await _listed(make_server(**settings)) for settings in VARIANTS]
    finally:
        SDK_METADATA.enabled = True
    assert SDK_METADATA.hits > hits, "the cache was never used"
    assert cached == made
    assert cached_again == made


def test_a_function_whose_signature_differs_gets_its_own_metadata() -> None:
    def make(limit: int) -> Callable[..., str]:
        def tool(incidentId: str, limit: int = limit) -> str:
            return incidentId

        return tool

    fifty, ten = SDK_METADATA(make(50)), SDK_METADATA(make(10))
    assert fifty.arg_model.model_json_schema()["properties"]["limit"]["default"] == 50
    assert ten.arg_model.model_json_schema()["properties"]["limit"]["default"] == 10
    again = SDK_METADATA(make(50))
    assert again is not fifty and again.arg_model is fifty.arg_model  # a copy of the same entry


def test_one_build_rewriting_its_schemas_leaves_the_next_build_s_alone() -> None:
    def tool(incidentId: str, limit: int = 5) -> dict[str, int]:
        return {incidentId: limit}

    first = SDK_METADATA(tool)
    assert first.output_schema is not None
    first.output_schema.clear()
    first.arg_model.model_json_schema(by_alias=True)["properties"].clear()
    second = SDK_METADATA(tool)
    assert second.output_schema is not None and second.output_schema.get("type") == "object"
    assert set(second.arg_model.model_json_schema(by_alias=True)["properties"]) == {"incidentId", "limit"}


def test_every_sdk_module_that_registers_a_function_uses_the_cache() -> None:
    from mcp.server.mcpserver.prompts import base as prompts
    from mcp.server.mcpserver.resources import templates
    from mcp.server.mcpserver.tools import base as tools

    assert all(vars(module)["func_metadata"] is SDK_METADATA for module in (tools, templates, prompts))
