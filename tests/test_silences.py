"""silence_incident and unsilence_incident against a real Prometheus Alertmanager (Debian's), through a real client.

A silence approved through the desk exists in Alertmanager with matchers selecting exactly the alert, createdBy =
who approved, and its end capped; the alert leaves the firing list; unsilence expires it; a silence made with amtool
shows in the desk; a folder incident has nothing to silence.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import ElicitResult, InputRequiredResult, InputResponses

from incident_desk.server import build_server
from tests.alertmanager import Alertmanager, alert, needs_alertmanager, running_alertmanager
from tests.helpers import ROOT, AppFactory, answer_schemas, child_env, connect, text_of
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
    server = build_server(app)
    async with connect(server, era, elicitation_callback=operator) as client:
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
        schemas = answer_schemas(server)
    for name, result in (("silence_incident", silenced), ("unsilence_incident", unsilenced)):
        schema = schemas[name]
        assert result.structured_content is not None
        jsonschema.validate(result.structured_content, schema, format_checker=FORMAT_CHECKER)
    (question, lift) = [asked.message.split("\n") for asked in operator.asked]
    assert re.fullmatch(
        rf"Silence {incident_id} \(HighLatency on payments-api\) for 30 minutes\? "
        rf"Its alerts stay silent until {STAMP}\.",
        question[0],
    )
    # What the approver sees it will touch: every alert its matchers cover now, the matchers, and why.
    assert question[1:] == [
        f"Will silence 1 alert(s): HighLatency ({incident_id})",
        'Matchers: alertname="HighLatency", service="payments-api", severity="critical"',
        "Requested because: deploy",
    ]
    assert lift[0] == f"Lift the silence on {incident_id}?"
    match = re.fullmatch(
        rf"SILENCED {incident_id} until ({STAMP}) under CHG-77 \(silence ([0-9a-f-]+)\)\n.*", text_of(silenced)
    )
    assert match, text_of(silenced)
    silence_id = match.group(2)
    (made,) = silences_made
    assert made["id"] == silence_id and made["createdBy"] == APPROVER
    assert len(lift) == 2 and re.fullmatch(
        rf"Will expire silence {silence_id} made by {re.escape(APPROVER)}, ending {STAMP}, "
        rf"covering 1 alert\(s\): HighLatency \({incident_id}\)",
        lift[1],
    ), lift
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


@pytest.mark.subprocess
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


@pytest.mark.subprocess
async def test_end_to_end_over_stdio_acknowledge_note_silence_and_resolve_an_alert(
    manager: Alertmanager, tmp_path: Path
) -> None:
    """As a new user would: a desk launched over stdio with an Alertmanager source, driven by a stock client."""
    manager.post(alert("DiskFull", starts=STARTED, service="db", severity="critical", summary="disk at 100%"))
    config = tmp_path / "desk.toml"
    config.write_text(
        f'data_dir = "{folder_desk(tmp_path / "desk")}"\n\n[[incident_sources]]\nkind = "folder"\n\n'
        f'[[incident_sources]]\nkind = "alertmanager"\nname = "prod"\nurl = "{manager.url}"\ncache_seconds = 0\n',
        encoding="utf-8",
    )
    env = child_env(tmp_path / "audit.sqlite3")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "incident_desk", "--config", str(config)], env=env, cwd=str(ROOT)
    )
    callbacks: dict[str, Any] = {"elicitation_callback": approve("CHG-42")}
    async with Client(stdio_client(params), mode="legacy", **callbacks) as client:
        listed = await client.call_tool("list_incidents", {})
        (incident_id,) = [e["id"] for e in listed.structured_content["incidents"] if e["source"] == "prod"]
        texts = [
            text_of(await client.call_tool("acknowledge_incident", {"incidentId": incident_id})),
            text_of(await client.call_tool("add_incident_note", {"incidentId": incident_id, "text": "rotating logs"})),
            text_of(
                await client.call_tool("silence_incident", {"incidentId": incident_id, "minutes": 60, "reason": "fix"})
            ),
            text_of(
                await client.call_tool("resolve_incident", {"incidentId": incident_id, "resolution": "logs rotated"})
            ),
        ]
        final = await client.call_tool("list_incidents", {"status": "all"})
        activity = text_of(await client.read_resource(f"incident://{incident_id}/activity"))
    assert texts[0] == f"ACKNOWLEDGED {incident_id} by {APPROVER}"
    assert texts[1] == f"NOTE ADDED to {incident_id} by {APPROVER}"
    assert re.fullmatch(rf"SILENCED {incident_id} until {STAMP} under CHG-42 \(silence [0-9a-f-]+\)", texts[2])
    assert texts[3] == f"RESOLVED {incident_id} under CHG-42: logs rotated"
    states = {e["id"]: e["state"] for e in final.structured_content["incidents"]}
    assert states[incident_id] == "resolved"
    assert activity.startswith("silenced until ") and f"by {APPROVER}" in activity
    assert [line.split(" ", 2)[1] for line in activity.splitlines()[1:]] == [
        "acknowledge",
        "note",
        "silence",
        "silence",
        "resolve",
        "resolve",
    ]
