"""The shift handoff against a real Alertmanager and a real iCalendar feed, through a real client in both eras.

The clock is fixed (the desk's injected ``clock``): the handoff names the person on call now and next from a weekly
rotation with an EXDATE and a RECURRENCE-ID exception, lists the acknowledgement, the note, the silence (with its
end, flagged as ending this shift) and the restart made earlier in the test, masks secrets and control characters,
and still answers when the calendar URL hangs or returns garbage, naming it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2
import jsonschema
import pytest

from incident_desk.app import DeskApp
from incident_desk.core.handoff.shift import SECTIONS
from incident_desk.core.journal.activity import stamp
from incident_desk.server import build_server
from tests.alertmanager import Alertmanager, alert, needs_alertmanager, running_alertmanager
from tests.faulty_neighbour import faulty_neighbour
from tests.helpers import ROOT, AppFactory, answer_schemas, child_env, connect, text_of
from tests.oncall_calendar import anchor_for, handover, write_calendar
from tests.restart_helpers import APPROVER, approve
from tests.test_output_schemas import FORMAT_CHECKER
from tests.test_sources_alertmanager import STARTED, folder_desk, sources

pytestmark = pytest.mark.anyio

NOTE = "db pool at 100%\x1b[2J see https://admin:s3cretpass@db.internal/pool"


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[Alertmanager]:
    with running_alertmanager(tmp_path) as running:
        yield running


def _fixed(app: DeskApp, at: datetime) -> DeskApp:
    app.clock = lambda: at
    return app


def _section(text: str, title: str) -> list[str]:
    """The lines of one section of the handoff's text."""
    lines = text.split("\n")
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if lines[i] == ""), len(lines))
    return lines[start:end]


@needs_alertmanager
async def test_the_handoff_names_who_is_on_call_and_what_the_shift_did(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    manager.post(
        alert("HighLatency", starts=STARTED, service="payments-api", severity="critical", summary="p99 over SLO"),
        alert("HighLatency", starts=STARTED, service="search-api", severity="warning", summary="slow search"),
    )
    # The clock: a little after everything the test does, so all of it falls in the shift just ended.
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=10)
    calendar = write_calendar(tmp_path / "oncall.ics", anchor_for(at))
    deploys = tmp_path / "deploys.jsonl"
    deploys.write_text(
        json.dumps({"time": (at - timedelta(hours=2)).isoformat(), "service": "payments-api", "summary": "v2.4.1"})
        + "\n"
        + json.dumps({"time": (at - timedelta(hours=30)).isoformat(), "service": "payments-api", "summary": "v2.4.0"})
        + "\n",
        encoding="utf-8",
    )
    app = _fixed(
        make_app(
            data_dir=folder_desk(tmp_path / "desk"),
            incident_sources=sources(manager, cache_seconds=0),
            services={"payments-api": {"kind": "simulate"}},
            oncall={"calendar": str(calendar)},
            change_sources=[{"kind": "files", "name": "deploys", "paths": [str(deploys)]}],
        ),
        at,
    )
    listing = await app.listing()
    ids = {incident.service: incident.id for incident in listing.incidents.values()}
    payments, search = ids["payments-api"], ids["search-api"]
    # A silence somebody made with amtool: it ends long after this shift.
    long_end = at + timedelta(hours=20)
    made = httpx2.post(
        manager.url + "/api/v2/silences",
        json={
            "matchers": [{"name": "service", "value": "search-api", "isRegex": False, "isEqual": True}],
            "startsAt": datetime.now(UTC).isoformat(),
            "endsAt": long_end.isoformat(),
            "createdBy": "amtool-user",
            "comment": "reindexing all night",
        },
        timeout=5,
    )
    foreign_silence = made.json()["silenceID"]
    server = build_server(app)
    async with connect(server, era, elicitation_callback=approve("CHG-7")) as client:
        await client.call_tool("acknowledge_incident", {"incidentId": payments})
        await client.call_tool("add_incident_note", {"incidentId": payments, "text": NOTE})
        arguments = {"incidentId": payments, "minutes": 30, "reason": "deploy in flight"}
        silenced = text_of(await client.call_tool("silence_incident", arguments))
        restarted = text_of(await client.call_tool("restart_service", {"service": "payments-api"}))
        resolved = text_of(
            await client.call_tool("resolve_incident", {"incidentId": "INC-1", "resolution": "freed disk space"})
        )
        result = await client.call_tool("get_shift_handoff", {})
        resource = text_of(await client.read_resource("handoff://current"))
        prompt = await client.get_prompt("handoff", {"hours": "12"})
        schema = answer_schemas(server)["get_shift_handoff"]
    assert restarted.startswith("RESTARTED payments-api under CHG-7"), restarted
    match = re.match(rf"SILENCED {payments} until (\S+)Z under CHG-7 \(silence (\S+)\)", silenced)
    assert match, silenced
    silence_ends, silence_id = match.group(1), match.group(2)
    text = text_of(result)

    # Who: carol covers alice's excluded week (EXDATE) until the handover; dave is next (RECURRENCE-ID override).
    week = handover(anchor_for(at), 2)
    assert week <= at < handover(anchor_for(at), 3)
    assert text.split("\n")[0] == f"On call: carol until {stamp(handover(anchor_for(at), 3))}Z; next: dave"
    titles = [line for line in text.split("\n") if line in SECTIONS]
    assert titles == list(SECTIONS)

    (payments_line,) = [line for line in _section(text, "Open incidents") if payments in line]
    assert payments_line.startswith(f"- {payments} [silenced] payments-api: p99 over SLO; acknowledged by {APPROVER}")
    assert f"; last note {stamp(at)[:10]}" in payments_line and f"by {APPROVER}: db pool at 100%␛[2J" in payments_line
    assert any(line.startswith(f"- {search} [silenced] search-api") for line in _section(text, "Open incidents"))

    silences = _section(text, "Silences")
    assert f"- {payments}: silence {silence_id} by {APPROVER} ends {silence_ends}Z ENDS THIS SHIFT" in "\n".join(
        silences
    )
    (foreign,) = [line for line in silences if foreign_silence in line]
    assert foreign == (
        f"- {search}: silence {foreign_silence} by amtool-user ends {stamp(long_end)}Z: reindexing all night"
    )

    acts = "\n".join(_section(text, "Acts"))
    assert re.search(rf"Z acknowledge {payments} by {re.escape(APPROVER)}$", acts, re.M)
    assert re.search(rf"Z note {payments} by {re.escape(APPROVER)}: db pool", acts, re.M)
    assert re.search(rf"Z silence {payments} by {re.escape(APPROVER)} under CHG-7: silence {silence_id}", acts, re.M)
    assert re.search(rf"Z restart payments-api by {re.escape(APPROVER)} under CHG-7 \(simulated\)$", acts, re.M)
    assert _section(text, "Pending approvals") == ["- none"]
    (change,) = _section(text, "Changes")
    assert change == f"- {stamp(at - timedelta(hours=2))}Z payments-api: v2.4.1 (deploys)"
    assert resolved.startswith("RESOLVED INC-1 under CHG-7"), resolved
    (resolution,) = _section(text, "Resolved")
    assert re.fullmatch(rf"- \S+Z INC-1 by {re.escape(APPROVER)} under CHG-7: freed disk space", resolution)
    assert not any(line.startswith("- INC-1 ") for line in _section(text, "Open incidents"))

    # Untrusted text is masked and one visible line: no secret, no raw escape.
    assert "s3cretpass" not in text and "\x1b" not in text
    assert resource == text
    assert prompt.messages[0].content.text.endswith(text)  # type: ignore[union-attr]
    structured = result.structured_content
    assert structured is not None and schema is not None
    jsonschema.validate(structured, schema, format_checker=FORMAT_CHECKER)
    assert (structured["on_call"], structured["next"], structured["silences_ending"]) == ("carol", "dave", [silence_id])
    assert sorted(structured["open_incidents"]) == sorted([payments, search])


async def test_a_calendar_url_that_hangs_is_named_and_the_rest_still_answers(make_app: AppFactory, era: str) -> None:
    with faulty_neighbour("hang") as neighbour:
        app = make_app(oncall={"calendar": neighbour.url + "/oncall.ics", "timeout_seconds": 1})
        async with connect(build_server(app), era) as client:
            result = await client.call_tool("get_shift_handoff", {"hours": 4})
    text = text_of(result)
    assert not result.is_error
    assert text.split("\n")[0] == f"On call: unknown -- calendar {neighbour.url}/… did not answer within 1s"
    assert _section(text, "Open incidents")[0].startswith("- INC-1042 [open] payments-api")
    assert result.structured_content is not None
    assert result.structured_content["on_call"] is None
    assert result.structured_content["calendar_problem"] == f"calendar {neighbour.url}/… did not answer within 1s"


async def test_a_calendar_url_that_returns_garbage_is_named_and_the_rest_still_answers(
    make_app: AppFactory, era: str
) -> None:
    with faulty_neighbour("ok") as neighbour:  # answers a JSON list
        app = make_app(oncall={"calendar": neighbour.url + "/oncall.ics"})
        async with connect(build_server(app), era) as client:
            text = text_of(await client.call_tool("get_shift_handoff", {}))
    assert text.split("\n")[0].startswith(f"On call: unknown -- calendar {neighbour.url}/… is not an iCalendar feed")
    assert _section(text, "Open incidents")[1].startswith("- INC-1043 [open] search-api")


async def test_the_prompt_refuses_hours_that_are_not_a_number(make_app: AppFactory, era: str) -> None:
    from mcp.shared.exceptions import MCPError

    async with connect(build_server(make_app()), era) as client:
        with pytest.raises(MCPError, match="hours must be a whole number from 1 to 168, not 'soon'"):
            await client.get_prompt("handoff", {"hours": "soon"})


def test_the_command_prints_the_handoff(tmp_path: Path) -> None:
    at = datetime.now(UTC)
    calendar = write_calendar(tmp_path / "oncall.ics", anchor_for(at))
    env = child_env(tmp_path / "audit.sqlite3", INCIDENT_DESK_ONCALL__CALENDAR=str(calendar))
    done = subprocess.run(
        [sys.executable, "-m", "incident_desk", "handoff", "--hours", "6"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[0] == f"On call: carol until {stamp(handover(anchor_for(at), 3))}Z; next: dave"
    assert lines[1].startswith("Shift: 6h back from ")
    assert [line for line in lines if line in SECTIONS] == list(SECTIONS)


def test_the_command_refuses_a_bad_shift_length(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "incident_desk", "handoff", "--hours", "0"],
        cwd=ROOT,
        env=child_env(tmp_path / "audit.sqlite3"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "must be a whole number of hours from 1 to 168" in done.stderr
