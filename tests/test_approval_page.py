"""The approval page under attack, with plain HTTP (a browser's requests, no browser): forged, replayed and
expired links, a POST without the CSRF token or its cookie; and the pending text for clients without URL mode."""

from __future__ import annotations

import getpass
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.server.mcpserver import MCPServer
from mcp_types import ClientCapabilities, ElicitationCapability, FormElicitationCapability

from incident_desk.observability.log import WithholdQueryStrings
from tests.approval_page_helpers import CSRF, LinkFollower, PageVisit, visit
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


def _settings(restarts: Restarts, timeout: float = 30) -> dict[str, Any]:
    service = {**restarts.action(), "approval": "out-of-band"}
    return {"services": {SERVICE: service}, "approval_timeout_seconds": timeout}


async def _until_link(person: LinkFollower) -> str:
    with anyio.fail_after(20):
        while not person.urls:
            await anyio.sleep(0.05)
    return person.urls[0]


@asynccontextmanager
async def _restart_awaiting_its_page(server: MCPServer, era: str) -> AsyncIterator[tuple[str, list[str], LinkFollower]]:
    """A restart_service call left waiting on its approval page while the body acts on the link: yields the link,
    the call's answer text (there once the body is done and the call has ended) and the person following links."""
    person = LinkFollower(decision=None)
    texts: list[str] = []
    async with connect(server, era, elicitation_callback=person) as client, anyio.create_task_group() as group:

        async def call() -> None:
            texts.append(text_of(await client.call_tool("restart_service", {"service": SERVICE})))

        group.start_soon(call)
        yield await _until_link(person), texts, person


async def _get(url: str) -> httpx2.Response:
    return await anyio.to_thread.run_sync(lambda: httpx2.get(url, timeout=10))


async def test_forged_link_post_without_csrf_and_replay_are_refused(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, **_settings(restarts))
    async with _restart_awaiting_its_page(server, era) as (url, texts, _):
        base, link = url.rsplit("/", 1)
        forged = await _get(f"{base}/{link[:-4]}AAAA")
        assert forged.status_code == 404 and "not valid" in forged.text

        def attacks() -> list[int]:
            with httpx2.Client(timeout=10) as browser:
                page = browser.get(url)
                token = CSRF.search(page.text)
                assert page.status_code == 200 and token
                statuses = [browser.post(url, data={"decision": "approve", "ticket": "CHG-1"}).status_code]
            # The right token in the field, but a cross-site request carries no SameSite=Strict cookie.
            with httpx2.Client(timeout=10) as other_site:
                post = other_site.post(url, data={"csrf": token.group(1), "decision": "approve", "ticket": "CHG-1"})
                statuses.append(post.status_code)
            return statuses

        assert await anyio.to_thread.run_sync(attacks) == [403, 403]
        assert restarts.executions() == []
        approved = await anyio.to_thread.run_sync(lambda: visit(url))
        assert approved.decided == 200
        replayed = await anyio.to_thread.run_sync(lambda: visit(url))
        assert replayed.status == 410 and "already used" in replayed.text and replayed.decided is None
    assert len(texts) == 1 and texts[0].startswith(f"RESTARTED {SERVICE} under CHG-2291\ncommand exited 0")
    assert restarts.executions() == [SERVICE]
    assert outcomes(app.journal).count("executed") == 1


def _raw_get(url: str, host: str | None) -> bytes:
    """A GET with exactly this Host header (or none), as a rebound web page or a bare client would send."""
    address = url.split("//", 1)[1].split("/", 1)[0]
    path = "/" + url.split("//", 1)[1].split("/", 1)[1]
    ip, port = address.split(":")
    with socket.create_connection((ip, int(port)), timeout=10) as conn:
        header = f"Host: {host}\r\n" if host is not None else ""
        conn.sendall(f"GET {path} HTTP/1.1\r\n{header}Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


async def test_the_loopback_page_answers_only_to_its_own_address(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    """DNS rebinding: a web page whose name now resolves to 127.0.0.1 reaches the port under its own Host name;
    the loopback page refuses it (421, or 400 without a Host) and the link stays usable."""
    app, server = desk(make_app, **_settings(restarts))
    async with _restart_awaiting_its_page(server, era) as (url, texts, _):
        port = url.split("//", 1)[1].split("/", 1)[0].split(":")[1]
        for host, status in [
            (f"attacker.example:{port}", b"421"),
            ("127.0.0.1", b"421"),
            (f"127.0.0.1:{int(port) + 1}", b"421"),
            (f"127.0.0.1:{port}@evil.example", b"421"),
            (f"localhost:{port}@evil.example", b"421"),
            (None, b"400"),
        ]:
            answer = await anyio.to_thread.run_sync(_raw_get, url, host)
            assert answer.split(b" ", 2)[1] == status, (host, answer[:200])
            assert b"csrf" not in answer
        assert "page_opened" not in outcomes(app.journal)
        local = await anyio.to_thread.run_sync(_raw_get, url, f"localhost:{port}")
        assert local.split(b" ", 2)[1] == b"200" and b"csrf" in local
        approved = await anyio.to_thread.run_sync(lambda: visit(url))
        assert approved.decided == 200
    assert len(texts) == 1 and texts[0].startswith(f"RESTARTED {SERVICE} under CHG-2291")


async def test_a_bad_ticket_is_refused_on_the_page_without_using_the_link(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    _, server = desk(make_app, **_settings(restarts))
    async with _restart_awaiting_its_page(server, era) as (url, texts, person):

        def visit_with(ticket: str) -> PageVisit:
            return visit(url, ticket=ticket)

        for ticket, problem in [
            ("", "a change ticket is required"),
            ("CHG 2291", "the change ticket must be letters, digits"),
            ("C" * 300, "the change ticket is too long (300 characters, at most 200)"),
        ]:
            refused = await anyio.to_thread.run_sync(visit_with, ticket)
            assert refused.decided == 400 and problem in refused.text, refused.text
        approved = await anyio.to_thread.run_sync(lambda: visit(url, ticket="CHG-2291"))
        assert approved.decided == 200 and "You approved" in approved.text
    assert len(texts) == 1 and texts[0].startswith(f"RESTARTED {SERVICE} under CHG-2291")
    assert restarts.executions() == [SERVICE]
    assert person.form_asks == []


async def test_expired_link_is_refused(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    _, server = desk(make_app, **_settings(restarts, timeout=1))
    person = LinkFollower(decision=None)
    async with connect(server, era, elicitation_callback=person) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
        assert text_of(result) == "NOT RESTARTED -- no answer within 1s"
        late = await anyio.to_thread.run_sync(lambda: visit(person.urls[0]))
    assert late.status == 410 and "expired" in late.text and late.decided is None
    assert restarts.executions() == []


@pytest.fixture
def form_only_clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clients that declare form elicitation but not URL mode (the SDK's client always declares both)."""
    built = ClientSession._build_capabilities

    def form_only(self: ClientSession, version: str) -> ClientCapabilities:
        caps = built(self, version)
        if caps.elicitation is None:
            return caps
        return caps.model_copy(update={"elicitation": ElicitationCapability(form=FormElicitationCapability())})

    monkeypatch.setattr(ClientSession, "_build_capabilities", form_only)
    yield


@pytest.mark.usefixtures("form_only_clients")
async def test_a_client_without_url_mode_gets_the_pending_text_and_the_page_still_decides(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, **_settings(restarts))
    forged = LinkFollower()  # a form question would be answered "accept, ticked": it must never be asked
    shown: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message:
            shown.append(message)

    async with connect(server, era, elicitation_callback=forged) as client:
        if era == "legacy":
            async with anyio.create_task_group() as group:
                results: list[str] = []

                async def call() -> None:
                    answer = await client.call_tool("restart_service", {"service": SERVICE}, progress_callback=progress)
                    results.append(text_of(answer))

                group.start_soon(call)
                with anyio.fail_after(20):
                    while not shown:
                        await anyio.sleep(0.05)
                assert restarts.executions() == []
                url = shown[0].split("open ", 1)[1].rsplit(" to approve", 1)[0]
                await anyio.to_thread.run_sync(lambda: visit(url))
            (text,) = results
        else:
            first = text_of(await client.call_tool("restart_service", {"service": SERVICE}))
            assert first.startswith("APPROVAL PENDING -- open http://127.0.0.1:") and first.endswith(" to approve")
            assert restarts.executions() == []
            url = first.split("open ", 1)[1].rsplit(" to approve", 1)[0]
            await anyio.to_thread.run_sync(lambda: visit(url))
            text = text_of(await client.call_tool("restart_service", {"service": SERVICE}))  # the client retries
    assert forged.urls == [] and forged.form_asks == [] and text.startswith(f"RESTARTED {SERVICE} under CHG-2291\n")
    if era == "legacy":
        assert shown[0].startswith("APPROVAL PENDING -- open http://127.0.0.1:")
    assert restarts.executions() == [SERVICE]
    assert outcomes(app.journal) == ["approval_requested", "page_opened", "approved", "executed"]


@pytest.mark.usefixtures("form_only_clients")
@pytest.mark.parametrize("decision", ["approve", "decline"])
async def test_the_page_journals_its_steps_when_the_client_never_retries(
    make_app: AppFactory, restarts: Restarts, decision: str
) -> None:
    """A 2026 client shows the pending text and never comes back: the person's decision on the page is still in
    the journal, by the person, with the approval's id, and nothing runs."""
    app, server = desk(make_app, **_settings(restarts))
    async with connect(server, "2026-07-28", elicitation_callback=LinkFollower()) as client:
        first = text_of(await client.call_tool("restart_service", {"service": SERVICE}))
        url = first.split("open ", 1)[1].rsplit(" to approve", 1)[0]
        seen = await anyio.to_thread.run_sync(lambda: visit(url, decision))
    assert seen.decided == 200
    steps = rows(app.journal)
    verb = "approved" if decision == "approve" else "declined"
    assert [str(d.outcome) for d in steps] == ["approval_requested", "page_opened", verb]
    requested, opened, decided = steps
    approval_id = requested.detail.split(" approval ", 1)[1].split()[0]
    assert opened.approver == decided.approver == OS_USER and approval_id in decided.detail
    assert decided.ticket == ("CHG-2291" if decision == "approve" else None)
    assert restarts.executions() == []


async def test_no_elicitation_capability_keeps_the_refusal(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    app, server = desk(make_app, **_settings(restarts))
    async with connect(server, era) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(result) == f"ELICITATION_UNAVAILABLE -- refusing to restart {SERVICE} without an approval channel"
    assert outcomes(app.journal) == ["refused_no_channel"]


def test_the_access_log_withholds_approval_links() -> None:
    """uvicorn's access log (on at debug) must not write the single-use link, which is in the page's path."""
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', None, None)
    record.args = ("127.0.0.1:1", "GET", "/approvals/SECRETLINK?x=1", "1.1", 200)
    WithholdQueryStrings().filter(record)
    assert "SECRETLINK" not in record.getMessage() and "/approvals/[link withheld]" in record.getMessage()
    record.args = ("127.0.0.1:1", "GET", "/approvals/sign-in/callback?code=c&state=s", "1.1", 303)
    WithholdQueryStrings().filter(record)
    assert record.getMessage().endswith('"GET /approvals/sign-in/callback?[query withheld] HTTP/1.1" 303')
