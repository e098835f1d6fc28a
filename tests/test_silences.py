"""silence_incident and unsilence_incident against a real Prometheus Alertmanager (Debian's), through a real client.

A silence approved through the desk exists in Alertmanager with matchers selecting exactly the alert, createdBy =
who approved, and its end capped; the alert leaves the firing list; unsilence expires it; a silence made with amtool
shows in the desk; a folder incident has nothing to silence.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest
from mcp_types import ElicitResult, InputRequiredResult, InputResponses

from incident_desk.server import build_server
from tests.alertmanager import Alertmanager, alert, needs_alertmanager, running_alertmanager
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import APPROVER, Operator, approve
from tests.test_output_schemas import FORMAT_CHECKER
from tests.test_sources_alertmanager import STARTED, folder_desk, sources

pytestmark = [pytest.mark.anyio, needs_alertmanager]

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[Alertmanager]:
    with running_alertmanager(tmp_path) as running:
        yield running


def _firing(manager: Alertmanager) -> list[dict[str, Any]]:
    answer = httpx2.get(manager.url + "/api/v2/alerts", params={"silenced": "false"}, timeout=5)
    return list(answer.json())


def _silences(manager: Alertmanager) -> list[dict[str, Any]]:
    return list(httpx2.get(manager.url + "/api/v2/silences", timeout=5).json())


async def _desk_and_alert(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, **settings: Any
) -> tuple[Any, str]:
    manager.post(
        alert("HighLatency", starts=STARTED, service="payments-api", severity="critical", summary="p99 over SLO"),
        alert("HighLatency", starts=STARTED, service="search-api", severity="critical"),
    )
    app = make_app(
        data_dir=folder_desk(tmp_path / "desk"), incident_sources=sources(manager, cache_seconds=0), **settings
    )
    listing = await app.listing()
    (incident_id,) = [i.id for i in listing.incidents.values() if i.service == "payments-api"]
    return app, incident_id


async def test_an_approved_silence_mutes_exactly_that_alert_and_unsilence_expires_it(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    app, incident_id = await _desk_and_alert(make_app, manager, tmp_path, max_silence_minutes=30)
    operator = approve("CHG-77")
    before = datetime.now(UTC)
    async with connect(build_server(app), era, elicitation_callback=operator) as client:
        silenced = await client.call_tool(
            "silence_incident", {"incidentId": incident_id, "minutes": 600, "reason": "deploy"}
        )
        listed = await client.call_tool("list_incidents", {"state": "silenced"})
        activity = text_of(await client.call_tool("get_incident_activity", {"incidentId": incident_id}))
        firing_while_silenced = _firing(manager)
        silences_made = _silences(manager)
        unsilenced = await client.call_tool("unsilence_incident", {"incidentId": incident_id})
        again = await client.call_tool("unsilence_incident", {"incidentId": incident_id})
        after = await client.call_tool("list_incidents", {})
        schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
    for name, result in (("silence_incident", silenced), ("unsilence_incident", unsilenced)):
        schema = schemas[name]
        assert schema is not None and result.structured_content is not None
        jsonschema.validate(result.structured_content, schema, format_checker=FORMAT_CHECKER)
    (question, lift) = [asked.message for asked in operator.asked]
    assert re.fullmatch(
        rf"Silence {incident_id} \(HighLatency on payments-api\) for 30 minutes\? "
        rf"Its alerts stay silent until {STAMP}\.",
        question,
    )
    assert lift == f"Lift the silence on {incident_id}?"
    match = re.fullmatch(
        rf"SILENCED {incident_id} until ({STAMP}) under CHG-77 \(silence ([0-9a-f-]+)\)\n.*", text_of(silenced)
    )
    assert match, text_of(silenced)
    silence_id = match.group(2)
    (made,) = silences_made
    assert made["id"] == silence_id and made["createdBy"] == APPROVER
    assert sorted((m["name"], m["value"], m["isRegex"], m.get("isEqual", True)) for m in made["matchers"]) == [
        ("alertname", "HighLatency", False, True),
        ("service", "payments-api", False, True),
        ("severity", "critical", False, True),
    ]
    assert "deploy" in made["comment"] and "CHG-77" in made["comment"] and incident_id in made["comment"]
    ends = datetime.fromisoformat(made["endsAt"].replace("Z", "+00:00"))
    assert timedelta(minutes=29) < ends - before < timedelta(minutes=31)  # capped by max_silence_minutes
    assert [a["labels"]["service"] for a in firing_while_silenced] == ["search-api"]  # exactly that alert left
    assert [entry["id"] for entry in listed.structured_content["incidents"]] == [incident_id]
    assert f"silence {silence_id}" in activity and f"by {APPROVER} (silence {silence_id})" in activity
    assert text_of(unsilenced) == f"UNSILENCED {incident_id} (silence {silence_id} expired)"
    assert [s["status"]["state"] for s in _silences(manager)] == ["expired"]
    assert again.is_error and text_of(again) == f"{incident_id} is not silenced"
    states = {entry["id"]: entry["state"] for entry in after.structured_content["incidents"]}
    assert states[incident_id] == "open"
    assert sorted(a["labels"]["service"] for a in _firing(manager)) == ["payments-api", "search-api"]
    acts = [(str(e.act), str(e.outcome)) for e in reversed(app.journal.activity(incident_id))]
    assert acts == [("silence", "approved"), ("silence", "done"), ("unsilence", "approved"), ("unsilence", "done")]


async def test_a_silence_made_with_amtool_shows_in_the_desk(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path
) -> None:
    app, incident_id = await _desk_and_alert(make_app, manager, tmp_path)
    made = subprocess.run(
        [
            "amtool",
            "silence",
            "add",
            "alertname=HighLatency",
            "service=payments-api",
            "--duration=2h",
            "--author=alice@example.com",
            "--comment=maintenance window",
            f"--alertmanager.url={manager.url}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert made.returncode == 0, made.stderr
    silence_id = made.stdout.strip()
    async with connect(build_server(app), "legacy") as client:
        listed = await client.call_tool("list_incidents", {})
        activity = await client.call_tool("get_incident_activity", {"incidentId": incident_id})
    states = {entry["id"]: entry["state"] for entry in listed.structured_content["incidents"]}
    assert states[incident_id] == "silenced"
    assert re.match(
        rf"silenced until {STAMP} by alice@example.com \(silence {silence_id}\): maintenance window", text_of(activity)
    )
    assert activity.structured_content["silences"][0]["id"] == silence_id


async def test_a_folder_incident_has_nothing_to_silence(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path
) -> None:
    app, _ = await _desk_and_alert(make_app, manager, tmp_path)
    operator = approve()
    async with connect(build_server(app), "legacy", elicitation_callback=operator) as client:
        silenced = await client.call_tool("silence_incident", {"incidentId": "INC-1", "minutes": 5, "reason": "x"})
        unsilenced = await client.call_tool("unsilence_incident", {"incidentId": "INC-1"})
    for result in (silenced, unsilenced):
        assert result.is_error and text_of(result) == "INC-1 comes from a folder, which has no alerts to silence"
    assert operator.asked == [] and _silences(manager) == []


async def test_a_declined_silence_makes_none_and_a_2026_round_trip_makes_one(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path
) -> None:
    app, incident_id = await _desk_and_alert(make_app, manager, tmp_path)
    arguments = {"incidentId": incident_id, "minutes": 10, "reason": "noisy"}
    async with connect(build_server(app), "legacy", elicitation_callback=Operator("decline")) as client:
        declined = await client.call_tool("silence_incident", arguments)
    assert text_of(declined) == "NOT SILENCED -- operator declined" and _silences(manager) == []
    async with connect(build_server(app), "2026-07-28", elicitation_callback=approve()) as client:
        first = await client.session.call_tool("silence_incident", arguments, allow_input_required=True)
        assert isinstance(first, InputRequiredResult) and _silences(manager) == []
        answer: InputResponses = {
            "approval": ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-9"})
        }
        done = await client.session.call_tool(
            "silence_incident", arguments, input_responses=answer, request_state=first.request_state
        )
        replayed = await client.session.call_tool(
            "silence_incident", arguments, input_responses=answer, request_state=first.request_state
        )
    assert text_of(done).startswith(f"SILENCED {incident_id} until ")
    assert text_of(replayed) == "NOT SILENCED -- this approval was already used"
    assert len(_silences(manager)) == 1
