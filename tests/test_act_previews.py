"""A person approves an effect, not a sentence: every approved act shows what it will touch, binds the approval to
it, and does not run when that changed; unsilence leaves alone what the desk did not make. Against a real
Prometheus Alertmanager (Debian's), through a real client, in both protocol eras.

The red team's case: a maintenance silence ``env="staging"`` made by a person covered three alerts; unsilencing one
incident expired the person's silence and unsilenced all three.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.context import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult, ErrorData

from incident_desk.server import build_server
from tests.alertmanager import Alertmanager, alert, needs_alertmanager, running_alertmanager
from tests.approval_page_helpers import LinkFollower
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import Operator, approve
from tests.test_sources_alertmanager import STARTED, folder_desk, sources

pytestmark = [pytest.mark.anyio, needs_alertmanager]

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    with running_alertmanager(tmp_path_factory.mktemp("am")) as running:
        yield running


def _silence(manager: Alertmanager, matchers: dict[str, str], created_by: str) -> str:
    body = {
        "matchers": [{"name": name, "value": value, "isRegex": False} for name, value in matchers.items()],
        "startsAt": STARTED.isoformat(),
        "endsAt": (datetime.now(UTC) + timedelta(hours=2)).isoformat(),
        "createdBy": created_by,
        "comment": "maintenance window",
    }
    answer = httpx2.post(manager.url + "/api/v2/silences", json=body, timeout=5)
    answer.raise_for_status()
    return str(answer.json()["silenceID"])


def _state(manager: Alertmanager, silence_id: str) -> str:
    return str(httpx2.get(f"{manager.url}/api/v2/silence/{silence_id}", timeout=5).json()["status"]["state"])


async def _maintenance(make_app: AppFactory, manager: Alertmanager, tmp_path: Path) -> tuple[Any, str, str, str]:
    """Three staging alerts of this test's own run under one person's maintenance silence."""
    run = uuid.uuid4().hex[:12]
    manager.post(
        *(alert(name, starts=STARTED, service="checkout-web", env="staging", run=run) for name in ("A", "B", "C"))
    )
    silence_id = _silence(manager, {"env": "staging", "run": run}, "alice@example.test")
    app = make_app(data_dir=folder_desk(tmp_path / "desk"), incident_sources=sources(manager, cache_seconds=0))
    listing = await app.listing()
    ours = {dict(i.labels).get("alertname"): i.id for i in listing.incidents.values() if ("run", run) in i.labels}
    return app, ours["A"], silence_id, run


async def test_unsilence_leaves_a_persons_maintenance_silence_alone(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    app, incident_id, silence_id, _ = await _maintenance(make_app, manager, tmp_path)
    operator = approve("CHG-9")
    async with connect(build_server(app), era, elicitation_callback=operator) as client:
        refused = await client.call_tool("unsilence_incident", {"incidentId": incident_id})
    assert text_of(refused) == (
        f"NOT UNSILENCED -- silence {silence_id} was made by alice@example.test, not by this desk, and covers 3 "
        "alert(s); ask again with include_foreign=true to lift it"
    )
    assert operator.asked == [], "nobody is asked"
    assert _state(manager, silence_id) == "active"
    assert [str(e.outcome) for e in app.journal.activity(incident_id)] == ["refused_foreign"]


async def test_with_include_foreign_the_question_names_every_alert_it_unsilences(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    app, incident_id, silence_id, _ = await _maintenance(make_app, manager, tmp_path)
    operator = Operator("decline")
    async with connect(build_server(app), era, elicitation_callback=operator) as client:
        declined = await client.call_tool(
            "unsilence_incident",
            {"incidentId": incident_id, "include_foreign": True, "reason": "staging is back, token=hunter2hunter2"},
        )
    assert text_of(declined) == "NOT UNSILENCED -- operator declined"
    (asked,) = operator.asked
    first, expire, because = asked.message.split("\n")
    assert first == f"Lift the silence on {incident_id}?"
    assert re.fullmatch(
        rf"Will expire silence {silence_id} made by alice@example\.test, ending {STAMP}, covering 3 alert\(s\): .+",
        expire,
    ), expire
    covered = expire.split(", covering 3 alert(s): ")[1].split(", ")
    assert sorted(item.split(" (")[0] for item in covered) == ["A", "B", "C"]
    assert because.startswith("Requested because: staging is back, token=") and "hunter2" not in because
    assert _state(manager, silence_id) == "active"
    journalled = app.journal.activity(incident_id)
    assert [str(e.outcome) for e in journalled] == ["declined"]
    assert "requested because: staging is back" in journalled[0].text and "hunter2" not in journalled[0].text


async def test_a_target_that_changes_after_the_approval_stops_the_act(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    """While the human reads the question, a new alert starts that the silence would also cover."""
    run = uuid.uuid4().hex[:12]
    manager.post(alert("DiskFull", starts=STARTED, service="ledger", run=run))
    app = make_app(data_dir=folder_desk(tmp_path / "desk"), incident_sources=sources(manager, cache_seconds=0))
    (incident_id,) = [i.id for i in (await app.listing()).incidents.values() if ("run", run) in i.labels]
    asked: list[str] = []

    async def meanwhile(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        asked.append(params.message)
        manager.post(alert("DiskFull", starts=STARTED, service="ledger", run=run, instance="ledger-2"))
        return ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-5"})

    async with connect(build_server(app), era, elicitation_callback=meanwhile) as client:
        result = await client.call_tool(
            "silence_incident", {"incidentId": incident_id, "minutes": 10, "reason": "disk cleanup"}
        )
    assert asked and asked[0].split("\n")[1] == f"Will silence 1 alert(s): DiskFull ({incident_id})"
    assert result.is_error
    assert text_of(result) == "NOT SILENCED -- what it would touch changed after it was approved; ask again"
    made = httpx2.get(manager.url + "/api/v2/silences", timeout=5).json()
    assert not [s for s in made if any(m["value"] == run for m in s["matchers"]) and s["status"]["state"] == "active"]
    assert "refused_stale" in [str(e.outcome) for e in app.journal.activity(incident_id)]


async def test_out_of_band_a_target_that_changes_before_the_page_approves_stops_the_act(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    """The approval page shows the preview; a new alert the silence would cover starts before the person
    approves there: the silence is not made."""
    run = uuid.uuid4().hex[:12]
    manager.post(alert("DiskFull", starts=STARTED, service="ledger", run=run))
    app = make_app(
        data_dir=folder_desk(tmp_path / "desk"),
        incident_sources=sources(manager, cache_seconds=0),
        act_approval={"silence": "out-of-band"},
    )
    (incident_id,) = [i.id for i in (await app.listing()).incidents.values() if ("run", run) in i.labels]
    person = LinkFollower()

    async def meanwhile(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        manager.post(alert("DiskFull", starts=STARTED, service="ledger", run=run, instance="ledger-2"))
        return await person(ctx, params)

    async with connect(build_server(app), era, elicitation_callback=meanwhile) as client:
        result = await client.call_tool(
            "silence_incident", {"incidentId": incident_id, "minutes": 10, "reason": "disk cleanup"}
        )
    (seen,) = person.visits
    assert f"Will silence 1 alert(s): DiskFull ({incident_id})" in seen.text
    assert result.is_error
    assert text_of(result) == "NOT SILENCED -- what it would touch changed after it was approved; ask again"
    made = httpx2.get(manager.url + "/api/v2/silences", timeout=5).json()
    assert not [s for s in made if any(m["value"] == run for m in s["matchers"]) and s["status"]["state"] == "active"]
