"""The approval book (no MCP, no HTTP): single use, expiry, CSRF, and who may approve under second-person."""

from __future__ import annotations

import time

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from incident_desk.core.acts.links import ApprovalBook, LinkRefused, Pending, person_key, strictest
from incident_desk.http.bearer import BearerAuth
from incident_desk.identity.principal import PRINCIPAL_KEY_HEADER

ISSUER = "http://127.0.0.1:9/"
ALICE = f"alice@example.test (sub alice @ {ISSUER})"
BOB = f"Bob (sub bob @ {ISSUER})"


def _requested(
    mode: str = "second-person", requester: str = ALICE, timeout: float = 30, requester_key: str | None = None
) -> tuple[ApprovalBook, Pending, str]:
    """A book holding one pending restart of payments-api: the book, the pending approval and its link."""
    book = ApprovalBook()
    pending, link = book.request(
        act="restart",
        target="payments-api",
        question="Restart payments-api?",
        binding={"tool": "restart_service", "service": "payments-api"},
        requester=requester,
        reason="r",
        mode=mode,  # type: ignore[arg-type]
        timeout=timeout,
        requester_key=requester_key,
    )
    return book, pending, link


def _book(mode: str = "second-person", requester: str = ALICE, timeout: float = 30) -> tuple[ApprovalBook, str, str]:
    book, pending, link = _requested(mode, requester, timeout)
    return book, link, pending.csrf


def test_strictest_mode_wins_and_people_are_compared_by_subject() -> None:
    assert strictest(None, None) == "in-band"
    assert strictest("out-of-band", "second-person") == "second-person"
    assert strictest("out-of-band", None) == "out-of-band"
    assert person_key(ALICE) == person_key(f"Alice Smith (sub alice @ {ISSUER})") == f"oauth:{ISSUER} alice"
    assert person_key("os:root") == "os:root"


def test_second_person_refuses_the_requester_and_the_os_user_and_takes_another_subject() -> None:
    book, link, csrf = _book()
    with pytest.raises(LinkRefused, match="must approve it"):
        book.decide(link, csrf, approve=True, approver=f"someone else's name (sub alice @ {ISSUER})", ticket="C-1")
    with pytest.raises(LinkRefused, match="signed in at the identity provider"):
        book.decide(link, csrf, approve=True, approver="os:alice", ticket="C-1")
    decided = book.decide(link, csrf, approve=True, approver=BOB, ticket="C-1")
    assert (decided.state, decided.approver) == ("approved", BOB)


def test_links_are_single_use_csrf_bound_and_expire() -> None:
    book, link, csrf = _book("out-of-band")
    with pytest.raises(LinkRefused, match="not valid"):
        book.open(link + "x")
    with pytest.raises(LinkRefused, match="CSRF"):
        book.decide(link, "", approve=True, approver="os:root", ticket="C-1")
    with pytest.raises(LinkRefused, match="CSRF"):
        book.decide(link, csrf[:-1] + "x", approve=True, approver="os:root", ticket="C-1")
    book.decide(link, csrf, approve=False, approver="os:root", ticket=None)
    with pytest.raises(LinkRefused, match="already used"):
        book.decide(link, csrf, approve=True, approver="os:root", ticket="C-1")
    book, link, csrf = _book("out-of-band", timeout=0.05)
    time.sleep(0.1)
    with pytest.raises(LinkRefused, match="expired"):
        book.decide(link, csrf, approve=True, approver="os:root", ticket="C-1")


def test_second_person_says_a_requester_who_is_not_a_subject_cannot_be_told_apart() -> None:
    """Over stdio the requester is the OS user: any signed-in subject qualifies, and the page says so rather than
    promise a second person."""
    book, link, csrf = _book(requester="os:alice")
    pending = book.open(link)
    assert not pending.requester_is_subject
    assert "requester (os:alice) is not a subject there" in pending.who_may_approve
    assert "other than the requester" not in pending.who_may_approve
    decided = book.decide(link, csrf, approve=True, approver=ALICE, ticket="C-1")
    assert (decided.state, decided.approver) == ("approved", ALICE)
    book, link, _ = _book()
    assert "other than the requester" in book.open(link).who_may_approve


def test_second_person_compares_issuer_and_subject_when_the_desk_has_them() -> None:
    """The sign-in and the OAuth principal carry issuer and subject: those decide, whatever the labels say (a
    display name can read like anyone's label)."""
    book, pending, link = _requested(requester_key=f"oauth:{ISSUER} alice")
    assert pending.requester_is_subject
    with pytest.raises(LinkRefused, match="must approve it"):
        book.decide(link, pending.csrf, approve=True, approver=BOB, approver_key=f"oauth:{ISSUER} alice", ticket="C")
    decided = book.decide(
        link, pending.csrf, approve=True, approver=ALICE, approver_key="oauth:http://other-issuer/ alice", ticket="C"
    )
    assert (decided.state, decided.approver) == ("approved", ALICE)


def test_a_client_cannot_claim_a_principal_key() -> None:
    """The requester's issuer and subject come only from the desk's own OAuth layer: a copy a client sends is
    stripped before anything reads it (here under the static token, which sets no key at all)."""
    seen: list[list[tuple[bytes, bytes]]] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(list(scope["headers"]))

    async def nothing() -> Message:
        return {"type": "http.request", "body": b""}

    async def ignore(message: Message) -> None:
        return None

    scope: Scope = {
        "type": "http",
        "path": "/mcp",
        "method": "POST",
        "query_string": b"",
        "headers": [
            (b"authorization", b"Bearer s3cret-token"),
            (PRINCIPAL_KEY_HEADER.encode(), f"oauth:{ISSUER} alice".encode()),
        ],
    }
    anyio.run(BearerAuth(inner, "s3cret-token"), scope, nothing, ignore)
    (headers,) = seen
    assert all(name.decode() != PRINCIPAL_KEY_HEADER for name, _ in headers)
