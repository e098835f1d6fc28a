"""Each tool's kind is declared once, beside its function; every surface that depends on the kind is derived
from that declaration, and each is checked here against it, so a table that disagrees fails."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from incident_desk.cli import reference_docs
from incident_desk.features import TOOL_FEATURES, tool_catalog
from incident_desk.http.oauth_bearer import OAuthBearer
from incident_desk.protocol.tool_kinds import READ_SCOPE, ToolKind, ToolKinds, read
from incident_desk.protocol.tool_selection import tools_off
from tests.helpers import connect

pytestmark = pytest.mark.anyio


async def test_every_served_tool_has_the_annotations_its_kind_gives(
    make_server: Callable[..., MCPServer], era: str
) -> None:
    catalog = tool_catalog()
    async with connect(make_server(), era) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert sorted(listed) == list(catalog)
    for name, declared in catalog.items():
        annotations = listed[name].annotations
        assert annotations is not None, name
        expected = declared.annotations()
        assert annotations.read_only_hint is (declared.kind is ToolKind.READ), name
        # The spec reads destructiveHint only when readOnlyHint is false: a read tool does not say it.
        destructive = None if declared.kind is ToolKind.READ else declared.kind in (ToolKind.ACT, ToolKind.RESTART)
        assert annotations.destructive_hint is destructive, name
        # Unsaid, idempotentHint is false and openWorldHint true: each is said exactly when the kind differs.
        if declared.kind is not ToolKind.READ:
            assert (annotations.idempotent_hint or False) is declared.repeatable, name
        assert (True if annotations.open_world_hint is None else annotations.open_world_hint) is declared.open_world
        assert annotations.model_dump() == expected.model_dump(), name


def test_read_only_serves_exactly_the_tools_declared_read() -> None:
    catalog = tool_catalog()
    off = tools_off(catalog, read_only=True, enabled=None, disabled=[])
    assert set(off) == {name for name, declared in catalog.items() if declared.kind is not ToolKind.READ}
    assert {"save_postmortem", "acknowledge_incident", "restart_service"} <= set(off)


def _scope_asked(bearer: OAuthBearer, name: str) -> str:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}}).encode()
    (scope,) = bearer._called_tools_scopes(body)
    return scope


def test_the_oauth_layer_asks_each_tool_for_the_scope_of_its_kind() -> None:
    catalog = tool_catalog()
    scopes = {name: declared.kind.scope for name, declared in catalog.items()}
    bearer = OAuthBearer(
        lambda *_: None,  # type: ignore[arg-type]
        verifier=SimpleNamespace(issuer="https://issuer.test", issuer_scope=str),  # type: ignore[arg-type]
        resource="http://desk.test/mcp",
        mcp_path="/mcp",
        tool_scopes=scopes,
    )
    for name, declared in catalog.items():
        asked = _scope_asked(bearer, name)
        assert asked == declared.kind.scope, name
        assert (asked == READ_SCOPE) is (declared.kind is ToolKind.READ), name
    assert _scope_asked(bearer, "no_such_tool") == READ_SCOPE


def test_the_generated_tool_tables_follow_the_declarations() -> None:
    assert reference_docs.tool_kinds_table().count("\n| `") == len(tool_catalog())
    for name, declared in tool_catalog().items():
        assert f"| `{name}` | {declared.kind} | `{declared.kind.scope}` |" in reference_docs.tool_kinds_table()
    assert not {"docs/tools.md", "README.md"} & set(reference_docs.stale_pages())


def test_a_tool_without_a_declared_kind_cannot_be_registered() -> None:
    server = MCPServer("kinds")
    tools = ToolKinds(declared_tool=read())

    async def declared_tool() -> str:
        return "ok"

    async def undeclared_tool() -> str:
        return "never"

    tools.tool(server)(declared_tool)
    with pytest.raises(LookupError, match="undeclared_tool has no kind"):
        tools.tool(server)(undeclared_tool)


def test_a_tool_declared_by_two_features_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from incident_desk.features import memory

    doubled: dict[str, Any] = dict(memory.TOOLS)
    monkeypatch.setattr(memory, "TOOLS", ToolKinds(**doubled, list_incidents=read()))
    assert "memory" in TOOL_FEATURES
    with pytest.raises(LookupError, match="list_incidents is declared twice"):
        tool_catalog()
