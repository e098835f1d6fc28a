"""Out-of-band approvals: a person decides on the desk's own page, never through the client.

No MCP imports. A pending approval is bound to one act and its arguments and reached by a single-use link token.
Only the token's hash is kept; logs and the journal name an approval by ``public_id``, a prefix of that hash, so
nothing that reaches a log can open the page. The link expires with the approval timeout.

The page journals its own steps (opened, approved, declined) through the pending approval's ``journal`` hook, at
the moment they happen: a call that never comes back for the decision (a 2026 client that does not retry, a
cancelled 2025 call) still leaves them in the journal. A decision is published to the waiting call only once its
row is written, so the journal reads in the order things happened.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from incident_desk.core import errors

ApprovalMode = Literal["in-band", "out-of-band", "second-person"]
TOMBSTONE_SECONDS = 60.0
MODES: tuple[ApprovalMode, ...] = ("in-band", "out-of-band", "second-person")
State = Literal["pending", "approved", "declined", "expired"]
# A step the page itself journals, and the hook that writes it: (the approval, the step, who took it). ``refused``:
# the requester tried to approve their own second-person act.
PageStep = Literal["opened", "approved", "declined", "refused"]
StepJournal = Callable[["Pending", PageStep, str], Awaitable[None]]


def strictest(*modes: ApprovalMode | None) -> ApprovalMode:
    """The strictest of the modes that apply (a service's and an act's): a setting can only add eyes."""
    given = [mode for mode in modes if mode is not None]
    return max(given, key=MODES.index) if given else "in-band"


def person_key(label: str) -> str:
    """Who ``label`` names, for comparing requester and approver: an OAuth subject at its issuer, else the label."""
    _, marker, tail = label.rpartition("sub ")
    subject, at, issuer = tail.partition(" @ ")
    issuer = issuer.removesuffix(")")
    if marker and at and subject and issuer and not any(c.isspace() for c in subject + issuer):
        return f"oauth:{issuer} {subject}"
    return label


def _key(label: str, key: str | None) -> str:
    """Who to compare: the structured identity (issuer and subject) when the desk has it, else the parsed label."""
    return key or person_key(label)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class LinkRefused(errors.Refused):
    """The page refuses this link or this answer; the message is safe to show and to log."""

    def __init__(self, reason: str, status: int = 403) -> None:
        super().__init__(reason)
        self.status = status


class SelfApproval(LinkRefused):
    """The requester tried to approve their own second-person act: refused, and journalled for the auditor."""


@dataclass
class Pending:
    """One approval waiting for a person. ``public_id`` is safe to log; the link token is never kept."""

    public_id: str
    token_hash: str
    act: str
    target: str
    question: str
    binding: dict[str, str]
    requester: str
    reason: str
    mode: ApprovalMode
    expires_at: float
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    state: State = "pending"
    approver: str | None = None
    ticket: str | None = None
    requester_key: str | None = None
    forget_at: float | None = None
    journal: StepJournal | None = field(default=None, repr=False, compare=False)
    viewers: set[str] = field(default_factory=set, repr=False, compare=False)
    decision_journalled: bool = False
    journal_problem: str | None = None

    @property
    def nonce(self) -> str:
        """What makes the approval single use in the journal (a prefix of the link's hash, never the link)."""
        return self.token_hash[:32]

    @property
    def requester_is_subject(self) -> bool:
        """Whether the requester is a subject at the identity provider, so second-person can tell them apart."""
        return _key(self.requester, self.requester_key).startswith("oauth:")

    @property
    def who_may_approve(self) -> str:
        if self.mode == "second-person" and self.requester_is_subject:
            return f"a person signed in at the identity provider, other than the requester ({self.requester})"
        if self.mode == "second-person":
            # Stdio (the OS user) or the static token: nothing to compare a subject with. Said, not pretended.
            return (
                f"any person signed in at the identity provider: the requester ({self.requester}) is not a subject "
                "there, so the desk cannot tell whether whoever signs in is the requester"
            )
        return "the person at this desk who signs in on this page"

    def seconds_left(self, now: float | None = None) -> float:
        return max(0.0, self.expires_at - (time.time() if now is None else now))


class ApprovalBook:
    """The desk's pending out-of-band approvals, in this process."""

    # The page may run on its own thread (the loopback page of a stdio desk): every change is under the lock, and
    # a waiting call polls, at a person's pace, instead of sharing an event across event loops.
    POLL_SECONDS = 0.2

    def __init__(self) -> None:
        self._by_hash: dict[str, Pending] = {}
        self._lock = threading.Lock()

    def request(
        self,
        *,
        act: str,
        target: str,
        question: str,
        binding: dict[str, str],
        requester: str,
        reason: str,
        mode: ApprovalMode,
        timeout: float,
        journal: StepJournal | None = None,
        requester_key: str | None = None,
    ) -> tuple[Pending, str]:
        """A new pending approval and its link token (to put in the URL, and nowhere else)."""
        token = secrets.token_urlsafe(32)
        digest = _hash(token)
        pending = Pending(
            public_id=digest[:12],
            token_hash=digest,
            act=act,
            target=target,
            question=question,
            binding=dict(binding),
            requester=requester,
            reason=reason,
            mode=mode,
            expires_at=time.time() + timeout,
            journal=journal,
            requester_key=requester_key,
        )
        with self._lock:
            self._forget_expired()
            self._by_hash[digest] = pending
        return pending, token

    def open(self, token: str) -> Pending:
        """The approval this link names (the page shown, or a form posted to it), or why not."""
        with self._lock:
            return self._find(token)

    def first_view(self, pending: Pending, viewer: str, viewer_key: str | None = None) -> bool:
        """True the first time the page is shown to each person, to journal their ``page_opened``: the requester
        and the second person both appear, and a reload adds nothing."""
        who = _key(viewer, viewer_key)
        with self._lock:
            first = who not in pending.viewers
            pending.viewers.add(who)
            return first

    def _find(self, token: str) -> Pending:
        """The approval this link opens, or why not: unknown (forged), already decided (replayed), expired."""
        pending = self._by_hash.get(_hash(token))
        if pending is None:
            raise LinkRefused("this approval link is not valid (unknown or forged)", 404)
        if pending.state == "expired":
            raise LinkRefused("this approval link has expired", 410)
        if pending.state != "pending":
            raise LinkRefused(f"this approval link was already used ({pending.state})", 410)
        if pending.seconds_left() <= 0:
            self._expire(pending)
            raise LinkRefused("this approval link has expired", 410)
        return pending

    def decide(
        self,
        token: str,
        csrf: str,
        *,
        approve: bool,
        approver: str,
        ticket: str | None,
        approver_key: str | None = None,
    ) -> Pending:
        """Record the person's decision once; the link cannot be used again. ``approver_key`` is the approver's
        issuer and subject when signed in (compared with the requester's, rather than the display labels)."""
        with self._lock:
            return self._decide(token, csrf, approve, approver, ticket, _key(approver, approver_key))

    def _decide(self, token: str, csrf: str, approve: bool, approver: str, ticket: str | None, who: str) -> Pending:
        pending = self._find(token)
        if not csrf or not hmac.compare_digest(csrf.encode(), pending.csrf.encode()):
            raise LinkRefused("the form's CSRF token is missing or wrong: reload the approval page", 403)
        if approve and pending.mode == "second-person" and not who.startswith("oauth:"):
            raise LinkRefused(
                f"second-person approval needs a person signed in at the identity provider, not {approver}", 403
            )
        if approve and pending.mode == "second-person" and who == _key(pending.requester, pending.requester_key):
            raise SelfApproval(
                f"{approver} asked for this {pending.act}; under second-person approval {pending.who_may_approve} "
                "must approve it",
                403,
            )
        pending.state = "approved" if approve else "declined"
        pending.approver, pending.ticket = approver, ticket
        pending.decision_journalled = pending.journal is None
        return pending

    def journalled(self, pending: Pending, problem: str | None = None) -> None:
        """The page wrote the decision's row (or could not: ``problem``); the waiting call may now act on it."""
        with self._lock:
            pending.decision_journalled, pending.journal_problem = problem is None, problem

    def decided(self, pending: Pending) -> bool:
        """Whether the waiting call can stop waiting: expired, or decided with the decision's row written (or
        failed to write), or decided so long ago that the page's write is not coming."""
        state = self.settle(pending)
        if state == "pending":
            return False
        if state == "expired" or pending.decision_journalled or pending.journal_problem is not None:
            return True
        return time.time() > pending.expires_at + TOMBSTONE_SECONDS

    def _expire(self, pending: Pending) -> None:
        if pending.state == "pending":
            pending.state = "expired"

    def settle(self, pending: Pending) -> State:
        """The approval's state now, ``expired`` once its time is up."""
        with self._lock:
            if pending.state == "pending" and pending.seconds_left() <= 0:
                self._expire(pending)
            return pending.state

    def waiting_for(self, binding: dict[str, str], requester: str) -> Pending | None:
        """The newest approval this requester asked for with these arguments that is not yet consumed."""
        with self._lock:
            self._forget_expired()
            found = [
                p
                for p in self._by_hash.values()
                if p.binding == binding and p.requester == requester and p.forget_at is None
            ]
            return found[-1] if found else None

    def consume(self, pending: Pending) -> None:
        """Done with: the call has acted (or refused) on it. Kept a minute more, refused, so a late or repeated
        click gets a page saying why rather than a dead port."""
        with self._lock:
            if pending.state == "pending":
                pending.state = "expired"
            pending.forget_at = time.time() + TOMBSTONE_SECONDS

    def by_public_id(self, public_id: str) -> Pending | None:
        with self._lock:
            return next((p for p in self._by_hash.values() if p.public_id == public_id and p.forget_at is None), None)

    def __len__(self) -> int:
        with self._lock:
            self._forget_expired()
            return len(self._by_hash)

    def _forget_expired(self) -> None:
        now = time.time()
        for digest, pending in list(self._by_hash.items()):
            if (pending.forget_at or pending.expires_at + TOMBSTONE_SECONDS) < now:
                self._expire(pending)
                del self._by_hash[digest]
