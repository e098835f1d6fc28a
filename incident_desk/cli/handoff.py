"""``incident-desk handoff [--hours N]``: the shift handoff in a terminal, the same text ``get_shift_handoff``
gives a model, gathered from the desk's sources, journal and calendars without serving anything."""

from __future__ import annotations

import anyio

from incident_desk.cli.output import out
from incident_desk.settings.model import Settings


def run_handoff(settings: Settings, hours: int) -> int:
    from incident_desk.assembly import build_app
    from incident_desk.core.handoff.shift import render
    from incident_desk.shift_handoff import gather

    app = build_app(settings)
    try:
        handoff = anyio.run(gather, app, hours)
    finally:
        app.journal.close()
    out(render(handoff))
    return 0
