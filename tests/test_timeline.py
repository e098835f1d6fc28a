"""show_incident_timeline through a real MCP client, both eras: the series and markers, the text timeline, the
view's resource, and the view link sent only to clients that declared the MCP Apps extension."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from incident_desk.core.journal.audit import Decision
from incident_desk.core.outcomes import Outcome
from incident_desk.protocol.client_features import AppsAdvertised
from incident_desk.server import build_server
from tests.helpers import AppFactory, connect, text_of

pytestmark = pytest.mark.anyio

VIEW_URI = "ui://incident-desk/timeline"
APPS_CLIENT = {"extensions": [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})]}


async def test_the_timeline_of_the_sample_incident(make_app: AppFactory, era: str) -> None:
    app = make_app()
    app.journal.record(
        Decision(
            "payments-api",
            Outcome.SIMULATED,
            "CHG-7",
            "ana",
            era,
            time=datetime(2026, 11, 29, 10, 59, 30, tzinfo=UTC),
        )
    )
    app.journal.record(Decision("search-api", Outcome.DECLINED, None, "bo", era))
    async with connect(build_server(app), era) as client:
        result = await client.call_tool("show_incident_timeline", {"incidentId": "INC-1042"})
    assert not result.is_error, result.content
    timeline = result.structured_content
    assert timeline is not None
    assert [(m["start"], m["error"], m["warn"], m["info"]) for m in timeline["minutes"]] == [
        ("2026-11-29T10:58:00Z", 2, 1, 3)
    ]
    assert timeline["opened"] == "2026-11-29T10:58:12Z"
    assert timeline["first_error"] == {
        "line": 3,
        "time": "2026-11-29T10:58:12Z",
        "text": "10:58:12 payments-api ERROR connection pool exhausted (50/50), waiting requests queued",
    }
    assert [(d["outcome"], d["ticket"]) for d in timeline["decisions"]] == [("simulated", "CHG-7")]
    assert timeline["stopped"] == "end of log"
    text = text_of(result)
    assert text.splitlines()[0] == "INC-1042 payments-api: payments-api returning HTTP 503: connection pool exhausted"
    assert "lines/min █ (peak 6)" in text
    assert "first error 10:58 (line 3): 10:58:12 payments-api ERROR connection pool exhausted" in text
    assert "restarts: 2026-11-29 10:59 simulated CHG-7" in text
    assert "covers the whole log (469 bytes, 6 lines)" in text


async def test_an_unknown_incident_is_a_clean_error(make_server: Any, era: str) -> None:
    async with connect(make_server(), era) as client:
        result = await client.call_tool("show_incident_timeline", {"incidentId": "INC-9999"})
    assert result.is_error
    assert text_of(result) == "No such incident: INC-9999"


async def test_a_log_too_big_for_the_budget_says_what_span_it_covers(
    tmp_path: Path, make_server: Any, era: str
) -> None:
    entry = tmp_path / "desk" / "incidents" / "INC-1"
    entry.mkdir(parents=True)
    entry.joinpath("incident.toml").write_text(
        'title = "big"\nservice = "payments-api"\nseverity = "SEV2"\nstatus = "open"\nopened = 2026-11-29T10:00:00Z\n'
    )
    line = b"10:00:00 payments-api INFO " + b"x" * 200 + b"\n"
    entry.joinpath("log.txt").write_bytes(line * 400_000)  # ~90 MB: far more than 10 ms of scanning
    async with connect(make_server(data_dir=tmp_path / "desk", search_time_budget_seconds=0.01), era) as client:
        result = await client.call_tool("show_incident_timeline", {"incidentId": "INC-1"})
    assert not result.is_error, result.content
    timeline = result.structured_content
    assert timeline is not None
    assert timeline["stopped"] == "time budget"
    assert 0 < timeline["scanned_bytes"] < timeline["total_bytes"]
    total = timeline["total_bytes"]
    assert f"of {total / 1e6:.1f} MB (" in text_of(result), "sizes in MB/GB, not raw byte counts"
    assert str(total) not in text_of(result) and str(timeline["scanned_bytes"]) not in text_of(result)
    assert "stopped at the time budget" in text_of(result)


async def test_the_desk_declares_mcp_apps_by_the_sdks_identifier(make_server: Any) -> None:
    # Declared without the SDK's Apps module (client_features.AppsAdvertised): the identifier must stay the SDK's.
    # In 2026-07-28's server/discover, which "auto" reaches in-process; a 2025 initialize declares Skills alone.
    assert AppsAdvertised.identifier == EXTENSION_ID
    async with Client(make_server(), mode="auto") as client:
        declared = client.server_capabilities.extensions or {}
    assert declared[EXTENSION_ID] == {}


async def test_a_client_that_declared_the_extension_is_sent_the_view_link(make_server: Any, era: str) -> None:
    async with connect(make_server(), era, **APPS_CLIENT) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        meta = tools["show_incident_timeline"].meta
        assert meta is not None
        assert meta["ui"]["resourceUri"] == VIEW_URI
        assert meta["ui/resourceUri"] == VIEW_URI
        read = await client.read_resource(VIEW_URI)
    (content,) = read.contents
    assert content.mime_type == APP_MIME_TYPE == "text/html;profile=mcp-app"
    assert content.meta is not None
    assert content.meta["ui"]["csp"] == {"connectDomains": [], "resourceDomains": []}
    shipped = (resources.files("incident_desk") / "data" / "timeline.html").read_text(encoding="utf-8")
    assert getattr(content, "text", None) == shipped


async def test_a_client_without_the_extension_gets_the_tool_with_text_and_no_view_link(
    make_server: Any, era: str
) -> None:
    async with connect(make_server(), era) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("show_incident_timeline", {"incidentId": "INC-1042"})
    tool = tools["show_incident_timeline"]
    assert not (tool.meta or {}).keys() & {"ui", "ui/resourceUri"}
    assert tool.output_schema is not None
    assert not result.is_error
    assert "first error 10:58 (line 3)" in text_of(result)


async def test_declaring_the_extension_without_its_mime_type_is_not_declaring_it(make_server: Any, era: str) -> None:
    async with connect(make_server(), era, extensions=[advertise(EXTENSION_ID, {"mimeTypes": []})]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert "ui" not in (tools["show_incident_timeline"].meta or {})


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (469, "469 bytes"),
        (1_000, "1.0 kB"),
        (146_800_566, "146.8 MB"),
        (209_715_296, "209.7 MB"),
        (1_073_741_824, "1.07 GB"),
        (52_000_000_000, "52.0 GB"),
    ],
)
def test_sizes_read_as_people_read_them(size: int, shown: str) -> None:
    from incident_desk.timeline_view import human_size

    assert human_size(size) == shown
