"""approvals/flow.py is the one approval flow: a restart and an incident act ask, refuse and journal through it.

A fix to the flow must reach every act, so no act may keep a copy of its tables, or ask on its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from incident_desk.approvals import flow
from incident_desk.core.outcomes import EVENT_OUTCOMES, RESTART_OUTCOMES
from incident_desk.server import build_server
from tests.helpers import ROOT, AppFactory, connect, text_of
from tests.restart_helpers import SERVICE, Operator, outcomes

FEATURES = [ROOT / "incident_desk" / "features" / name for name in ("restart.py", "approved_acts.py")]


@pytest.mark.parametrize("path", FEATURES, ids=lambda p: p.name)
def test_an_act_keeps_no_copy_of_the_flow(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    tables = [
        node.target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id.isupper()
    ]
    assert tables == [], f"{path.name} keeps its own outcome tables: {tables}"
    for asking in ("ask_approval", "ask_out_of_band", "decide_act", "DuplicateApproval"):
        assert asking not in source, f"{path.name} asks or decides on its own ({asking}); use approvals.flow"


def test_the_flow_tables_fit_both_journals() -> None:
    for outcome in [*flow.NO_ANSWER.values(), *flow.STEP_OUTCOME.values()]:
        assert outcome in RESTART_OUTCOMES and outcome in EVENT_OUTCOMES, outcome


@pytest.mark.anyio
async def test_no_answer_on_a_restart_and_on_a_resolve_journals_the_same_outcome(make_app: AppFactory) -> None:
    app = make_app(approval_timeout_seconds=0.5)
    operator = Operator("accept", {"confirm": True, "ticket": "CHG-1"}, delay=2)
    async with connect(build_server(app), "legacy", elicitation_callback=operator) as client:
        restart = await client.call_tool("restart_service", {"service": SERVICE})
        resolve = await client.call_tool("resolve_incident", {"incidentId": "INC-1042", "resolution": "rolled back"})
    assert text_of(restart) == "NOT RESTARTED -- no answer within 0.5s"
    assert text_of(resolve) == "NOT RESOLVED -- no answer within 0.5s"
    expected = str(flow.NO_ANSWER["timed_out"])
    assert outcomes(app.journal) == [expected]
    assert [str(e.outcome) for e in app.journal.activity("INC-1042")] == [expected]
    for result in (restart, resolve):
        assert result.structured_content is not None and result.structured_content["outcome"] == expected
