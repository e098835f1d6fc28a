"""Paging cursors: only a cursor the desk handed out, for that incident, is followed.

A cursor is a line number and the byte offset where that line starts. A hand-made one whose two parts disagree
(``L4@0``) used to label the log's first lines 4, 5, 6; now it is refused, as is one from another incident.
"""

from __future__ import annotations

import pytest

from incident_desk.core.cursors import CursorSeal
from incident_desk.core.logfile import Cursor, CursorError
from incident_desk.server import build_server
from tests.helpers import AppFactory, connect, text_of

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
    assert text_of(result) == (
        f"cursor 'L4@0' {REFUSED} (or the desk has restarted since): call again without a cursor to start "
        "from the first line"
    )


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
