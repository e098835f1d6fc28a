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


async def _tools(server: MCPServer) -> list[dict[str, Any]]:
    async with connect(server, "legacy") as client:
        listed = await client.list_tools()
    return [tool.model_dump(mode="json") for tool in listed.tools]


async def test_cached_metadata_lists_every_tool_as_the_sdk_makes_it(make_server: Callable[..., MCPServer]) -> None:
    try:
        SDK_METADATA.enabled = False
        made = [await _tools(make_server(**settings)) for settings in VARIANTS]
        SDK_METADATA.enabled = True
        hits = SDK_METADATA.hits
        cached = [await _tools(make_server(**settings)) for settings in VARIANTS]
        cached_again = [await _tools(make_server(**settings)) for settings in VARIANTS]
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
