"""Every act's outcomes, typed, and the texts the tools answer with.

An outcome is an enum member from the approval verdict to the journal row and the tool's text, so a misspelt
outcome fails type checking instead of a journal write. The texts are the product contract (restarts, then the
incident acts): ``all_outcome_texts()`` lists every one of them, which the documentation is generated from.

No MCP imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from incident_desk.core.errors import echoed


class Answer(StrEnum):
    """What the human's answer to an approval form amounts to (``core.approval.decide_act``)."""

    APPROVED = "approved"
    UNTICKED = "unticked"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    NO_TICKET = "no_ticket"


class Outcome(StrEnum):
    """What became of one act: the ``outcome`` of its journal row, a restart's decision or an incident's event.
    One enum, because the approval flow that writes most of them is one; each journal takes its own subset."""

    DONE = "done"
    APPROVED = "approved"
    EXECUTED = "executed"
    SIMULATED = "simulated"
    FAILED = "failed"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    UNTICKED = "unticked"
    NO_TICKET = "no_ticket"
    TIMED_OUT = "timed_out"
    REFUSED_NO_CHANNEL = "refused_no_channel"
    REFUSED_UNKNOWN_SERVICE = "refused_unknown_service"
    DISCONNECTED = "disconnected"
    CLIENT_ERROR = "client_error"
    REFUSED_STALE = "refused_stale"
    REFUSED_BUSY = "refused_busy"
    REFUSED = "refused"
    LOCK_BROKEN = "lock_broken"
    REFUSED_LIMIT = "refused_limit"  # an act limit ([act_limits]) was reached: nobody was asked
    LIMITS_RESET = "limits_reset"  # an operator started a service's restart count and cooldown again
    APPROVAL_REQUESTED = "approval_requested"  # out-of-band: the link was sent (by: the requester)
    PAGE_OPENED = "page_opened"  # out-of-band: someone opened the approval page
    REFUSED_FOREIGN = "refused_foreign"  # an unsilence left alone a silence someone else made
    REFUSED_SELF_APPROVAL = "refused_self_approval"  # second-person: the page refused the requester's own approval


# What the audit journal takes for a restart: an act that runs a command, so never plainly "done".
RESTART_OUTCOMES: frozenset[Outcome] = frozenset(Outcome) - {Outcome.DONE, Outcome.REFUSED, Outcome.REFUSED_FOREIGN}
# What an incident's activity log takes: ``done`` for an act that took effect, else why it did not.
EVENT_OUTCOMES: frozenset[Outcome] = frozenset(Outcome) - {
    Outcome.EXECUTED,
    Outcome.SIMULATED,
    Outcome.REFUSED_UNKNOWN_SERVICE,
    Outcome.REFUSED_BUSY,
    Outcome.LOCK_BROKEN,
    Outcome.LIMITS_RESET,
}

# An act limit counts approval rows; a restart's cooldown runs from its approval and its end; a reset starts a
# service's counts again (``core.acts.limits``). What the journals select for the limits.
RESTARTED_OUTCOMES: frozenset[Outcome] = frozenset(
    {Outcome.APPROVED, Outcome.EXECUTED, Outcome.SIMULATED, Outcome.FAILED}
)
LIMIT_OUTCOMES: frozenset[Outcome] = RESTARTED_OUTCOMES | {Outcome.LIMITS_RESET}

# A refused answer is journalled under its own name, for a restart and for an incident act alike.
OUTCOME_OF: dict[Answer, Outcome] = {answer: Outcome(answer.value) for answer in Answer}

# Why an approved act did not happen, after its refusal word ("NOT RESTARTED -- operator declined").
REFUSAL_REASONS: dict[Answer, str] = {
    Answer.UNTICKED: "form submitted with the box unticked",
    Answer.DECLINED: "operator declined",
    Answer.CANCELLED: "operator dismissed the dialog",
    Answer.NO_TICKET: "a change ticket is required",
}
TICKET_TOO_LONG = "the change ticket is too long ({length} characters, at most {limit})"
NO_ANSWER = "no answer within {seconds}s"
REPLAYED = "this approval was already used"
JOURNAL_UNWRITABLE = "the audit journal cannot be written, so nothing was done: {error}"
NO_CHANNEL = "ELICITATION_UNAVAILABLE -- refusing to {verb} {target} without an approval channel"
# Past an act limit nobody is asked; ``what`` names the limit (``PERSON_LIMIT``, ``SERVICE_LIMIT`` or
# ``COOLDOWN_LIMIT``).
LIMIT_REACHED = "limit reached: {what} ({used} of {limit} in the last hour); clears at {time}Z"
PERSON_LIMIT = "acts by {person}"
SERVICE_LIMIT = "restarts of {service}"
# The cooldown's count in the parentheses is the service's restarts in the hour, against their hourly limit.
COOLDOWN_LIMIT = "the {seconds}s cooldown after the last restart of {service}"
# The targets an act would touch differ from the preview the human approved (``core.acts.preview``).
CHANGED = "what it would touch changed after it was approved; ask again"
# An unsilence leaves alone, by default, a silence this desk did not make for the incident.
FOREIGN_SILENCE = (
    "silence {silence_id} was made by {creator}, not by this desk, and covers {count} alert(s); "
    "ask again with include_foreign=true to lift it"
)
# What a client without URL-mode elicitation shows while an out-of-band approval waits for its page.
PENDING_TEXT = "APPROVAL PENDING -- open {url} to approve"


# The fields of an outcome's text that echo what a client sent, and the argument each comes from.
ECHOED_FIELDS = {"id": "incidentId", "service": "service", "action": "action"}


@dataclass(frozen=True)
class OutcomeText:
    """One text a tool answers with: for ``act``, when its journal outcome is ``outcome`` ("" when nothing is
    journalled). ``template`` is a ``str.format`` template whose {fields} name what fills them."""

    act: str
    outcome: str
    template: str

    def render(self, **fields: Any) -> str:
        """The text, with every field a client chose (an id, a service, an action) capped as errors show it."""
        shown = {
            name: echoed(value, ECHOED_FIELDS[name]) if name in ECHOED_FIELDS and isinstance(value, str) else value
            for name, value in fields.items()
        }
        return self.template.format(**shown)


@dataclass(frozen=True)
class ActWords:
    """How an approved act names itself: ``verb`` in refusals ("restart"), ``refused`` before each reason
    ("NOT RESTARTED"), ``what`` the form's box approves ("the restart"), and ``done`` its text once done."""

    verb: str
    refused: str
    what: str
    done: str

    def refusal(self, reason: str) -> str:
        return f"{self.refused} -- {reason}"

    def refused_text(self, answer: Answer) -> str:
        return self.refusal(REFUSAL_REASONS[answer])

    def no_channel_text(self, target: str) -> str:
        return NO_CHANNEL.format(verb=self.verb, target=target)

    def timed_out_text(self, seconds: float) -> str:
        return self.refusal(NO_ANSWER.format(seconds=f"{seconds:g}"))

    def ticket_too_long_text(self, length: int, limit: int) -> str:
        return self.refusal(TICKET_TOO_LONG.format(length=length, limit=limit))

    def journal_unwritable_text(self, error: object) -> str:
        return self.refusal(JOURNAL_UNWRITABLE.format(error=error))

    def limit_text(self, what: str, used: int, limit: int | str, clears: str) -> str:
        return self.refusal(LIMIT_REACHED.format(what=what, used=used, limit=limit, time=clears))

    def refusal_texts(self, target: str) -> list[OutcomeText]:
        """Every text of the act's refusals while asking for, and checking, its approval (``target`` is the
        placeholder of what it acts on). The outcome names are the same in both journals."""
        refused = [OutcomeText(self.verb, str(answer), self.refused_text(answer)) for answer in REFUSAL_REASONS]
        return [
            *refused,
            OutcomeText(self.verb, "no_ticket", self.refusal(TICKET_TOO_LONG)),
            OutcomeText(self.verb, "timed_out", self.refusal(NO_ANSWER)),
            OutcomeText(self.verb, "refused_no_channel", NO_CHANNEL.format(verb=self.verb, target=target)),
            OutcomeText(self.verb, "refused_stale", self.refusal(REPLAYED)),
            OutcomeText(self.verb, "refused_stale", self.refusal(CHANGED)),
            OutcomeText(self.verb, "refused_stale", self.refusal("{reason}")),
            OutcomeText(self.verb, "disconnected", self.refusal("{reason}")),
            OutcomeText(self.verb, "client_error", self.refusal("{reason}")),
            OutcomeText(self.verb, "", self.refusal(JOURNAL_UNWRITABLE)),
            OutcomeText(self.verb, "refused_limit", self.refusal(_limit_template(PERSON_LIMIT))),
        ]


def _limit_template(what: str) -> str:
    """The limit text with ``what`` filled in, every other field left a placeholder."""
    return LIMIT_REACHED.replace("{what}", what)


RESTART = ActWords("restart", "NOT RESTARTED", "the restart", "RESTARTED {service} under {ticket}")
RESOLVE = ActWords("resolve", "NOT RESOLVED", "the resolution", "RESOLVED {id} under {ticket}: {resolution}")
SILENCE = ActWords(
    "silence", "NOT SILENCED", "the silence", "SILENCED {id} until {until}Z under {ticket} (silence {silence_id})"
)
UNSILENCE = ActWords(
    "unsilence", "NOT UNSILENCED", "lifting the silence", "UNSILENCED {id} (silence {silence_id} expired)"
)
RUN = ActWords("run", "NOT RUN", "running the action", "RAN {action} on {service} under {ticket}")

# The texts beyond the approval's, act by act.
RESTART_EXECUTED = OutcomeText("restart", Outcome.EXECUTED, RESTART.done + "\ncommand exited 0 after {seconds}s")
RESTART_SIMULATED = OutcomeText(
    "restart",
    Outcome.SIMULATED,
    RESTART.done + " (simulated)\nsimulated: no restart command is configured for {service}, so nothing was executed",
)
RESTART_FAILED = OutcomeText(
    "restart", Outcome.FAILED, "RESTART FAILED {service} under {ticket} -- the restart command {why}"
)
RESTART_LOCK_LOST = OutcomeText(
    "restart", Outcome.FAILED, "RESTART FAILED {service} under {ticket} -- {lost}; the command was killed"
)
RESTART_BUSY = OutcomeText("restart", Outcome.REFUSED_BUSY, RESTART.refusal("{busy}"))
UNKNOWN_SERVICE = OutcomeText(
    "restart", Outcome.REFUSED_UNKNOWN_SERVICE, "No such service: {service}. Known services: {known}"
)
RESTART_LIMITS = [
    OutcomeText("restart", Outcome.REFUSED_LIMIT, RESTART.refusal(_limit_template(what)))
    for what in (SERVICE_LIMIT, COOLDOWN_LIMIT)
]
ACT_FAILED = {
    words.verb: OutcomeText(words.verb, Outcome.FAILED, words.refusal("{error}")) for words in (SILENCE, UNSILENCE)
}
ACKNOWLEDGED = OutcomeText("acknowledge", Outcome.DONE, "ACKNOWLEDGED {id} by {actor}")
ALREADY_ACKNOWLEDGED = OutcomeText("acknowledge", "", "{id} was already acknowledged by {actor} at {time}Z")
NOT_ACKNOWLEDGED = OutcomeText("acknowledge", "", "NOT ACKNOWLEDGED -- the audit journal cannot be written: {error}")
NOTE_ADDED = OutcomeText("note", Outcome.DONE, "NOTE ADDED to {id} by {actor}")
NOTE_TOO_LONG = OutcomeText(
    "note", "", "NOTE NOT ADDED -- the note is {length} characters long; a note is at most {limit}"
)
NOTE_EMPTY = OutcomeText("note", "", "NOTE NOT ADDED -- the note is empty")
NOTE_NOT_ADDED = OutcomeText("note", "", "NOTE NOT ADDED -- the audit journal cannot be written: {error}")
RAN = OutcomeText("run", Outcome.EXECUTED, RUN.done + "\ncommand exited 0 after {seconds}s")
RUN_FAILED = OutcomeText("run", Outcome.FAILED, "FAILED {action} on {service} under {ticket}: exit {code}")
# A command with no exit status of its own: killed at its deadline (restart's words), or never started.
RUN_TIMED_OUT = OutcomeText(
    "run",
    Outcome.FAILED,
    "FAILED {action} on {service} under {ticket}: timed out after {seconds}s; the command was killed",
)
RUN_NOT_STARTED = OutcomeText("run", Outcome.FAILED, "FAILED {action} on {service} under {ticket}: {launch_error}")
RUN_LOCK_LOST = OutcomeText(
    "run", Outcome.FAILED, "FAILED {action} on {service} under {ticket}: {lost}; the command was killed"
)
RUN_BUSY = OutcomeText("run", Outcome.REFUSED_BUSY, RUN.refusal("{busy}"))
NO_ACTION = OutcomeText("run", "", "No action {action} for {service}; it has: {names}")
BAD_PARAMETER = OutcomeText("run", "", RUN.refusal("{why}"))
RESOLVED = OutcomeText("resolve", Outcome.DONE, RESOLVE.done)
SILENCED = OutcomeText("silence", Outcome.DONE, SILENCE.done)
UNSILENCED = OutcomeText("unsilence", Outcome.DONE, UNSILENCE.done)


def all_outcome_texts() -> list[OutcomeText]:
    """Every act's outcome texts, act by act, each as its template: the source of the documentation's list."""
    return [
        RESTART_EXECUTED,
        RESTART_SIMULATED,
        RESTART_FAILED,
        RESTART_LOCK_LOST,
        RESTART_BUSY,
        UNKNOWN_SERVICE,
        *RESTART.refusal_texts("{service}"),
        *RESTART_LIMITS,
        ACKNOWLEDGED,
        ALREADY_ACKNOWLEDGED,
        NOT_ACKNOWLEDGED,
        NOTE_ADDED,
        NOTE_TOO_LONG,
        NOTE_EMPTY,
        NOTE_NOT_ADDED,
        RESOLVED,
        *RESOLVE.refusal_texts("{id}"),
        SILENCED,
        ACT_FAILED["silence"],
        *SILENCE.refusal_texts("{id}"),
        UNSILENCED,
        ACT_FAILED["unsilence"],
        *UNSILENCE.refusal_texts("{id}"),
        OutcomeText("unsilence", Outcome.REFUSED_FOREIGN, UNSILENCE.refusal(FOREIGN_SILENCE)),
        RAN,
        RUN_FAILED,
        RUN_TIMED_OUT,
        RUN_NOT_STARTED,
        RUN_LOCK_LOST,
        RUN_BUSY,
        NO_ACTION,
        BAD_PARAMETER,
        *RUN.refusal_texts("{action} on {service}"),
        *(
            OutcomeText("run", Outcome.REFUSED_LIMIT, RUN.refusal(_limit_template(what)))
            for what in (SERVICE_LIMIT, COOLDOWN_LIMIT)
        ),
        *(
            OutcomeText(words.verb, Outcome.APPROVAL_REQUESTED, PENDING_TEXT)
            for words in (RESTART, RESOLVE, SILENCE, UNSILENCE, RUN)
        ),
    ]
