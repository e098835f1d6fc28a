"""What the approval page shows (issue 38) and what it journals (issue 45, item 5), in process over plain HTTP:
the incident with its last error lines masked and cut, the question's preview lines, the reason, who may approve
and when the link expires, all escaped; a ``page_opened`` row for each person who opens the page, and a row for a
requester refused on their own second-person act."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from incident_desk.approvals.context import ERROR_LINES, LINE_CHARS, incident_view
from incident_desk.approvals.out_of_band import StepRow, _page_journal
from incident_desk.approvals.page import IncidentLookup, page_routes
from incident_desk.approvals.signin import SignedIn
from incident_desk.core.acts.links import ApprovalBook, Pending
from tests.approval_page_helpers import CSRF
from tests.helpers import AppFactory

pytestmark = pytest.mark.anyio

ISSUER = "http://127.0.0.1:9/"
HOSTILE = "<script>alert(1)</script>"


def _name(user: str) -> str:
    return f"{user}@example.test (sub {user} @ {ISSUER})"


class HeaderIdentity:
    """A sign-in the test controls: the ``x-person`` header names who is at the browser, as a subject."""

    async def who(self, request: Request, link: str, pending: Pending) -> SignedIn | Response:
        user = request.headers["x-person"]
        return SignedIn(_name(user), "signed in at the test issuer", key=f"oauth:{ISSUER} {user}")


def _folder(root: Path) -> Path:
    """A data folder with one open payments-api incident whose log ends in more error lines than the page shows,
    one of them carrying a secret, one far longer than a line, and markup in its title."""
    incident = root / "incidents" / "INC-7"
    incident.mkdir(parents=True)
    (root / "runbooks").mkdir()
    (incident / "incident.toml").write_text(
        f'title = "pool exhausted {HOSTILE}"\nservice = "payments-api"\nseverity = "SEV2"\nstatus = "open"\n'
        "opened = 2026-11-29T10:58:12Z\n"
    )
    lines = [f"10:58:{n:02} payments-api ERROR early failure {n}" for n in range(10)]
    lines += [
        "10:59:00 payments-api INFO retrying",
        "10:59:01 payments-api ERROR login failed password=hunter2secret",
        "10:59:02 payments-api ERROR " + "x" * 400,
        f"10:59:03 payments-api ERROR bad input {HOSTILE}",
        "10:59:04 payments-api INFO still retrying",
    ]
    (incident / "log.txt").write_text("\n".join(lines) + "\n")
    return root


QUESTION = (
    "Restart payments-api? This drops in-flight requests.\n"
    "Will run: ['systemctl', 'restart', 'payments-api']\n"
    f"Requested because: pool stuck {HOSTILE}"
)


@asynccontextmanager
async def _page(
    book: ApprovalBook, lookup: IncidentLookup | None = None
) -> AsyncIterator[tuple[Pending, str, list[StepRow], Starlette]]:
    rows: list[StepRow] = []

    async def journal(row: StepRow) -> None:
        rows.append(row)

    pending, link = book.request(
        act="restart",
        target="payments-api",
        question=QUESTION,
        binding={"tool": "restart_service", "service": "payments-api"},
        requester=_name("alice"),
        reason=f"pool stuck {HOSTILE}",
        mode="second-person",
        timeout=600,
        journal=_page_journal(journal),
        requester_key=f"oauth:{ISSUER} alice",
    )
    routes = page_routes(book, HeaderIdentity(), lookup)
    yield pending, "/approvals/" + link, rows, Starlette(routes=routes)


def _browser(asgi: Starlette, user: str) -> httpx2.AsyncClient:
    """One person's browser: their own cookies."""
    transport = httpx2.ASGITransport(app=asgi)
    return httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765", headers={"x-person": user})


async def _approve(browser: httpx2.AsyncClient, url: str) -> httpx2.Response:
    page = await browser.get(url)
    token = CSRF.search(page.text)
    assert page.status_code == 200 and token, page.text
    return await browser.post(url, data={"csrf": token.group(1), "decision": "approve", "ticket": "CHG-2291"})


async def test_each_person_who_opens_the_page_and_a_refused_self_approval_are_journalled() -> None:
    book = ApprovalBook()
    async with (
        _page(book) as (pending, url, rows, asgi),
        _browser(asgi, "alice") as alice,
        _browser(asgi, "bob") as bob,
    ):
        refused = await _approve(alice, url)
        assert refused.status_code == 403 and "must approve it" in refused.text
        assert (await alice.get(url)).status_code == 200  # a reload by the same person adds no row
        approved = await _approve(bob, url)
        assert approved.status_code == 200 and "You approved" in approved.text
    assert [(r.step, r.who) for r in rows] == [
        ("opened", _name("alice")),
        ("refused", _name("alice")),
        ("opened", _name("bob")),
        ("approved", _name("bob")),
    ]
    assert pending.public_id in rows[1].detail and "second-person" in rows[1].detail
    assert rows[1].ticket is None and rows[1].nonce is None  # a refusal spends nothing
    assert rows[3].nonce == pending.nonce and rows[3].ticket == "CHG-2291"


def test_the_first_view_is_once_per_person_by_subject() -> None:
    book = ApprovalBook()
    pending, _ = book.request(
        act="restart",
        target="payments-api",
        question="Restart payments-api?",
        binding={},
        requester=_name("alice"),
        reason="r",
        mode="second-person",
        timeout=60,
    )
    assert book.first_view(pending, _name("alice"))
    assert not book.first_view(pending, f"Alice Smith (sub alice @ {ISSUER})")  # same subject, another label
    assert book.first_view(pending, _name("bob"))
    assert not book.first_view(pending, _name("bob"))


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


async def test_the_page_shows_the_incident_preview_reason_and_expiry_escaped(
    make_app: AppFactory, tmp_path: Path
) -> None:
    app = make_app(data_dir=_folder(tmp_path / "desk"))
    book = ApprovalBook()
    async with (
        _page(book, lambda target: incident_view(app, target)) as (_, url, _rows, asgi),
        _browser(asgi, "bob") as bob,
    ):
        page = (await bob.get(url)).text
    assert HOSTILE not in page and "&lt;script&gt;" in page
    assert "<h1>Restart payments-api? This drops in-flight requests.</h1>" in page
    preview = re.search(r"<pre class='preview'>(.*?)</pre>", page, re.S)
    assert preview is not None
    assert preview.group(1).splitlines() == [
        "Will run: [&#x27;systemctl&#x27;, &#x27;restart&#x27;, &#x27;payments-api&#x27;]",
        "Requested because: pool stuck &lt;script&gt;alert(1)&lt;/script&gt;",
    ]
    assert "INC-7" in page and "pool exhausted &lt;script&gt;" in page and ">open<" in page
    shown = re.findall(r"<li>(.*?)</li>", page)
    assert len(shown) == ERROR_LINES
    assert "hunter2secret" not in page and "password=[REDACTED]" in shown[2]
    assert shown[0].endswith("early failure 8") and shown[1].endswith("early failure 9")
    assert f"[cut at {LINE_CHARS} chars]" in shown[3] and len(shown[3]) < LINE_CHARS + 40
    text = _text(page)
    assert "Who may approve" in text and "other than the requester" in text
    assert re.search(r"Link expires\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(10 minutes left\)", text), text


def test_a_restart_shows_the_newest_open_incident_of_its_service(make_app: AppFactory, tmp_path: Path) -> None:
    app = make_app(data_dir=_folder(tmp_path / "desk"))
    view = incident_view(app, "payments-api")
    assert view is not None and view.id == "INC-7" and view.state == "open"
    assert incident_view(app, "INC-7") == view
    assert incident_view(app, "search-api") is None
