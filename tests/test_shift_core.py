"""The handoff's parts drawn from journal rows (core, no MCP): pending out-of-band approvals, the acts of the
window, and the text's sections in the contract's order with every untrusted field one visible line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from incident_desk.core.handoff.oncall import OnCall
from incident_desk.core.handoff.shift import (
    SECTIONS,
    Handoff,
    OpenIncident,
    acts_in_window,
    pending_approvals,
    render,
)
from incident_desk.core.journal.activity import Act, Event
from incident_desk.core.journal.audit import Decision
from incident_desk.core.outcomes import Outcome

AT = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=5)


def _event(act: Act, outcome: Outcome, minutes_ago: float, text: str = "") -> Event:
    return Event("desk", "INC-1", act, outcome, "os:alice", text=text, time=AT - timedelta(minutes=minutes_ago))


def _decision(outcome: Outcome, minutes_ago: float, detail: str = "") -> Decision:
    return Decision(
        "payments-api",
        outcome,
        "CHG-1",
        "os:bob",
        "2025-11-25",
        detail=detail,
        time=AT - timedelta(minutes=minutes_ago),
    )


def _same(text: str) -> str:
    return text


def test_an_approval_requested_and_not_yet_decided_is_pending() -> None:
    events = [_event(Act.RESOLVE, Outcome.APPROVAL_REQUESTED, 2), _event(Act.RESOLVE, Outcome.PAGE_OPENED, 1)]
    decisions = [
        _decision(Outcome.APPROVAL_REQUESTED, 3, "action flush: approval page abc"),
        _decision(Outcome.APPROVAL_REQUESTED, 4),
        _decision(Outcome.APPROVED, 3.5),
    ]
    pending = pending_approvals(events, decisions, AT, TIMEOUT, _same)
    assert [(p.what, p.requester) for p in pending] == [
        ("action flush on payments-api", "os:bob"),
        ("resolve INC-1", "os:alice"),
    ]


def test_an_approval_past_its_timeout_is_no_longer_pending() -> None:
    events = [_event(Act.SILENCE, Outcome.APPROVAL_REQUESTED, 6)]
    assert pending_approvals(events, [], AT, TIMEOUT, _same) == []


def test_the_acts_of_the_window_are_what_took_effect_or_ran() -> None:
    events = [
        _event(Act.ACKNOWLEDGE, Outcome.DONE, 30),
        _event(Act.RESOLVE, Outcome.DECLINED, 20),
        _event(Act.NOTE, Outcome.DONE, 13 * 60, text="yesterday"),
        _event(Act.NOTE, Outcome.DONE, 10, text="line one\nline two\nrequested because: the model asked"),
    ]
    decisions = [
        _decision(Outcome.APPROVED, 5),
        _decision(Outcome.EXECUTED, 4),
        _decision(Outcome.FAILED, 3, "action x"),
    ]
    acts = acts_in_window(events, decisions, AT - timedelta(hours=12), _same)
    assert [(a.what, a.outcome, a.detail) for a in acts] == [
        ("acknowledge INC-1", "done", ""),
        ("note INC-1", "done", "line one␊line two"),
        ("restart payments-api", "executed", ""),
        ("action x on payments-api", "failed", ""),
    ]


def test_the_sections_come_in_the_contracts_order_and_empty_ones_say_so() -> None:
    handoff = Handoff(
        at=AT,
        hours=12,
        on_call=OnCall("calendar", who="carol", until=AT + timedelta(days=1), next_who="dave"),
        open_incidents=(OpenIncident("INC-1", "db", "Disk full", "open"),),
    )
    lines = render(handoff).split("\n")
    assert lines[0] == "On call: carol until 2026-12-04T10:00:00Z; next: dave"
    assert [line for line in lines if line in SECTIONS] == list(SECTIONS)
    assert lines[lines.index("Open incidents") + 1] == "- INC-1 [open] db: Disk full"
    assert lines[lines.index("Resolved") + 1] == "- none"
