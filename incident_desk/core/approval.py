"""The restart decision, era-agnostic: given what the human answered, may the desk restart, and what does it say?

No MCP imports. The texts are the product contract (DESIGN §4); nothing restarts without an explicit accept with
the box ticked and a change ticket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from incident_desk.core.audit import FIELD_LIMITS, cut
from incident_desk.core.names import ALNUM, NameShape

TICKET = NameShape(ALNUM, ALNUM + "_.:#/-", 64)
# A ticket longer than the journal keeps whole is refused with its own text, and kept cut (marked as cut).
MAX_TICKET_CHARS = FIELD_LIMITS["ticket"]

FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "description": "Tick to approve the restart"},
        "ticket": {"type": "string", "description": "Change ticket number, e.g. CHG-2291"},
    },
    # Only the box is required: a person who unticks it must not have to invent a ticket (the seed's flaw).
    "required": ["confirm"],
}

# What decide() can conclude from an answer; the journal's outcomes (core.audit.Outcome) are a superset.
Outcome = Literal["approved", "unticked", "declined", "cancelled", "no_ticket"]


def question(service: str) -> str:
    return f"Restart {service}? This drops in-flight requests."


def no_channel_text(service: str) -> str:
    return f"ELICITATION_UNAVAILABLE -- refusing to restart {service} without an approval channel"


def restarted_text(service: str, ticket: str) -> str:
    return f"RESTARTED {service} under {ticket}"


def timed_out_text(seconds: float) -> str:
    return f"NOT RESTARTED -- no answer within {seconds:g}s"


def ticket_too_long_text(length: int) -> str:
    return f"NOT RESTARTED -- the change ticket is too long ({length} characters, at most {MAX_TICKET_CHARS})"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    text: str
    ticket: str | None = None

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"


def decide(service: str, action: str, content: dict[str, Any]) -> Verdict:
    """Turn the human's answer into a verdict. Anything but an explicit, ticketed accept is a no."""
    if action == "decline":
        return Verdict("declined", "NOT RESTARTED -- operator declined")
    if action != "accept":
        return Verdict("cancelled", "NOT RESTARTED -- operator dismissed the dialog")
    raw_ticket = content.get("ticket")
    typed = raw_ticket.strip() if isinstance(raw_ticket, str) and raw_ticket.strip() else None
    # What the verdict carries into the journal and the report: never more than the journal keeps.
    ticket = None if typed is None else cut(typed, MAX_TICKET_CHARS)
    # `is True`, not truthiness: a client sending "false" or 1 has not ticked a boolean box.
    if content.get("confirm") is not True:
        return Verdict("unticked", "NOT RESTARTED -- form submitted with the box unticked", ticket)
    if typed is not None and len(typed) > MAX_TICKET_CHARS:
        return Verdict("no_ticket", ticket_too_long_text(len(typed)), ticket)
    if ticket is None or not TICKET.fullmatch(ticket):
        return Verdict("no_ticket", "NOT RESTARTED -- a change ticket is required", ticket)
    return Verdict("approved", restarted_text(service, ticket), ticket)
