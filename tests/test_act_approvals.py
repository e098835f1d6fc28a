"""The approval of resolve_incident, silence_incident and unsilence_incident: every outcome, both eras, over stdio
and stateless HTTP; no elicitation is the refusal; a replayed or rebound answer is refused, as for restarts."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, InputRequiredResult, InputResponses

from incident_desk.protocol import client_features
from incident_desk.server import build_server
from tests.alertmanager import Alertmanager, alert, needs_alertmanager, running_alertmanager
from tests.helpers import ROOT, AppFactory, child_env, connect, text_of
from tests.http_desk import run_desk
from tests.restart_helpers import Operator, approve
from tests.test_sources_alertmanager import STARTED, folder_desk, sources

pytestmark = [pytest.mark.anyio, needs_alertmanager]

DONE = {"resolve": "RESOLVED", "silence": "SILENCED", "unsilence": "UNSILENCED"}
NOT = {"resolve": "NOT RESOLVED", "silence": "NOT SILENCED", "unsilence": "NOT UNSILENCED"}
ANSWERS: dict[str, tuple[str, dict[str, Any] | None, str | None, str]] = {
    # name: (action, content, the refusal's reason or None for done, journalled outcome)
    "accept": ("accept", {"confirm": True, "ticket": "CHG-1"}, None, "done"),
    "unticked": ("accept", {"confirm": False, "ticket": "CHG-1"}, "form submitted with the box unticked", "unticked"),
    "no-ticket": ("accept", {"confirm": True}, "a change ticket is required", "no_ticket"),
    "decline": ("decline", None, "operator declined", "declined"),
    "cancel": ("cancel", None, "operator dismissed the dialog", "cancelled"),
}


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    with running_alertmanager(tmp_path_factory.mktemp("am")) as running:
        yield running


def _arguments(act: str, incident_id: str) -> dict[str, Any]:
    arguments: dict[str, dict[str, Any]] = {
        "resolve": {"incidentId": incident_id, "resolution": "rolled back"},
        "silence": {"incidentId": incident_id, "minutes": 15, "reason": "deploy"},
        # The silence to lift is the test's own ("createdBy": "test"), not the desk's: lifting it takes the flag.
        "unsilence": {"incidentId": incident_id, "include_foreign": True},
    }
    return arguments[act]


async def _desk(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, act: str, **settings: Any
) -> tuple[Any, str]:
    """A desk with one alert of its own (a label no other test uses), silenced already when the act lifts one."""
    incident_id = _alert_of_its_own(manager, act)
    app = make_app(
        data_dir=folder_desk(tmp_path / "desk"), incident_sources=sources(manager, cache_seconds=0), **settings
    )
    return app, incident_id


@pytest.mark.parametrize("act", ["resolve", "silence", "unsilence"])
@pytest.mark.parametrize("answer", list(ANSWERS))
async def test_every_answer_gives_its_outcome(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str, act: str, answer: str
) -> None:
    action, content, reason, journalled = ANSWERS[answer]
    app, incident_id = await _desk(make_app, manager, tmp_path, act)
    operator = Operator(action, content)
    async with connect(build_server(app), era, elicitation_callback=operator) as client:
        result = await client.call_tool(f"{act}_incident", _arguments(act, incident_id))
    assert len(operator.asked) == 1
    text = text_of(result)
    if reason is None:
        assert text.startswith(f"{DONE[act]} {incident_id} ") and not result.is_error, text
        assert [str(e.outcome) for e in reversed(app.journal.activity(incident_id))] == ["approved", "done"]
    else:
        assert text == f"{NOT[act]} -- {reason}"
        assert [str(e.outcome) for e in app.journal.activity(incident_id)] == [journalled]
    assert result.structured_content is not None and result.structured_content["done"] is (reason is None)


@pytest.mark.parametrize("act", ["resolve", "silence", "unsilence"])
async def test_no_elicitation_and_no_answer_in_time_are_refusals(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str, act: str
) -> None:
    app, incident_id = await _desk(make_app, manager, tmp_path, act, approval_timeout_seconds=0.5)
    async with connect(build_server(app), era) as client:
        refused = await client.call_tool(f"{act}_incident", _arguments(act, incident_id))
    assert text_of(refused) == (
        f"ELICITATION_UNAVAILABLE -- refusing to {act} {incident_id} without an approval channel"
    )
    if era == "legacy":
        async with connect(build_server(app), era, elicitation_callback=Operator(delay=3)) as client:
            late = await client.call_tool(f"{act}_incident", _arguments(act, incident_id))
        assert text_of(late) == f"{NOT[act]} -- no answer within 0.5s"
    outcomes = [str(e.outcome) for e in reversed(app.journal.activity(incident_id))]
    assert outcomes == ["refused_no_channel", *(["timed_out"] if era == "legacy" else [])]


ACCEPT: InputResponses = {"approval": ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-2"})}


async def test_2026_replayed_tampered_and_rebound_answers_are_refused(make_app: AppFactory, tmp_path: Path) -> None:
    app = make_app()
    arguments = {"incidentId": "INC-1042", "resolution": "rolled back"}
    async with connect(build_server(app), "2026-07-28", elicitation_callback=approve()) as client:
        first = await client.session.call_tool("resolve_incident", arguments, allow_input_required=True)
        assert isinstance(first, InputRequiredResult) and first.request_state
        assert app.journal.activity("INC-1042") == []  # asking decides nothing
        state = first.request_state
        middle = len(state) // 2
        tampered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
        forged = client_features._Round(
            key="approval",
            binding={"tool": "resolve_incident", **arguments},
            nonce="f" * 32,
            asked_at=time.time(),
        ).encode()
        errors = []
        for bad in (tampered, forged):
            with pytest.raises(MCPError) as caught:
                await client.session.call_tool("resolve_incident", arguments, input_responses=ACCEPT, request_state=bad)
            errors.append(caught.value.code)
        with pytest.raises(MCPError) as rebound:  # the answer was given for another resolution
            await client.session.call_tool(
                "resolve_incident",
                {**arguments, "resolution": "something else"},
                input_responses=ACCEPT,
                request_state=state,
            )
        done = await client.session.call_tool(
            "resolve_incident", arguments, input_responses=ACCEPT, request_state=state
        )
        replayed = await client.session.call_tool(
            "resolve_incident", arguments, input_responses=ACCEPT, request_state=state
        )
    assert errors == [-32602, -32602] and rebound.value.code == -32602
    assert text_of(done) == "RESOLVED INC-1042 under CHG-2: rolled back"
    assert replayed.is_error and text_of(replayed) == "NOT RESOLVED -- this approval was already used"
    outcomes = [str(e.outcome) for e in reversed(app.journal.activity("INC-1042"))]
    assert outcomes == ["approved", "done", "refused_stale"]


def _alert_of_its_own(manager: Alertmanager, act: str) -> str:
    """Post an alert no other test matches (silenced already when the act lifts one); its incident id."""
    run = uuid.uuid4().hex[:12]
    manager.post(alert("HighLatency", starts=STARTED, service="payments-api", run=run))
    if act == "unsilence":
        body = {
            "matchers": [{"name": "run", "value": run, "isRegex": False}],
            "startsAt": STARTED.isoformat(),
            "endsAt": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
            "createdBy": "test",
            "comment": "to lift",
        }
        assert httpx2.post(manager.url + "/api/v2/silences", json=body, timeout=5).status_code == 200
    alerts = httpx2.get(manager.url + "/api/v2/alerts", timeout=5).json()
    (fingerprint,) = [a["fingerprint"] for a in alerts if a["labels"].get("run") == run]
    return f"prod-{fingerprint}"


def _source_env(manager: Alertmanager, tmp_path: Path) -> dict[str, str]:
    source = [{"kind": "folder"}, {"kind": "alertmanager", "name": "prod", "url": manager.url, "cache_seconds": 0}]
    return {
        "INCIDENT_DESK_DATA_DIR": str(folder_desk(tmp_path / "desk")),
        "INCIDENT_DESK_INCIDENT_SOURCES": json.dumps(source),
    }


@pytest.mark.subprocess
@pytest.mark.parametrize("act", ["resolve", "silence", "unsilence"])
@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_over_stdio_each_act_is_asked_and_answered(
    manager: Alertmanager, tmp_path: Path, era: str, act: str, answer: str
) -> None:
    incident_id = _alert_of_its_own(manager, act)
    env = child_env(tmp_path / "audit.sqlite3", **_source_env(manager, tmp_path))
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], env=env, cwd=str(ROOT))
    action, content, reason, _ = ANSWERS[answer]
    callbacks: dict[str, Any] = {"elicitation_callback": Operator(action, content)}
    async with Client(stdio_client(params), mode=era, **callbacks) as client:
        result = await client.call_tool(f"{act}_incident", _arguments(act, incident_id))
        states = await client.call_tool("list_incidents", {})
    text = text_of(result)
    if reason is None:
        assert text.startswith(f"{DONE[act]} {incident_id} "), text
        expected = {"resolve": "resolved", "silence": "silenced", "unsilence": "open"}[act]
    else:
        assert text == f"{NOT[act]} -- {reason}"
        expected = {"resolve": "open", "silence": "open", "unsilence": "silenced"}[act]
    assert {e["id"]: e["state"] for e in states.structured_content["incidents"]}[incident_id] == expected


@pytest.mark.http
@pytest.mark.parametrize("act", ["resolve", "silence", "unsilence"])
async def test_over_stateless_http_2026_is_asked_and_2025_gets_the_refusal(
    manager: Alertmanager, tmp_path: Path, act: str
) -> None:
    texts: dict[str, str] = {}
    with run_desk(tmp_path, "--stateless", **_source_env(manager, tmp_path)) as desk:
        for mode, answer in (("legacy", "accept"), ("2026-07-28", "decline"), ("2026-07-28", "accept")):
            incident_id = _alert_of_its_own(manager, act)
            action, content, _, _ = ANSWERS[answer]
            callbacks: dict[str, Any] = {"elicitation_callback": Operator(action, content)}
            async with (
                httpx2.AsyncClient(timeout=30) as http,
                Client(streamable_http_client(desk.url, http_client=http), mode=mode, **callbacks) as client,
            ):
                texts[f"{mode} {answer}"] = text_of(
                    await client.call_tool(f"{act}_incident", _arguments(act, incident_id))
                )
            texts[f"{mode} {answer} id"] = incident_id
    legacy_id = texts["legacy accept id"]
    assert texts["legacy accept"] == (
        f"ELICITATION_UNAVAILABLE -- refusing to {act} {legacy_id} without an approval channel"
    )
    assert texts["2026-07-28 decline"] == f"{NOT[act]} -- operator declined"
    accepted = texts["2026-07-28 accept"]
    assert accepted.startswith(f"{DONE[act]} {texts['2026-07-28 accept id']} "), accepted
