"""``incident-desk investigate ID``: an incident's ranked evidence in a terminal, as ``investigate_incident``
gives it a model (the same findings, with their line numbers, queries, change records and cursors)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from incident_desk.cli.output import err, out

if TYPE_CHECKING:
    from incident_desk.settings.model import Settings

# A terminal has room for more than a model's default budget.
TERMINAL_BUDGET_TOKENS = 4000


async def _investigate(settings: Settings, incident_id: str, budget_tokens: int) -> str:
    from incident_desk import investigation
    from incident_desk.assembly import build_app

    app = build_app(settings)
    try:
        found = await investigation.investigate(app, incident_id)
    finally:
        if app.memory is not None:
            app.memory.stop()
        app.journal.close()
    return found.report(budget_tokens).text


def run_investigate(settings: Settings, incident_id: str, budget_tokens: int = TERMINAL_BUDGET_TOKENS) -> int:
    from incident_desk.core.incidents import DataError

    try:
        text = anyio.run(_investigate, settings, incident_id, budget_tokens)
    except DataError as exc:
        err(str(exc))
        return 1
    out(text)
    return 0
