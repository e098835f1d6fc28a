"""The one module that talks to the SDK about what the client can do: capabilities, sampling, elicitation.

Two protocol eras reach the same tools:

* 2025-11-25 (handshake, sessions): the server sends ``sampling/createMessage`` or ``elicitation/create`` on the
  open call and waits, bounded by a timeout, for the answer.
* 2026-07-28 (no sessions): the server ends the call with an ``input_required`` result holding the question and
  a sealed ``requestState``; the client asks its model or human and retries the call with the answer.

Tools never see the difference. They call :func:`sample` or :func:`ask_approval` and get back either an answer,
a plain reason why there is none, or an :class:`Ask` to return as the tool's result (the 2026 round trip). The
question is bound to the exact call it was asked for: a retry whose ``binding`` differs is refused. The next
protocol change should touch this file only.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

from incident_desk.core.outcomes import CHANGED, PENDING_TEXT
from incident_desk.protocol.eras import ERA_2025, ROUND_TRIP_ERAS

ResultT = TypeVar("ResultT", bound=BaseModel)

_STATE_VERSION = 1


@dataclass(frozen=True)
class ClientView:
    """What this request's client can do, as far as the desk cares."""

    era: str
    can_sample: bool
    can_elicit_form: bool
    round_trip: bool
    back_channel: bool

    @property
    def sampling_route(self) -> str | None:
        """Why sampling is impossible here, or None when it can be tried."""
        # Checked first: stateless HTTP never learns a 2025 client's capabilities, so "did not declare" would lie.
        if not (self.round_trip or self.back_channel):
            return f"stateless HTTP cannot send a sampling request to a {ERA_2025} client (no back-channel)"
        if not self.can_sample:
            return "the client did not declare the sampling capability"
        return None

    @property
    def elicitation_route(self) -> str | None:
        """Why asking the human is impossible here, or None when it can be tried."""
        if not (self.round_trip or self.back_channel):
            return f"stateless HTTP cannot send an approval question to a {ERA_2025} client (no back-channel)"
        if not self.can_elicit_form:
            return "the client did not declare the form elicitation capability"
        return None


def view(ctx: Context) -> ClientView:
    caps = ctx.client_capabilities
    era = ctx.protocol_version or ERA_2025
    elicitation = caps.elicitation if caps else None
    round_trip = era in ROUND_TRIP_ERAS
    return ClientView(
        era=era,
        can_sample=bool(caps and caps.sampling is not None),
        # An empty elicitation object means form mode (spec 2025-11-25).
        can_elicit_form=elicitation is not None and (elicitation.form is not None or elicitation.url is None),
        round_trip=round_trip,
        back_channel=not round_trip and ctx.session.can_send_request,
    )


def can_be_notified(session: Any) -> bool:
    """Whether the desk can send this 2025-11-25 client messages of its own (a subscription's updates): not over
    stateless HTTP, where a request's answer is its only channel."""
    return bool(getattr(session, "can_send_request", False))


@dataclass(frozen=True)
class Ask:
    """Return ``result`` from the tool: the 2026 client answers and retries the call."""

    result: InputRequiredResult


# The binding key that holds an act's preview digest (``core.acts.preview``).
PREVIEW_KEY = "preview"


@dataclass(frozen=True)
class StaleRound:
    """A retry that does not belong to this call (``unbound``), or came back too late to be trusted (``late``)."""

    kind: Literal["unbound", "late", "changed"]
    reason: str


def _stale_binding(asked: Mapping[str, str], now: Mapping[str, str], unbound: str) -> StaleRound:
    """A retry whose binding differs: only in the preview's digest means the act's targets changed since the
    question (``changed``); anything else, that the answer belongs to another call (``unbound``)."""
    rest_asked = {k: v for k, v in asked.items() if k != PREVIEW_KEY}
    rest_now = {k: v for k, v in now.items() if k != PREVIEW_KEY}
    if rest_asked == rest_now:
        return StaleRound("changed", CHANGED)
    return StaleRound("unbound", unbound)


@dataclass(frozen=True)
class _Round:
    """The sealed state of one outstanding question (the SDK encrypts and authenticates it)."""

    key: str
    binding: dict[str, str]
    nonce: str
    asked_at: float

    def encode(self) -> str:
        return json.dumps(
            {
                "v": _STATE_VERSION,
                "key": self.key,
                "binding": self.binding,
                "nonce": self.nonce,
                "at": self.asked_at,
            },
            sort_keys=True,
        )

    @classmethod
    def decode(cls, text: str | None) -> _Round | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            if data.get("v") != _STATE_VERSION:
                return None
            return cls(key=data["key"], binding=dict(data["binding"]), nonce=data["nonce"], asked_at=data["at"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


@dataclass(frozen=True)
class _Retry:
    state: _Round
    answer: Any


def _answer_for(ctx: Context, key: str, binding: Mapping[str, str], timeout: float) -> _Retry | StaleRound | None:
    """On a 2026 retry, the round's state and the client's answer; None on a first call (or no answer yet)."""
    state = _Round.decode(ctx.request_state)
    responses = ctx.input_responses or {}
    if state is None or state.key != key or key not in responses:
        return None
    if state.binding != dict(binding):
        asked = ", ".join(f"{k}={v}" for k, v in sorted(state.binding.items()) if k != PREVIEW_KEY)
        return _stale_binding(state.binding, binding, f"the answer was given for {asked}, not for this call")
    waited = time.time() - state.asked_at
    if waited > timeout:
        return StaleRound("late", f"no answer within {timeout:g}s (the retry came after {waited:.0f}s)")
    return _Retry(state, responses[key])


def _new_round(key: str, binding: Mapping[str, str]) -> _Round:
    return _Round(key=key, binding=dict(binding), nonce=secrets.token_hex(16), asked_at=time.time())


# Sampling -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SamplingQuestion:
    system_prompt: str
    user_text: str
    max_tokens: int
    temperature: float

    def request(self) -> CreateMessageRequest:
        # includeContext is left out on purpose: it defaults to none, and the other values are deprecated.
        return CreateMessageRequest(
            params=CreateMessageRequestParams(
                messages=[SamplingMessage(role="user", content=TextContent(type="text", text=self.user_text))],
                system_prompt=self.system_prompt,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
            )
        )


@dataclass(frozen=True)
class Sampled:
    text: str
    model: str


@dataclass(frozen=True)
class NotSampled:
    """Sampling was skipped or failed; ``reason`` says which, for the result and the log."""

    reason: str


def _sampled_text(result: Any) -> Sampled | NotSampled:
    if not isinstance(result, CreateMessageResult):
        return NotSampled("the client answered the sampling request with something other than a message")
    content = result.content
    if not isinstance(content, TextContent) or not content.text.strip():
        return NotSampled("the client's model answered without text")
    return Sampled(text=content.text.strip(), model=result.model)


def _unanswered_retry(ctx: Context, key: str, binding: Mapping[str, str]) -> bool:
    """A retry carrying this call's own round state but no answer to it: the 2026 client declined.

    The 2026-07-28 round trip has no way to say "no" to a sampling request; a client that will not lend its
    model can only retry without the answer. Asking again would loop until the client's round limit.
    """
    state = _Round.decode(ctx.request_state)
    return (
        state is not None
        and state.key == key
        and state.binding == dict(binding)
        and key not in (ctx.input_responses or {})
    )


async def sample(
    ctx: Context, question: SamplingQuestion, *, timeout: float, binding: Mapping[str, str]
) -> Sampled | NotSampled | Ask:
    """Borrow the client's model, never probing a capability the client did not declare."""
    client = view(ctx)
    if (why_not := client.sampling_route) is not None:
        return NotSampled(why_not)
    key = "summary"
    if client.round_trip:
        retry = _answer_for(ctx, key, binding, timeout)
        if isinstance(retry, StaleRound):
            return NotSampled(retry.reason)
        if retry is None:
            if _unanswered_retry(ctx, key, binding):
                return NotSampled("the client retried without answering the sampling request")
            state = _new_round(key, binding)
            return Ask(InputRequiredResult(input_requests={key: question.request()}, request_state=state.encode()))
        return _sampled_text(retry.answer)
    result = await _ask_on_open_call(ctx, question.request(), CreateMessageResult, timeout)
    if isinstance(result, NoAnswer):
        return NotSampled(
            {
                "timed_out": f"the client's model gave no answer within {timeout:g}s",
                "disconnected": "the client disconnected during the sampling request",
                "malformed": f"the client's sampling answer was malformed: {result.detail}",
                "client_error": f"the client refused or failed the sampling request ({result.detail})",
            }[result.kind]
        )
    return _sampled_text(result)


NoAnswerKind = Literal["timed_out", "disconnected", "client_error", "malformed"]


@dataclass(frozen=True)
class NoAnswer:
    """A question asked on the open call that got no usable answer; ``reason`` is for people."""

    kind: NoAnswerKind
    reason: str
    detail: str = ""


async def _ask_on_open_call(
    ctx: Context, request: CreateMessageRequest | ElicitRequest, result_type: type[ResultT], timeout: float
) -> ResultT | NoAnswer:
    """Send a server-to-client request on this call's stream (2025 era) and wait at most ``timeout``.

    The one place that knows how the SDK reports a timeout, a vanished client and a refusal.
    """
    try:
        answer: ResultT = await ctx.session.send_request(
            request,
            result_type,
            request_read_timeout_seconds=timeout,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
    except MCPError as exc:
        if exc.code == REQUEST_TIMEOUT:
            return NoAnswer("timed_out", f"no answer within {timeout:g}s")
        if exc.code == CONNECTION_CLOSED:
            # The SDK wakes a waiting request with this code when the client's stream ends mid-question.
            return NoAnswer("disconnected", "the client disconnected while the question was open")
        return NoAnswer("client_error", "the client answered with an error", f"{exc.code}: {exc.message}")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        return NoAnswer("disconnected", "the client disconnected while the question was open")
    except ValueError as exc:
        return NoAnswer("malformed", "the client's answer was malformed", exc.__class__.__name__)
    return answer


# Elicitation ----------------------------------------------------------------------------------------------

ApprovalAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True)
class ApprovalForm:
    message: str
    requested_schema: dict[str, Any]

    def request(self) -> ElicitRequest:
        return ElicitRequest(
            params=ElicitRequestFormParams(message=self.message, requested_schema=self.requested_schema)
        )


@dataclass(frozen=True)
class Answered:
    """The human's answer. ``nonce`` identifies the question, so one answer can act only once."""

    action: ApprovalAction
    content: dict[str, Any]
    nonce: str


@dataclass(frozen=True)
class NoChannel:
    reason: str


async def ask_approval(
    ctx: Context, form: ApprovalForm, *, timeout: float, binding: Mapping[str, str]
) -> Answered | NoChannel | NoAnswer | StaleRound | Ask:
    """Put ``form`` to the human and return their answer, or why there is none."""
    client = view(ctx)
    if (why_not := client.elicitation_route) is not None:
        return NoChannel(why_not)
    key = "approval"
    if client.round_trip:
        retry = _answer_for(ctx, key, binding, timeout)
        if isinstance(retry, StaleRound):
            return NoAnswer("timed_out", retry.reason) if retry.kind == "late" else retry
        if retry is None:
            new_state = _new_round(key, binding)
            return Ask(InputRequiredResult(input_requests={key: form.request()}, request_state=new_state.encode()))
        if not isinstance(retry.answer, ElicitResult):
            return NoAnswer("client_error", "the client answered the approval question with something else")
        content = dict(retry.answer.content or {})
        return Answered(action=retry.answer.action, content=content, nonce=retry.state.nonce)
    result = await _ask_on_open_call(ctx, form.request(), ElicitResult, timeout)
    if isinstance(result, NoAnswer):
        if result.kind == "client_error":
            return NoAnswer("client_error", f"the client failed the approval question ({result.detail})")
        if result.kind == "malformed":
            return NoAnswer("client_error", f"the client's answer was malformed: {result.detail}")
        return result
    return Answered(action=result.action, content=dict(result.content or {}), nonce=secrets.token_hex(16))


UI_META_KEYS = frozenset({"ui", "ui/resourceUri"})
APPS_EXTENSION_ID = "io.modelcontextprotocol/ui"  # mcp.server.apps.EXTENSION_ID, without importing that module


class AppsAdvertised(Extension):
    """MCP Apps as the handshake advertises it (the extension has no settings). The SDK's ``Apps`` holding the
    timeline tool and its view is made when the features are registered (``features.timeline``): its module and
    models are no part of a stdio desk's ``initialize`` answer."""

    identifier = APPS_EXTENSION_ID


class HideAppViewsFromPlainClients:
    """Server middleware: a client that did not declare the MCP Apps extension (with its MIME type) gets
    ``tools/list`` without the ``_meta.ui`` view links, so it is not told of a view it cannot render; the tools
    themselves, and their text, are the same for every client.

    At this tier the SDK hands back the wire dict of the result, not a model.
    """

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/list" or not isinstance(result, dict):
            return result
        from mcp.server.apps import client_supports_apps  # loaded by the features' registration already

        if client_supports_apps(ctx):
            return result
        for tool in result.get("tools", []):
            meta = tool.pop("_meta", None) or {}
            kept = {key: value for key, value in meta.items() if key not in UI_META_KEYS}
            if kept:
                tool["_meta"] = kept
        return result


# Out-of-band approval (URL mode) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkSent:
    """The client was given the link (URL mode, or the pending text it can show); wait for the page now.

    ``refused`` is set when the client declined or dismissed the link: a no needs no proof, so it is honoured;
    an accept proves nothing and is ignored (the page decides).
    """

    refused: ApprovalAction | None = None


@dataclass(frozen=True)
class PendingShown:
    """A 2026 client without URL mode got the pending text as the result; it retries the call later."""

    text: str


def _link_request(message: str, url: str, elicitation_id: str | None) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestURLParams(message=message, url=url, elicitation_id=elicitation_id))


def can_elicit_url(ctx: Context) -> bool:
    caps = ctx.client_capabilities
    return bool(caps and caps.elicitation is not None and caps.elicitation.url is not None)


@dataclass(frozen=True)
class LinkRound:
    """A 2026 retry of a URL-mode round: the approval it was sealed with, and the client's no, if it said no."""

    public_id: str
    refused: ApprovalAction | None


def continues_a_question(ctx: Context) -> bool:
    """A 2026 retry carrying the sealed state of a question this desk asked (in band or by link): the human has
    been asked already, and the call comes back with their answer."""
    return _Round.decode(ctx.request_state) is not None


def link_round(ctx: Context, binding: Mapping[str, str], timeout: float) -> LinkRound | StaleRound | None:
    """On a 2026 retry of a URL-mode round: the approval's public id the round was sealed with; the client's
    accept is ignored (the page decides), its decline or cancel honoured. None on a first call."""
    key = "approval_link"
    state = _Round.decode(ctx.request_state)
    if state is None or state.key != key or "approval" not in state.binding:
        return None
    asked = {k: v for k, v in state.binding.items() if k != "approval"}
    if asked != dict(binding):
        return _stale_binding(asked, binding, "the approval link was given for another call")
    if time.time() - state.asked_at > timeout:
        return StaleRound("late", f"no answer within {timeout:g}s")
    answer = (ctx.input_responses or {}).get(key)
    refused = answer.action if isinstance(answer, ElicitResult) and answer.action != "accept" else None
    return LinkRound(state.binding["approval"], refused)


def link_channel(ctx: Context) -> NoChannel | None:
    """Why no approval link can reach this client, or None: any elicitation capability will do (URL mode, or
    the pending text); none at all keeps the in-band refusal."""
    client = view(ctx)
    if not (client.round_trip or client.back_channel):
        return NoChannel(f"stateless HTTP cannot send an approval link to a {ERA_2025} client (no back-channel)")
    caps = ctx.client_capabilities
    if caps is None or caps.elicitation is None:
        return NoChannel("the client did not declare the elicitation capability")
    return None


async def send_approval_link(
    ctx: Context,
    *,
    message: str,
    url: str,
    public_id: str,
    binding: Mapping[str, str],
    timeout: float,
    wait_for_page: Callable[[], Awaitable[None]],
) -> NoChannel | Ask | PendingShown | LinkSent:
    """Point the person at the approval page: URL-mode elicitation where the client has it, else the pending
    text. 2025: sent on the open call, and ``wait_for_page`` (an awaitable factory) runs meanwhile; 2026: an
    ``input_required`` round (URL mode) or the pending text as the result, and the client retries."""
    client = view(ctx)
    if (no_channel := link_channel(ctx)) is not None:
        return no_channel
    pending_text = PENDING_TEXT.format(url=url)
    if client.round_trip:
        if not can_elicit_url(ctx):
            return PendingShown(pending_text)
        state = _new_round("approval_link", {**binding, "approval": public_id})
        request = _link_request(message, url, None)
        return Ask(InputRequiredResult(input_requests={"approval_link": request}, request_state=state.encode()))
    refused: list[ApprovalAction] = []
    async with anyio.create_task_group() as group:

        async def show_link() -> None:
            if can_elicit_url(ctx):
                answer = await _ask_on_open_call(ctx, _link_request(message, url, public_id), ElicitResult, timeout)
                if isinstance(answer, ElicitResult) and answer.action != "accept":
                    refused.append(answer.action)
                    group.cancel_scope.cancel()
                return
            await ctx.report_progress(0, None, pending_text)
            await ctx.session.send_log_message("warning", pending_text, related_request_id=ctx.request_id)

        group.start_soon(show_link)
        await wait_for_page()
        group.cancel_scope.cancel()
    if refused:
        return LinkSent(refused=refused[0])
    if can_elicit_url(ctx):
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await ctx.session.send_elicit_complete(public_id, related_request_id=ctx.request_id)
    return LinkSent()
