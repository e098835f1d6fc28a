"""Out-of-band approval over the real transports, both eras: the stdio desk serves its page on a loopback port,
the HTTP desk as its own route (reached without the desk's bearer token: the link is the credential)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.approval_page_helpers import LinkFollower
from tests.helpers import ROOT, child_env, journal_steps, text_of
from tests.http_desk import TOKEN, run_desk

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVICES = json.dumps({"payments-api": {"approval": "out-of-band"}})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_out_of_band_over_stdio(tmp_path: Path, mode: str) -> None:
    env = child_env(tmp_path / "audit.sqlite3", INCIDENT_DESK_SERVICES=SERVICES)
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    person = LinkFollower()
    async with Client(params, mode=mode, elicitation_callback=person) as client:
        result = await client.call_tool("restart_service", {"service": "payments-api"})
    assert text_of(result).startswith("RESTARTED payments-api under CHG-2291 (simulated)")
    assert person.urls[0].startswith("http://127.0.0.1:") and person.visits[0].decided == 200
    steps = journal_steps(tmp_path / "audit.sqlite3")
    assert [outcome for outcome, _ in steps] == ["approval_requested", "page_opened", "approved", "simulated"]


@pytest.mark.http
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_out_of_band_over_http_with_the_static_token(tmp_path: Path, mode: str) -> None:
    with run_desk(tmp_path, INCIDENT_DESK_HTTP_TOKEN=TOKEN, INCIDENT_DESK_SERVICES=SERVICES) as desk:
        person = LinkFollower()
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
            Client(
                streamable_http_client(desk.url, http_client=http), mode=mode, elicitation_callback=person
            ) as client,
        ):
            result = await client.call_tool("restart_service", {"service": "payments-api"})
    assert text_of(result).startswith("RESTARTED payments-api under CHG-2291 (simulated)")
    (url,) = person.urls
    assert url.startswith(f"http://127.0.0.1:{desk.port}/approvals/")
    (seen,) = person.visits
    assert seen.decided == 200 and "not a second person" in seen.text
    steps = journal_steps(tmp_path / "audit.sqlite3")
    assert [outcome for outcome, _ in steps] == ["approval_requested", "page_opened", "approved", "simulated"]
    requested_by, approved_by = steps[0][1], steps[2][1]
    assert requested_by.startswith("bearer:") and approved_by.startswith("os:")
    assert url.rsplit("/", 1)[1] not in desk.stderr()  # the link never reaches the log


@pytest.mark.http
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_http_page_refuses_forged_csrf_less_and_expired_answers_and_ignores_the_client(
    tmp_path: Path, mode: str
) -> None:
    env = {"INCIDENT_DESK_HTTP_TOKEN": TOKEN, "INCIDENT_DESK_SERVICES": SERVICES}
    # Long enough that the attacks below land before expiry on a loaded machine; expiry is checked after.
    with run_desk(tmp_path, INCIDENT_DESK_APPROVAL_TIMEOUT_SECONDS="10", **env) as desk:
        ignored = LinkFollower(decision=None)  # the client accepts the link; nobody approves on the page
        texts: list[str] = []
        refusals: list[int] = []
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
            Client(streamable_http_client(desk.url, http_client=http), mode=mode, elicitation_callback=ignored) as c,
            anyio.create_task_group() as group,
        ):

            async def call() -> None:
                texts.append(text_of(await c.call_tool("restart_service", {"service": "payments-api"})))

            group.start_soon(call)
            with anyio.fail_after(20):
                while not ignored.urls:
                    await anyio.sleep(0.05)
            url = ignored.urls[0]
            base, link = url.rsplit("/", 1)

            def attacks() -> None:
                refusals.append(httpx2.get(f"{base}/{link[:-4]}AAAA", timeout=10).status_code)
                refusals.append(httpx2.post(url, data={"decision": "approve", "ticket": "C-1"}, timeout=10).status_code)

            await anyio.to_thread.run_sync(attacks)
        expired = await anyio.to_thread.run_sync(lambda: httpx2.get(url, timeout=10))
    assert refusals == [404, 403]
    assert texts == ["NOT RESTARTED -- no answer within 10s"]
    assert expired.status_code == 410 and "expired" in expired.text
    assert [outcome for outcome, _ in journal_steps(tmp_path / "audit.sqlite3")] == ["approval_requested", "timed_out"]
