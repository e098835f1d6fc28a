"""Out-of-band approval (issue 27), in process in both eras: the restart runs only after the desk's own page
approves; the client's in-band answer never counts; the journal shows the requester and the approver."""

from __future__ import annotations

import getpass
import html

import anyio
import pytest

from incident_desk.core.journal.audit import AuditError, Decision
from incident_desk.server import build_server
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import load_settings
from tests.approval_page_helpers import LinkFollower, visit
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import (
    SERVICE,
    Restarts,
    desk,
    outcomes,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
    rows,
)

pytestmark = pytest.mark.anyio
OS_USER = f"os:{getpass.getuser()}"


def _out_of_band(restarts: Restarts, mode: str = "out-of-band", **more: object) -> dict[str, object]:
    action = restarts.action()
    return {"services": {SERVICE: {**action, "approval": mode}}, **more}


async def test_page_approval_restarts_and_journals_each_step(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, **_out_of_band(restarts))
    person = LinkFollower()
    async with connect(server, era, elicitation_callback=person) as client:
        result = await client.call_tool(
            "restart_service", {"service": SERVICE, "reason": "p99 doubled after the deploy"}
        )
    assert text_of(result).startswith(f"RESTARTED {SERVICE} under CHG-2291"), text_of(result)
    assert restarts.executions() == [SERVICE]
    (url,) = person.urls
    assert url.startswith("http://127.0.0.1:") and "/approvals/" in url
    (seen,) = person.visits
    assert seen.status == 200 and seen.decided == 200
    assert seen.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in seen.headers["content-security-policy"]
    assert "samesite=strict" in seen.headers["set-cookie"].lower()
    assert "not a second person" in seen.text
    # The page shows what the restart will run and why it was asked for, as the in-band form does.
    argv = restarts.action()["argv"]
    assert html.escape(f"Will run: {argv}") in seen.text
    assert "Requested because: p99 doubled after the deploy" in seen.text
    assert outcomes(app.journal) == ["approval_requested", "page_opened", "approved", "executed"]
    link_token = url.rsplit("/", 1)[1]
    assert all(link_token not in (d.detail or "") for d in rows(app.journal))


async def test_in_band_answer_is_ignored_for_an_out_of_band_service(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, approval_timeout_seconds=1.5, **_out_of_band(restarts))
    person = LinkFollower(decision=None)  # the client accepts; nobody approves on the page
    async with connect(server, era, elicitation_callback=person) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(result) == "NOT RESTARTED -- no answer within 1.5s"
    assert restarts.executions() == []
    assert "approved" not in outcomes(app.journal)


async def test_decline_on_the_page_is_the_operator_declined_text(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, **_out_of_band(restarts))
    async with connect(server, era, elicitation_callback=LinkFollower(decision="decline")) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(result) == "NOT RESTARTED -- operator declined"
    assert restarts.executions() == []
    declined: Decision = rows(app.journal)[-1]
    assert declined.outcome == "declined" and declined.approver == OS_USER


def test_second_person_needs_a_sign_in_at_the_identity_provider(restarts: Restarts) -> None:
    """The OS user cannot be told from the requester: second-person without an identity provider fails at start."""
    with pytest.raises(SettingsError, match="second-person' needs approval_page_client_id"):
        load_settings(_out_of_band(restarts, "second-person"))
    with pytest.raises(SettingsError, match="approval_page_client_id needs oauth_issuer"):
        load_settings({"approval_page_client_id": "desk-page"})


@pytest.mark.parametrize("setting", ["act", "service"])
async def test_an_incident_act_goes_out_of_band_by_act_or_by_its_service(
    make_app: AppFactory, era: str, setting: str
) -> None:
    """resolve_incident on INC-1043 (search-api): the page approves, the activity log names each step."""
    if setting == "act":
        app = make_app(act_approval={"resolve": "out-of-band"})
    else:
        app = make_app(services={"search-api": {"approval": "out-of-band"}})
    person = LinkFollower()
    async with connect(build_server(app), era, elicitation_callback=person) as client:
        result = await client.call_tool("resolve_incident", {"incidentId": "INC-1043", "resolution": "merged"})
    assert text_of(result) == "RESOLVED INC-1043 under CHG-2291: merged"
    assert person.visits[0].decided == 200
    events = await app.activity("INC-1043", 50)
    assert [str(e.outcome) for e in events] == ["approval_requested", "page_opened", "approved", "done"]
    assert {e.actor for e in events} == {OS_USER}


async def test_a_client_that_declines_the_link_is_a_no(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    """A no needs no proof: declining the link ends the call at once, and the link is spent."""
    app, server = desk(make_app, **_out_of_band(restarts))
    person = LinkFollower(decision=None, client_action="decline")
    async with connect(server, era, elicitation_callback=person) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(result) == "NOT RESTARTED -- operator declined"
    assert outcomes(app.journal) == ["approval_requested", "declined"]
    late = await anyio.to_thread.run_sync(lambda: visit(person.urls[0]))
    assert late.status == 410 and late.decided is None
    assert restarts.executions() == []


async def test_a_decision_the_journal_cannot_take_runs_nothing(
    make_app: AppFactory, restarts: Restarts, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page writes the approval before the call may act on it: if that write fails, the person is told (503)
    and the call refuses with the journal's problem; nothing runs."""
    app, server = desk(make_app, **_out_of_band(restarts))
    real = app.record_decision

    async def failing_approvals(decision: Decision) -> None:
        if decision.outcome == "approved":
            raise AuditError("disk full")
        await real(decision)

    monkeypatch.setattr(app, "record_decision", failing_approvals)
    person = LinkFollower()
    async with connect(server, era, elicitation_callback=person) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    (seen,) = person.visits
    assert seen.decided == 503 and "nothing will run" in seen.text
    assert "disk full" in text_of(result) and not text_of(result).startswith("RESTARTED")
    assert restarts.executions() == []
    assert outcomes(app.journal) == ["approval_requested", "page_opened"]
