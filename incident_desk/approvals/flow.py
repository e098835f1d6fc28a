"""The one approval flow of every approved act (restart, resolve, silence, unsilence, and the acts to come).

Ask in band (``client_features.ask_approval``, both eras) or on the desk's page (``out_of_band``), refuse on no
channel, a stale round or no answer, decide on the answer (``core.acts.approval``), and journal each step once,
the approval single-use by its nonce. An act brings only what is its own: how its rows are written (a
:class:`Recorder`'s ``write``), its report, its words, and what it does once approved. Kept in one place so a fix
to the flow reaches every act.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Protocol

import anyio
import structlog
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp
from incident_desk.approvals import out_of_band
from incident_desk.core.acts import approval, runs
from incident_desk.core.acts.approval import Approved, Entry
from incident_desk.core.acts.links import ApprovalMode, strictest
from incident_desk.core.acts.preview import MAX_REASON_CHARS, Preview, shown_reason
from incident_desk.core.acts.preview import question as with_preview
from incident_desk.core.journal.audit import FIELD_LIMITS, AuditError, Decision, DuplicateApproval, cut
from incident_desk.core.outcomes import CHANGED, OUTCOME_OF, REPLAYED, ActWords, Outcome
from incident_desk.identity import principal
from incident_desk.protocol import client_features, client_logging
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.client_features import NoAnswerKind

log = structlog.get_logger(__name__)

# The optional ``reason`` argument of every act that asks a human: the model's own words, untrusted.
RequestReason = Annotated[
    str | None,
    Field(
        max_length=MAX_REASON_CHARS,
        description="why: shown to the approver, journalled",
    ),
]

# The journal outcome of a question that got no usable answer, by why: the same for every act.
NO_ANSWER: dict[NoAnswerKind, Outcome] = {
    "timed_out": Outcome.TIMED_OUT,
    "disconnected": Outcome.DISCONNECTED,
    "client_error": Outcome.CLIENT_ERROR,
    "malformed": Outcome.CLIENT_ERROR,
}

# The journal outcome of each out-of-band approval step: the same for every act.
STEP_OUTCOME: dict[out_of_band.Step, Outcome] = {
    "requested": Outcome.APPROVAL_REQUESTED,
    "opened": Outcome.PAGE_OPENED,
    "approved": Outcome.APPROVED,
    "declined": Outcome.DECLINED,
    "refused": Outcome.REFUSED_SELF_APPROVAL,
}


class Report(Protocol):
    """An act's structured result for an outcome of the flow."""

    def __call__(
        self, outcome: Outcome, *, ticket: str | None = None, reason: str | None = None, approver: str | None = None
    ) -> BaseModel: ...


class Recorder:
    """Journals an act's rows as its actor, each write shielded from cancellation so none is lost.

    ``write`` turns an :class:`Entry` into the act's own journal row; ``said`` names the log events (a decision,
    a page step), ``fields`` what every log line carries, ``tell`` passes a decision on to the client.
    """

    def __init__(
        self,
        write: Callable[[Entry], Awaitable[None]],
        actor: str,
        *,
        said: tuple[str, str],
        fields: Mapping[str, object],
        tell: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        self._write, self.actor, self._said, self._fields, self._tell = write, actor, said, dict(fields), tell
        self.because: str | None = None  # the requester's reason, masked: journalled with the human's answer

    def answered(self, detail: str = "") -> str:
        """A row's detail for the human's answer, with the reason the requester gave."""
        if self.because is None:
            return detail
        return f"{detail}\nrequested because: {self.because}" if detail else f"requested because: {self.because}"

    async def __call__(
        self,
        outcome: Outcome,
        *,
        ticket: str | None = None,
        detail: str = "",
        nonce: str | None = None,
        exit_status: int | None = None,
    ) -> None:
        entry = Entry(outcome, self.actor, detail, ticket=ticket, nonce=nonce, exit_status=exit_status)
        with anyio.CancelScope(shield=True):
            await self._write(entry)
        fields = {**self._fields, "outcome": str(outcome), "ticket": ticket}
        log.info(self._said[0], **fields)
        if self._tell is not None:
            await self._tell(self._said[0], fields)

    async def step(self, row: out_of_band.StepRow) -> None:
        """An out-of-band approval's step, as ``row.who``. The page's steps come from its own request, maybe on its
        own thread and event loop: journal and log only, nothing sent to this call's client."""
        entry = Entry(STEP_OUTCOME[row.step], row.who or self.actor, row.detail, ticket=row.ticket, nonce=row.nonce)
        with anyio.CancelScope(shield=True):
            await self._write(entry)
        log.info(self._said[1], **self._fields, outcome=str(entry.outcome))

    async def quietly(self, outcome: Outcome, **fields: Any) -> str | None:
        """Record where the call's answer must not change (after the act ran, or on the way out of a cancelled
        call): a journal failure is returned (and logged), never raised."""
        try:
            await self(outcome, **fields)
        except AuditError as exc:
            log.error("audit journal write failed", **self._fields, outcome=str(outcome), error=str(exc))
            return str(exc)
        return None


def service_recorder(ctx: Context, app: DeskApp, service: str, *, era: str, action: str | None = None) -> Recorder:
    """The recorder of an act on a service (a restart, or a runbook ``action``): rows in the audit journal, which
    holds a service's restarts and actions alike so its limits and readers see both; each decision is also told
    to the client. The service name comes from the client: journalled and logged cut, like every stored field."""
    stored = cut(service, FIELD_LIMITS["service"])

    async def write(entry: Entry) -> None:
        detail = entry.detail if action is None else runs.detail(action, entry.detail)
        decision = Decision(
            service=stored,
            outcome=entry.outcome,
            ticket=entry.ticket,
            approver=entry.who,
            protocol_era=era,
            exit_status=entry.exit_status,
            detail=detail,
            nonce=entry.nonce,
        )
        await app.record_decision(decision)

    async def tell(message: str, fields: dict[str, Any]) -> None:
        await client_logging.tell_client(ctx, app.log_levels, "info", message, **fields)

    kind = "restart" if action is None else "action"
    fields: dict[str, object] = {"service": stored, "era": era}
    if action is not None:
        fields["action"] = action
    said = (f"{kind} decision", f"{kind} approval step")
    return Recorder(write, principal.approver(ctx), said=said, fields=fields, tell=tell)


Asked = Approved | CallToolResult | InputRequiredResult


async def ask(
    ctx: Context,
    app: DeskApp,
    record: Recorder,
    words: ActWords,
    *,
    question: str,
    preview: Preview,
    binding: dict[str, str],
    target: str,
    service: str | None,
    reason: str,
    report: Report,
    requested_because: str | None = None,
    before_asking: Callable[[], Awaitable[CallToolResult | None]] | None = None,
    approval_mode: ApprovalMode | None = None,
) -> Asked:
    """Ask the human for the act ``words`` names, as the act's and the service's ``approval`` says: an
    :class:`Approved` (not yet spent: see :func:`spend`), or the result to return as it is.

    The question is ``question`` (its first line), then what the act will touch (``preview``), then the
    requester's ``requested_because`` (masked here); the answer is bound to the preview's digest, so a 2026
    retry after the targets changed is refused (:func:`unchanged` checks again before the act runs). Nobody is
    asked when the journal could not take the answer (``AuditError``), nor when ``before_asking`` has a result
    (what would turn the human's yes into a refusal anyway). ``approval_mode`` (a runbook action's own) can only
    add eyes to the service's and the act's."""
    await app.check_journal_writable()
    binding = {**binding, client_features.PREVIEW_KEY: preview.digest}
    mode = strictest(app.settings.approval_for(words.verb, service), approval_mode)
    # Past an act limit ([act_limits]) nobody new is asked either: a limit no model can talk a human past. A call
    # that comes back for an answer already asked for is checked when its approval is spent (``spend``), where an
    # approval the page journalled is not counted against itself.
    asked_before = client_features.continues_a_question(ctx) or (
        mode != "in-band" and out_of_band.is_waiting(app, binding, record.actor)
    )
    if not asked_before and (limit := await app.limit_reached(words.verb, record.actor, service)) is not None:
        await record(Outcome.REFUSED_LIMIT, detail=f"{limit.refusal(words)}; nobody was asked")
        return results.error(limit.refusal(words))
    if before_asking is not None and (refused := await before_asking()) is not None:
        return refused
    because = shown_reason(requested_because, app.redactor)
    record.because = because
    question = with_preview(question, preview, because)
    reason = because or reason
    form = client_features.ApprovalForm(question, approval.form_schema(words.what))
    timeout = app.settings.approval_timeout_seconds
    page_journalled = False  # the approval page wrote the decision's row itself
    try:
        if mode == "in-band":
            answer = await client_features.ask_approval(ctx, form, timeout=timeout, binding=binding)
        else:
            asked = await out_of_band.ask_out_of_band(
                ctx,
                app,
                act=words.verb,
                target=target,
                question=question,
                reason=reason,
                requester=record.actor,
                mode=mode,
                binding=binding,
                journal=record.step,
                requester_key=principal.approver_key(ctx),
            )
            if isinstance(asked, out_of_band.PageAnswer):
                record.actor = asked.approver
                answer, page_journalled = asked.answer, asked.journalled
            elif isinstance(asked, client_features.PendingShown):
                return results.ok(asked.text, report(Outcome.APPROVAL_REQUESTED, reason=asked.text))
            else:
                answer = asked
    except anyio.get_cancelled_exc_class():
        await record.quietly(Outcome.DISCONNECTED, detail="the call was cancelled while the question was open")
        raise
    return await _settle(record, words, answer, page_journalled, timeout, target, report)


async def _settle(
    record: Recorder,
    words: ActWords,
    answer: client_features.Answered
    | client_features.Ask
    | client_features.NoChannel
    | client_features.StaleRound
    | client_features.NoAnswer,
    page_journalled: bool,
    timeout: float,
    target: str,
    report: Report,
) -> Asked:
    """The ladder after asking: no channel, a stale round, no answer, then the verdict; each journalled once."""
    if isinstance(answer, client_features.Ask):
        return answer.result
    if isinstance(answer, client_features.NoChannel):
        await record(Outcome.REFUSED_NO_CHANNEL, detail=record.answered(answer.reason))
        refused = report(Outcome.REFUSED_NO_CHANNEL, approver=record.actor, reason=answer.reason)
        return results.ok(words.no_channel_text(target), refused)
    if isinstance(answer, client_features.StaleRound):
        await record(Outcome.REFUSED_STALE, detail=answer.reason)
        return results.error(words.refusal(answer.reason))
    if isinstance(answer, client_features.NoAnswer):
        unanswered = NO_ANSWER[answer.kind]
        await record(unanswered, detail=record.answered(answer.reason))
        text = words.timed_out_text(timeout) if answer.kind == "timed_out" else words.refusal(answer.reason)
        return results.ok(text, report(unanswered, approver=record.actor, reason=answer.reason))
    # The act's own text comes once it is done (a silence's id, say): the approved verdict's is not shown.
    verdict = approval.decide_act(words, answer.action, answer.content, lambda ticket: f"approved under {ticket}")
    if not verdict.approved or verdict.ticket is None:
        refused_outcome = OUTCOME_OF[verdict.outcome]
        if not page_journalled:
            await record(refused_outcome, ticket=verdict.ticket, detail=record.answered())
        shown = report(refused_outcome, ticket=verdict.ticket, approver=record.actor, reason=verdict.text)
        return results.ok(verdict.text, shown)
    return Approved(ticket=verdict.ticket, nonce=answer.nonce, journalled=page_journalled)


async def unchanged(
    record: Recorder, words: ActWords, approved: Approved, shown: Preview, now: Preview
) -> CallToolResult | None:
    """Before an approved act runs: the result to return when what it would touch is no longer what the
    approver saw (journalled as a stale approval), else None."""
    if now.digest == shown.digest:
        return None
    await record(Outcome.REFUSED_STALE, ticket=approved.ticket, detail=f"{CHANGED}: now {'; '.join(now.lines)}")
    return results.error(words.refusal(CHANGED))


async def spend(
    app: DeskApp, record: Recorder, words: ActWords, approved: Approved, service: str | None, detail: str = ""
) -> CallToolResult | None:
    """Journal the approval with its nonce before the act runs (unless the approval page did): an answer used
    twice is refused, and the refusal journalled (the result to return).

    The act limits are checked again first: a question asked before a limit was reached may be answered after,
    and two asked at once may both be approved. A service's acts spend under its restart lock, so its limits
    cannot be passed by two at once; the approval counts itself once (``limits.reached``'s ``spending``)."""
    if (limit := await app.limit_reached(words.verb, record.actor, service, spending=approved.nonce)) is not None:
        detail = f"{limit.refusal(words)}; it had been approved (approval {approved.nonce})"
        await record(Outcome.REFUSED_LIMIT, ticket=approved.ticket, detail=detail)
        return results.error(limit.refusal(words))
    if approved.journalled:
        return None
    try:
        await record(Outcome.APPROVED, ticket=approved.ticket, detail=record.answered(detail), nonce=approved.nonce)
    except DuplicateApproval:
        await record(Outcome.REFUSED_STALE, ticket=approved.ticket, detail=f"replayed approval {approved.nonce}")
        return results.error(words.refusal(REPLAYED))
    return None
