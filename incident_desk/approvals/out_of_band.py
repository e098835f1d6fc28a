"""Out-of-band approval for the approved acts: the desk's page decides, the client only carries a link.

Features call :func:`ask_out_of_band` where they would call ``client_features.ask_approval``; it answers with the
same kinds (an :class:`client_features.Answered` built from the page's decision, a refusal or an ``Ask``), plus the
approver who signed in on the page, so the usual verdicts and outcome texts follow.

The journal hook a feature passes in writes each step: ``requested`` here, in the call; ``opened``, ``approved``
and ``declined`` by the page, when they happen (possibly on the loopback page's own thread and event loop, so a
hook writes through the DeskApp and never talks to the client). A decision the page journalled comes back with
``journalled`` set: the call must not write it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio
import structlog
from mcp.server.mcpserver import Context

from incident_desk.app import DeskApp
from incident_desk.core.acts.links import ApprovalBook, ApprovalMode, PageStep, Pending, State, StepJournal
from incident_desk.core.journal.audit import AuditError
from incident_desk.protocol import client_features

if TYPE_CHECKING:
    from incident_desk.approvals.context import IncidentView

log = structlog.get_logger(__name__)

# A step of the approval: requested (by the requester, in the call), or one the page took.
Step = Literal["requested", "opened", "approved", "declined", "refused"]


@dataclass(frozen=True)
class StepRow:
    """One step's journal row: who took it, what to say, and for an approval its ticket and single-use nonce."""

    step: Step
    who: str
    detail: str
    ticket: str | None = None
    nonce: str | None = None


Journal = Callable[[StepRow], Awaitable[None]]


@dataclass(frozen=True)
class PageAnswer:
    """The page's decision as the in-band answer types: ``answer`` for the verdict, ``approver`` for the journal;
    ``journalled`` when the page already wrote the decision's row."""

    answer: client_features.Answered
    approver: str
    journalled: bool = False


def _page_journal(journal: Journal) -> StepJournal:
    """The page's hook: the feature's journal, given the row each page step makes."""

    async def step(pending: Pending, step: PageStep, who: str) -> None:
        if step == "opened":
            await journal(StepRow("opened", who, f"approval page {pending.public_id} opened by {who}"))
        elif step == "approved":
            detail = f"approved by {who} on the approval page ({pending.public_id})"
            await journal(StepRow("approved", who, detail, ticket=pending.ticket, nonce=pending.nonce))
        elif step == "refused":
            detail = (
                f"approval page {pending.public_id} refused {who}: they asked for this {pending.act}, and "
                "second-person approval needs someone else; the link stays open for them"
            )
            await journal(StepRow("refused", who, detail))
        else:
            await journal(StepRow("declined", who, f"declined by {who} on the approval page ({pending.public_id})"))

    return step


class ApprovalStore:
    """The pending out-of-band approvals of one DeskApp, and where their page is served."""

    def __init__(self, app: DeskApp) -> None:
        # The page and its sign-in (Starlette, PyJWT and cryptography) load with the first out-of-band approval,
        # not with the tools every desk registers: an in-band desk never pays for them.
        from incident_desk.approvals.page import LoopbackPage
        from incident_desk.approvals.signin import identity_for

        self.book = ApprovalBook()
        self._app = app
        self.identity = identity_for(app.settings)
        self._loopback = LoopbackPage(self.book, self.identity, self.incident_view)
        self.base_url: str | None = None  # set by the HTTP desk, which serves the page itself

    def incident_view(self, target: str) -> IncidentView | None:
        """What the page shows of the incident behind ``target`` (blocking: call it in a worker thread)."""
        from incident_desk.approvals.context import incident_view

        return incident_view(self._app, target)

    def page_base(self) -> str:
        return self.base_url or self._loopback.base_url()

    async def wait_for_decision(self, pending: Pending) -> State:
        from incident_desk.approvals.page import wait_for_decision

        return await wait_for_decision(self.book, pending)


def approval_store(app: DeskApp) -> ApprovalStore:
    """The app's approval store (one per DeskApp), made on first use."""
    if not isinstance(app.approval_store, ApprovalStore):
        app.approval_store = ApprovalStore(app)
    return app.approval_store


def is_waiting(app: DeskApp, binding: dict[str, str], requester: str) -> bool:
    """Whether ``requester`` already has an approval with this binding on the page (a call shown the pending text
    comes back for it): nobody new would be asked."""
    store = app.approval_store
    return isinstance(store, ApprovalStore) and store.book.waiting_for(binding, requester) is not None


async def ask_out_of_band(
    ctx: Context,
    app: DeskApp,
    *,
    act: str,
    target: str,
    question: str,
    reason: str,
    requester: str,
    mode: ApprovalMode,
    binding: dict[str, str],
    journal: Journal,
    requester_key: str | None = None,
) -> (
    PageAnswer
    | client_features.NoChannel
    | client_features.NoAnswer
    | client_features.StaleRound
    | client_features.Ask
    | client_features.PendingShown
):
    store = approval_store(app)
    book = store.book
    timeout = app.settings.approval_timeout_seconds
    pending: Pending | None = None
    era = client_features.view(ctx)
    if era.round_trip:
        sealed = client_features.link_round(ctx, binding, timeout)
        if isinstance(sealed, client_features.StaleRound):
            if sealed.kind == "late":
                return client_features.NoAnswer("timed_out", sealed.reason)
            return sealed
        if sealed is not None:
            pending = book.by_public_id(sealed.public_id)
            if pending is None or pending.binding != binding or pending.requester != requester:
                return client_features.StaleRound("unbound", "this approval is unknown, used or expired")
            if sealed.refused is not None:
                book.consume(pending)
                return PageAnswer(client_features.Answered(sealed.refused, {}, pending.nonce), requester)
        elif not client_features.can_elicit_url(ctx):
            # The client retries the call after showing the pending text: it finds its approval again.
            pending = book.waiting_for(binding, requester)
    if pending is not None:
        return await _settled(store, pending)
    if (no_channel := client_features.link_channel(ctx)) is not None:
        return no_channel
    pending, link = book.request(
        act=act,
        target=target,
        question=question,
        binding=binding,
        requester=requester,
        reason=reason,
        mode=mode,
        timeout=timeout,
        journal=_page_journal(journal),
        requester_key=requester_key,
    )
    url = store.page_base() + "/approvals/" + link
    log.info("out-of-band approval requested", approval=pending.public_id, act=act, target=target)
    await journal(StepRow("requested", requester, f"{mode} approval {pending.public_id} requested by {requester}"))

    async def until_decided() -> None:
        await store.wait_for_decision(pending)

    try:
        sent = await client_features.send_approval_link(
            ctx,
            message=f"{question} Approve on the desk's page ({mode}).",
            url=url,
            public_id=pending.public_id,
            binding=binding,
            timeout=timeout,
            wait_for_page=until_decided,
        )
    except anyio.get_cancelled_exc_class():
        book.consume(pending)  # the call is gone: its link must not approve anything any more
        raise
    if isinstance(sent, client_features.NoChannel):
        book.consume(pending)
        return sent
    if isinstance(sent, (client_features.Ask, client_features.PendingShown)):
        return sent
    if sent.refused is not None:
        book.consume(pending)
        return PageAnswer(client_features.Answered(sent.refused, {}, pending.nonce), requester)
    return await _settled(store, pending)


async def _settled(
    store: ApprovalStore, pending: Pending
) -> PageAnswer | client_features.NoAnswer | client_features.PendingShown:
    """Wait for the page's decision (a 2026 retry waits too, bounded by the link's expiry); the link is spent
    whatever becomes of the wait. A decision the page could not journal is an ``AuditError``: nothing runs."""
    try:
        state = await store.wait_for_decision(pending)
    finally:
        store.book.consume(pending)
    nonce, approver = pending.nonce, pending.approver or ""
    if state in ("approved", "declined") and not pending.decision_journalled:
        raise AuditError(pending.journal_problem or f"the approval page's decision ({state}) was never journalled")
    if state == "approved":
        content = {"confirm": True, "ticket": pending.ticket or ""}
        return PageAnswer(client_features.Answered("accept", content, nonce), approver, journalled=True)
    if state == "declined":
        return PageAnswer(client_features.Answered("decline", {}, nonce), approver, journalled=True)
    return client_features.NoAnswer("timed_out", "no decision on the approval page before the link expired")
