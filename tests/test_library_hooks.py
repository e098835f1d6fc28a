"""Each reach into a library's private parts still fits the installed library, and degrades softly when it does not.

A failure here names the library, its installed version and the hook (``incident_desk/protocol/library_hooks.py`` and
``incident_desk/core/re2_hook.py``), before any feature test fails in a way that hides why.
"""

from __future__ import annotations

import asyncio
import tomllib
from importlib.metadata import version
from typing import Any

import h11
import pytest
import re2
import structlog
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import EmptyResult, SetLevelRequestParams
from packaging.requirements import Requirement
from packaging.version import Version
from uvicorn.protocols.http import h11_impl
from uvicorn.server import ServerState

from incident_desk.core import re2_hook
from incident_desk.core.linear import LinearPattern
from incident_desk.http.limits import GuardedH11Protocol, guarded_protocol
from incident_desk.protocol import library_hooks
from tests.helpers import ROOT, connect

pytestmark = pytest.mark.anyio


def changed(distribution: str, hook: str) -> str:
    return f"{distribution} {version(distribution)} changed under the {hook} hook"


def _minor(text: str) -> tuple[int, int]:
    major, minor = Version(text).release[:2]
    return major, minor


def _next_minor(checked: str) -> str:
    major, minor = _minor(checked)
    return f"{major}.{minor + 1}"


@pytest.mark.parametrize("distribution", sorted(library_hooks.CHECKED_VERSIONS))
def test_installed_versions_are_the_ones_the_hooks_were_checked_against(distribution: str) -> None:
    checked = library_hooks.CHECKED_VERSIONS[distribution]
    installed = version(distribution)
    assert _minor(installed) <= _minor(checked), (
        f"{distribution} {installed} is newer than {checked}.x, the newest the library hooks were checked against: "
        f"run tests/test_library_hooks.py, then raise CHECKED_VERSIONS and the bound in pyproject.toml"
    )
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (requirement,) = [
        parsed
        for line in config["project"]["dependencies"]
        if (parsed := Requirement(line)).name.replace("_", "-") == distribution
    ]
    assert f"<{_next_minor(checked)}" in str(requirement.specifier), (
        f"pyproject.toml lets {distribution} float past the {checked}.x the hooks were checked against: {requirement}"
    )
    assert requirement.specifier.contains(installed)


def test_the_sdk_resource_template_table_is_where_the_hook_looks() -> None:
    server = MCPServer("hooks")

    @server.resource("hooks://{name}")
    def named(name: str) -> str:
        return name

    templates = library_hooks.sdk_resource_templates(server)
    assert templates is not None, changed("mcp", "resource template (MCPServer._resource_manager._templates)")
    assert list(templates) == ["hooks://{name}"], changed("mcp", "resource template (keys are URI templates)")


async def test_the_sdk_takes_a_request_handler_on_its_low_level_server() -> None:
    server = MCPServer("hooks")
    asked: list[str] = []

    async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        asked.append(params.level)
        return EmptyResult()

    added = library_hooks.sdk_add_request_handler(server, "logging/setLevel", SetLevelRequestParams, set_level)
    assert added, changed("mcp", "request handler (MCPServer._lowlevel_server.add_request_handler)")
    async with connect(server, "legacy") as client:
        await client.set_logging_level("error")
    assert asked == ["error"], changed("mcp", "request handler (registered but never called)")


async def test_two_requests_of_one_client_share_the_connection_the_hook_finds() -> None:
    server = MCPServer("hooks")
    seen: list[object] = []

    async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        seen.append(library_hooks.sdk_connection(ctx.session))
        return EmptyResult()

    library_hooks.sdk_add_request_handler(server, "logging/setLevel", SetLevelRequestParams, set_level)
    async with connect(server, "legacy") as client:
        await client.set_logging_level("error")
        await client.set_logging_level("info")
    async with connect(server, "legacy") as other:
        await other.set_logging_level("info")
    assert seen[0] is seen[1], changed("mcp", "session connection (ServerSession._connection, one per client)")
    assert seen[2] is not seen[0], changed("mcp", "session connection (one per client, not per server)")


def test_the_sdk_hands_out_a_registered_tools_argument_model() -> None:
    server = MCPServer("hooks")

    @server.tool()
    def count(times: int) -> int:
        return times

    arguments = library_hooks.sdk_tool_arguments(server, "count")
    assert arguments is not None, changed("mcp", "tool arguments (MCPServer._tool_manager.get_tool().fn_metadata)")
    with pytest.raises(Exception, match="times"):
        arguments.validate_arguments({"times": "many"})
    assert library_hooks.sdk_tool_arguments(server, "absent") is None


def test_uvicorn_h11_protocol_has_what_the_guard_uses() -> None:
    protocol_class = library_hooks.uvicorn_h11_protocol()
    assert protocol_class is h11_impl.H11Protocol, changed("uvicorn", "h11 protocol (methods the guard overrides)")
    loop = asyncio.new_event_loop()
    try:
        config = uvicorn.Config(app=lambda scope, receive, send: None, log_config=None)
        protocol = protocol_class(config=config, server_state=ServerState(), app_state={}, _loop=loop)

        class Transport(asyncio.Transport):
            def get_extra_info(self, name: str, default: Any = None) -> Any:
                return ("127.0.0.1", 1) if name in ("sockname", "peername") else default

            def is_closing(self) -> bool:
                return False

            def close(self) -> None:
                pass

        protocol.connection_made(Transport())
        assert protocol.conn.their_state is h11.IDLE, changed("uvicorn", "h11 protocol (conn is an h11.Connection)")
        assert isinstance(protocol.transport, asyncio.Transport), changed("uvicorn", "h11 protocol (transport)")
        assert protocol.loop is loop, changed("uvicorn", "h11 protocol (loop)")
        protocol.connection_lost(None)
    finally:
        loop.close()


def test_re2_private_match_answers_like_the_public_api() -> None:
    compiled = re2.compile(rb"(a+)(x)?b", re2.Options())
    assert re2_hook.PRIVATE_ANCHORS, changed("google-re2", "RE2 match (re2._Anchor)")
    private = re2_hook.private_match(compiled)
    assert private is not None, changed("google-re2", "RE2 match (_Regexp._regexp.Match)")
    public = re2_hook.span_matcher(_PublicOnly(compiled))
    for anchor in (re2_hook.UNANCHORED, re2_hook.ANCHOR_START):
        for data, pos in ((b"zaab", 0), (b"zaab", 1), (b"zzz", 0), (b"ab", 0)):
            assert private(anchor, data, pos, len(data)) == public(anchor, data, pos, len(data)), (anchor, data, pos)


class _PublicOnly:
    """A compiled RE2 pattern seen only through its public API, as after google-re2 renamed its private parts."""

    def __init__(self, compiled: Any) -> None:
        self.search, self.match, self.groups = compiled.search, compiled.match, compiled.groups


def test_each_hook_degrades_softly_and_says_what_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    with structlog.testing.capture_logs() as logs:
        assert library_hooks.sdk_resource_templates(object()) is None
        assert not library_hooks.sdk_add_request_handler(object(), "logging/setLevel", SetLevelRequestParams, _never)
        assert library_hooks.sdk_tool_arguments(object(), "count") is None
        session = object()
        assert library_hooks.sdk_connection(session) is session
        monkeypatch.delattr(h11_impl.H11Protocol, "on_response_complete")
        assert library_hooks.uvicorn_h11_protocol() is None
        assert guarded_protocol(10, 1.0) == "h11", "the server falls back to uvicorn's own protocol"
        monkeypatch.setattr(re2_hook, "_warned", False)
        pattern = re2.compile(rb"b+", re2.Options())
        assert re2_hook.span_matcher(_PublicOnly(pattern))(re2_hook.UNANCHORED, b"abbc", 0, 4) == [(1, 3)]
    gone = [(entry["library"], entry["version"], entry["hook"]) for entry in logs]
    assert gone == [
        ("mcp", version("mcp"), "resource template"),
        ("mcp", version("mcp"), "logging/setLevel handler"),
        ("mcp", version("mcp"), "tool arguments"),
        ("mcp", version("mcp"), "session connection"),
        ("uvicorn", version("uvicorn"), "h11 protocol"),
        ("uvicorn", version("uvicorn"), "h11 protocol"),
        ("google-re2", version("google-re2"), "RE2 match"),
    ]
    assert all(entry["event"] == "library hook gone" and entry["loss"] for entry in logs)


def test_the_desk_uses_the_private_paths_while_they_fit() -> None:
    """Guards the guard: a hook that always took its fallback would pass every test above but one."""
    assert LinearPattern(b"x").regexp is not None
    assert isinstance(LinearPattern(b"x").regexp, re2._re2.RE2)
    protocol = guarded_protocol(10, 1.0)
    assert isinstance(protocol, type)
    assert issubclass(protocol, GuardedH11Protocol)
    assert issubclass(protocol, h11_impl.H11Protocol)


async def _never(ctx: Any, params: Any) -> EmptyResult:
    return EmptyResult()
