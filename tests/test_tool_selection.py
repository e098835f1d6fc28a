"""read_only, enabled_tools and disabled_tools: a tool that is off is absent from tools/list by the operator's
choice, the instructions say which, and `incident-desk tools` prints what a configuration serves."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from mcp.server.mcpserver import MCPServer

from incident_desk.cli.main import main as cli_main
from incident_desk.features import tool_catalog
from incident_desk.protocol.tool_selection import acting_tools, read_tools
from incident_desk.settings.errors import SettingsError
from tests.helpers import connect, text_of

pytestmark = pytest.mark.anyio


async def test_every_tool_has_a_selection_name(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        listed = sorted(tool.name for tool in (await client.list_tools()).tools)
    async with connect(make_server(), "auto") as client:
        instructions = client.instructions or ""
    assert listed == list(tool_catalog())
    assert "Turned off" not in instructions and "read-only" not in instructions


async def test_read_only_serves_no_acting_tool_and_says_so(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(read_only=True), "auto") as client:  # pinned 2026 clients skip discovery
        instructions = client.instructions or ""
    async with connect(make_server(read_only=True), era) as client:
        listed = sorted(tool.name for tool in (await client.list_tools()).tools)
        refused = await client.call_tool("restart_service", {"service": "payments-api"})
    assert listed == read_tools(tool_catalog())
    assert "This desk is read-only" in instructions
    assert f"Turned off on this desk by its operator: {', '.join(acting_tools(tool_catalog()))}." in instructions
    assert refused.is_error and "restart_service" in text_of(refused)
    assert text_of(refused) == (
        "restart_service is turned off on this desk: this desk is read-only (read_only = true) and serves no "
        "acting tool."
    )


async def test_enabled_and_disabled_tools_pick_the_tools(make_server: Callable[..., MCPServer]) -> None:
    server = make_server(
        enabled_tools=["list_incidents", "acknowledge_incident", "get_runbook"], disabled_tools=["get_runbook"]
    )
    async with connect(server, "legacy") as client:
        listed = sorted(tool.name for tool in (await client.list_tools()).tools)
        instructions = client.instructions or ""
    assert listed == ["acknowledge_incident", "list_incidents"]
    assert "get_runbook" in instructions.rsplit("Turned off", 1)[1]
    async with connect(server, "legacy") as client:
        disabled = await client.call_tool("get_runbook", {"service": "payments-api"})
        unchosen = await client.call_tool("search_incident_log", {"incidentId": "INC-1042", "pattern": "x"})
    assert disabled.is_error and "get_runbook is turned off on this desk: its operator turned it off" in (
        text_of(disabled)
    )
    assert unchosen.is_error and "only the tools named in enabled_tools" in text_of(unchosen)


def test_an_unknown_tool_name_is_refused_naming_the_setting(
    make_server: Callable[..., MCPServer], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SettingsError, match="disabled_tools: no such tool restart_everything"):
        make_server(disabled_tools=["restart_everything"])
    monkeypatch.setenv("INCIDENT_DESK_ENABLED_TOOLS", '["list_incidents", "restart_everything"]')
    assert cli_main(["tools"]) == 2
    assert "enabled_tools: no such tool restart_everything" in capsys.readouterr().err
    monkeypatch.setenv("INCIDENT_DESK_ENABLED_TOOLS", '["list_incidents", "restart_servce"]')
    assert cli_main(["tools"]) == 2
    assert "no such tool restart_servce (did you mean restart_service?)" in capsys.readouterr().err


def test_the_tools_command_prints_what_a_configuration_serves(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["tools", "--read-only"]) == 0
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert sorted(lines) == list(tool_catalog())
    assert {name for name, state in lines.items() if state == "off (read_only)"} == set(acting_tools(tool_catalog()))
    assert {name for name, state in lines.items() if state == "on"} == set(read_tools(tool_catalog()))
