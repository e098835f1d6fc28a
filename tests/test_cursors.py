"""Paging cursors: only a cursor the desk handed out, for that incident, is followed.

A cursor is a line number and the byte offset where that line starts. A hand-made one whose two parts disagree
(``L4@0``) used to label the log's first lines 4, 5, 6; now it is refused, as is one from another incident.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import CallToolResult

from incident_desk.core.search.cursors import INSTALLATION_KEY_FILE, CursorSeal, installation_key
from incident_desk.core.search.paging import Cursor, CursorError
from incident_desk.server import build_server
from tests.helpers import AppFactory, child_env, connect, text_of

pytestmark = pytest.mark.anyio

REFUSED = "was not handed out by this desk for INC-1043"


@pytest.mark.parametrize("tool", ["read_incident_log", "search_incident_log"])
async def test_a_hand_made_cursor_is_refused(make_app: AppFactory, era: str, tool: str) -> None:
    arguments = {"incidentId": "INC-1043", "cursor": "L4@0", "limit": 3}
    if tool == "search_incident_log":
        arguments["pattern"] = "search-api"
    async with connect(build_server(make_app()), era) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error, f"L4@0 was followed: {result.structured_content}"
    assert text_of(result) == f"cursor 'L4@0' {REFUSED}: call again without a cursor to start from the first line"


async def test_cursors_handed_out_page_through_both_tools(make_app: AppFactory, era: str) -> None:
    async with connect(build_server(make_app()), era) as client:
        numbers: list[int] = []
        cursor: str | None = None
        while True:
            arguments: dict[str, object] = {"incidentId": "INC-1042", "limit": 2}
            if cursor:
                arguments["cursor"] = cursor
            page = await client.call_tool("read_incident_log", arguments)
            numbers += [line["number"] for line in page.structured_content["lines"]]
            cursor = page.structured_content["next_cursor"]
            if cursor is None:
                break
            assert f"call again with cursor={cursor})" in text_of(page)
        first = await client.call_tool(
            "search_incident_log", {"incidentId": "INC-1042", "pattern": "ERROR", "limit": 1}
        )
        search_cursor = first.structured_content["next_cursor"]
        rest = await client.call_tool(
            "search_incident_log", {"incidentId": "INC-1042", "pattern": "ERROR", "cursor": search_cursor}
        )
        # A search's cursor is a line start like any other: reading on from it works too.
        read_on = await client.call_tool(
            "read_incident_log", {"incidentId": "INC-1042", "cursor": search_cursor, "limit": 1}
        )
        elsewhere = await client.call_tool(
            "read_incident_log", {"incidentId": "INC-1043", "cursor": search_cursor, "limit": 1}
        )
    assert numbers == [1, 2, 3, 4, 5, 6]
    assert [m["number"] for m in first.structured_content["matches"]] == [3]
    assert [m["number"] for m in rest.structured_content["matches"]] == [5]
    assert [line["number"] for line in read_on.structured_content["lines"]] == [4]
    assert elsewhere.is_error and REFUSED in text_of(elsewhere)


def test_replicas_sharing_a_sealing_key_accept_each_others_cursors() -> None:
    cursor = Cursor(line=4, offset=190)
    shared = CursorSeal([b"k" * 32]).encode("INC-1", cursor)
    assert CursorSeal([b"k" * 32]).decode("INC-1", shared) == cursor
    assert CursorSeal([b"new" * 11, b"k" * 32]).decode("INC-1", shared) == cursor  # an older key still opens it
    for stranger in (CursorSeal([b"other" * 7]), CursorSeal()):
        with pytest.raises(CursorError, match="not handed out by this desk for INC-1"):
            stranger.decode("INC-1", shared)


@pytest.mark.parametrize("change", ["line", "offset", "tag", "incident"])
def test_a_cursor_changed_in_any_part_is_refused(change: str) -> None:
    seal = CursorSeal()
    good = seal.encode("INC-1", Cursor(line=4, offset=190))
    position, tag = good.split(".")
    forged = {
        "line": f"L5@190.{tag}",
        "offset": f"L4@191.{tag}",
        "tag": f"{position}.{tag[:-1]}{'A' if tag[-1] != 'A' else 'B'}",
        "incident": good,
    }[change]
    with pytest.raises(CursorError, match="not handed out by this desk"):
        seal.decode("INC-2" if change == "incident" else "INC-1", forged)
    with pytest.raises(CursorError, match="malformed cursor"):
        seal.decode("INC-1", "../etc.x")


def _stdio_desk(xdg: Path, audit: Path) -> StdioServerParameters:
    env = child_env(audit, XDG_DATA_HOME=str(xdg))
    return StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], env=env)


async def _page(params: StdioServerParameters, cursor: str | None) -> CallToolResult:
    """One call on a freshly started desk, as MCP Inspector's CLI makes each call."""
    arguments: dict[str, object] = {"incidentId": "INC-1042", "limit": 2}
    if cursor is not None:
        arguments["cursor"] = cursor
    async with Client(stdio_client(params), mode="legacy") as client:
        return await client.call_tool("read_incident_log", arguments)


@pytest.mark.subprocess
async def test_a_cursor_stays_good_across_restarts_of_the_same_installation(tmp_path: Path) -> None:
    """Each call starts a new desk; paging follows the cursors to the end. Another installation refuses them."""
    params = _stdio_desk(tmp_path / "xdg", tmp_path / "audit.sqlite3")
    numbers: list[int] = []
    cursor: str | None = None
    cursors: list[str] = []
    for _ in range(5):
        page = await _page(params, cursor)
        assert not page.is_error, text_of(page)
        numbers += [line["number"] for line in page.structured_content["lines"]]
        cursor = page.structured_content["next_cursor"]
        if cursor is None:
            break
        cursors.append(cursor)
    assert numbers == [1, 2, 3, 4, 5, 6]
    key = tmp_path / "xdg" / "incident-desk" / INSTALLATION_KEY_FILE
    assert key.stat().st_size == 32 and key.stat().st_mode & 0o777 == 0o600
    foreign = await _page(_stdio_desk(tmp_path / "other-xdg", tmp_path / "other.sqlite3"), cursors[0])
    assert foreign.is_error and "was not handed out by this desk for INC-1042" in text_of(foreign)


def test_the_installation_key_is_made_once_and_kept(tmp_path: Path) -> None:
    first = installation_key(tmp_path / "state")
    assert installation_key(tmp_path / "state") == first
    cursor = Cursor(line=3, offset=120)
    kept = CursorSeal([first]).encode("INC-1", cursor)
    assert CursorSeal([installation_key(tmp_path / "state")]).decode("INC-1", kept) == cursor
    with pytest.raises(CursorError, match="not handed out by this desk"):
        CursorSeal([installation_key(tmp_path / "elsewhere")]).decode("INC-1", kept)


@pytest.mark.parametrize("problem", ["short", "link", "directory"])
def test_a_key_file_that_is_not_a_key_is_neither_trusted_nor_replaced(tmp_path: Path, problem: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    key = state / INSTALLATION_KEY_FILE
    if problem == "short":
        key.write_bytes(b"x" * 5)
    elif problem == "link":
        (tmp_path / "target").write_bytes(b"k" * 32)
        key.symlink_to(tmp_path / "target")
    else:
        key.mkdir()
    with pytest.raises(OSError):
        installation_key(state)
    assert key.is_symlink() if problem == "link" else key.exists()


async def test_a_desk_without_a_usable_key_file_still_pages_with_a_process_key(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    xdg = tmp_path / "xdg-data"
    (xdg / "incident-desk").mkdir(parents=True, exist_ok=True)
    (xdg / "incident-desk" / INSTALLATION_KEY_FILE).write_bytes(b"bad")
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
    async with connect(build_server(make_app()), "legacy") as client:
        first = await client.call_tool("read_incident_log", {"incidentId": "INC-1042", "limit": 2})
        cursor = first.structured_content["next_cursor"]
        second = await client.call_tool("read_incident_log", {"incidentId": "INC-1042", "cursor": cursor})
    assert not second.is_error
    assert second.structured_content["lines"][0]["number"] == 3
