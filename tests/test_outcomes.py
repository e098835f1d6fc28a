"""core/outcomes.py: every act's outcomes are typed, and its texts render the contract's exact words."""

from __future__ import annotations

import string

import pytest

from incident_desk.core import outcomes
from incident_desk.core.outcomes import (
    EVENT_OUTCOMES,
    OUTCOME_OF,
    RESTART_OUTCOMES,
    Answer,
    Outcome,
    all_outcome_texts,
)


def test_every_answer_is_an_outcome_of_both_journals_under_its_own_name() -> None:
    assert set(OUTCOME_OF) == set(Answer)
    for answer in Answer:
        assert OUTCOME_OF[answer].value == answer.value
        assert OUTCOME_OF[answer] in RESTART_OUTCOMES and OUTCOME_OF[answer] in EVENT_OUTCOMES


def test_the_contract_texts_render_exactly() -> None:
    restart = outcomes.RESTART
    assert outcomes.RESTART_EXECUTED.render(service="search-api", ticket="CHG-7", seconds="0.1").splitlines()[0] == (
        "RESTARTED search-api under CHG-7"
    )
    assert restart.refused_text(Answer.UNTICKED) == "NOT RESTARTED -- form submitted with the box unticked"
    assert restart.refused_text(Answer.DECLINED) == "NOT RESTARTED -- operator declined"
    assert restart.refused_text(Answer.CANCELLED) == "NOT RESTARTED -- operator dismissed the dialog"
    assert restart.refused_text(Answer.NO_TICKET) == "NOT RESTARTED -- a change ticket is required"
    assert restart.timed_out_text(300) == "NOT RESTARTED -- no answer within 300s"
    assert restart.no_channel_text("payments-api") == (
        "ELICITATION_UNAVAILABLE -- refusing to restart payments-api without an approval channel"
    )
    simulated = outcomes.RESTART_SIMULATED.render(service="a", ticket="T")
    assert simulated.splitlines()[0] == "RESTARTED a under T (simulated)"
    assert outcomes.RESOLVED.render(id="INC-1", ticket="T", resolution="fixed") == "RESOLVED INC-1 under T: fixed"
    silenced = outcomes.SILENCED.render(id="INC-1", until="2026-12-01T10:00:00", ticket="T", silence_id="s1")
    assert silenced == "SILENCED INC-1 until 2026-12-01T10:00:00Z under T (silence s1)"
    assert outcomes.UNSILENCED.render(id="INC-1", silence_id="s1") == "UNSILENCED INC-1 (silence s1 expired)"
    assert outcomes.SILENCE.refused_text(Answer.DECLINED) == "NOT SILENCED -- operator declined"
    assert outcomes.UNSILENCE.no_channel_text("INC-1") == (
        "ELICITATION_UNAVAILABLE -- refusing to unsilence INC-1 without an approval channel"
    )
    assert outcomes.ACKNOWLEDGED.render(id="INC-1", actor="os:ana") == "ACKNOWLEDGED INC-1 by os:ana"
    assert outcomes.NOTE_ADDED.render(id="INC-1", actor="os:ana") == "NOTE ADDED to INC-1 by os:ana"


def test_the_listing_covers_every_act_and_names_only_known_outcomes() -> None:
    texts = all_outcome_texts()
    assert {t.act for t in texts} == {"restart", "acknowledge", "note", "resolve", "silence", "unsilence", "run"}
    known = {o.value for o in RESTART_OUTCOMES} | {o.value for o in EVENT_OUTCOMES} | {""}
    assert {t.outcome for t in texts} <= known
    assert len({(t.act, str(t.outcome), t.template) for t in texts}) == len(texts), "a text is listed twice"
    # Every way a restart is refused after the question has a text, as does every act's "done".
    listed = {str(t.outcome) for t in texts if t.act == "restart"}
    assert {str(a) for a in Answer if a != Answer.APPROVED} <= listed
    assert {"executed", "simulated", "failed", "timed_out", "refused_no_channel", "refused_busy"} <= listed
    for act in ("acknowledge", "note", "resolve", "silence", "unsilence"):
        assert any(t.act == act and t.outcome == Outcome.DONE for t in texts), act
    ran = {str(t.outcome) for t in texts if t.act == "run"}
    assert {"executed", "failed", "refused_no_channel", "refused_busy", "refused_limit"} <= ran


@pytest.mark.parametrize("text", all_outcome_texts(), ids=lambda t: f"{t.act}:{t.outcome}:{t.template[:30]}")
def test_every_template_renders_with_its_own_fields(text: outcomes.OutcomeText) -> None:
    fields = {name for _, name, _, _ in string.Formatter().parse(text.template) if name}
    rendered = text.render(**{name: f"<{name}>" for name in fields})
    assert "{" not in rendered and "}" not in rendered
