"""The approval decision (restarts, and the approved incident acts: resolve, silence, unsilence), era-agnostic:
given what the human answered, may the desk act, and what does it say?

No MCP imports. The texts are a contract: clients, people and docs/outcomes.md match on them word for word.
Nothing restarts without an explicit accept with the box ticked and a change ticket.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from incident_desk.core.journal.audit import FIELD_LIMITS, cut
from incident_desk.core.names import ALNUM, NameShape
from incident_desk.core.neighbours.untrusted import mask_secrets
from incident_desk.core.outcomes import RESTART, ActWords, Answer, Outcome

TICKET = NameShape(ALNUM, ALNUM + "_.:#/-", 64)
# A ticket longer than the journal keeps whole is refused with its own text, and kept cut (marked as cut).
MAX_TICKET_CHARS = FIELD_LIMITS["ticket"]


def form_schema(what: str) -> dict[str, Any]:
    """The approval form, flat as elicitation requires: a box to tick for ``what`` (e.g. "the restart") and a
    change ticket."""
    return {
        "type": "object",
        "properties": {
            "confirm": {"type": "boolean", "description": f"Tick to approve {what}"},
            "ticket": {"type": "string", "description": "Change ticket number, e.g. CHG-2291"},
        },
        # Only the box is required: a person who unticks it must not have to invent a ticket to say no.
        "required": ["confirm"],
    }


FORM_SCHEMA: dict[str, Any] = form_schema(RESTART.what)


def question(service: str) -> str:
    return f"Restart {service}? This drops in-flight requests."


def no_channel_text(service: str) -> str:
    return RESTART.no_channel_text(service)


def restarted_text(service: str, ticket: str) -> str:
    return RESTART.done.format(service=service, ticket=ticket)


def timed_out_text(seconds: float) -> str:
    return RESTART.timed_out_text(seconds)


def ticket_too_long_text(length: int, words: ActWords = RESTART) -> str:
    return words.ticket_too_long_text(length, MAX_TICKET_CHARS)


@dataclass(frozen=True)
class Verdict:
    outcome: Answer
    text: str
    ticket: str | None = None

    @property
    def approved(self) -> bool:
        return self.outcome == Answer.APPROVED


def decide(service: str, action: str, content: dict[str, Any]) -> Verdict:
    """Turn the human's answer to a restart question into a verdict."""
    return decide_act(RESTART, action, content, lambda ticket: restarted_text(service, ticket))


def decide_act(words: ActWords, action: str, content: dict[str, Any], done: Callable[[str], str]) -> Verdict:
    """Turn the human's answer into a verdict for the act ``words`` names; ``done(ticket)`` is the approved text.
    Anything but an explicit, ticketed accept is a no."""
    if action == "decline":
        return Verdict(Answer.DECLINED, words.refused_text(Answer.DECLINED))
    if action != "accept":
        return Verdict(Answer.CANCELLED, words.refused_text(Answer.CANCELLED))
    raw_ticket = content.get("ticket")
    typed = raw_ticket.strip() if isinstance(raw_ticket, str) and raw_ticket.strip() else None
    # What the verdict carries into the journal and the report: never more than the journal keeps.
    # Masked like a log line: a secret pasted as a ticket is no ticket, and is never journalled or shown.
    ticket = None if typed is None else cut(mask_secrets(typed), MAX_TICKET_CHARS)
    # `is True`, not truthiness: a client sending "false" or 1 has not ticked a boolean box.
    if content.get("confirm") is not True:
        return Verdict(Answer.UNTICKED, words.refused_text(Answer.UNTICKED), ticket)
    if typed is not None and len(typed) > MAX_TICKET_CHARS:
        return Verdict(Answer.NO_TICKET, ticket_too_long_text(len(typed), words), ticket)
    if ticket is None or not TICKET.fullmatch(ticket):
        return Verdict(Answer.NO_TICKET, words.refused_text(Answer.NO_TICKET), ticket)
    return Verdict(Answer.APPROVED, done(ticket), ticket)


@dataclass(frozen=True)
class Entry:
    """One row an approved act leaves, whichever journal keeps it (a restart's decision, an incident's event): the
    flow writes these, each act turns them into its own journal's row."""

    outcome: Outcome
    who: str
    detail: str = ""
    ticket: str | None = None
    nonce: str | None = None
    exit_status: int | None = None


@dataclass(frozen=True)
class Approved:
    """A ticketed yes not yet spent: its nonce is journalled before the act runs, unless the approval page already
    journalled it (``journalled``)."""

    ticket: str
    nonce: str
    journalled: bool = False
