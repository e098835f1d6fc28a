"""The shift handoff: ``get_shift_handoff``, its resource ``handoff://current`` and the ``handoff`` prompt.

One text for all three (``core.handoff.shift.render``), gathered by ``shift_handoff`` from the sources, the
journal and the on-call calendars; the tool's structured content is deliberately small (who is on call, what is
open, what ends this shift), the details are in the text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp
from incident_desk.core.handoff.shift import DEFAULT_HOURS, MAX_HOURS, Handoff, render
from incident_desk.core.neighbours.untrusted import one_line
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, read
from incident_desk.shift_handoff import gather

HANDOFF_URI = "handoff://current"
PROMPT_OPENING = (
    "Write the handoff for the incoming on-call engineer from the desk's handoff below: what needs attention "
    "first (silences ending this shift, pending approvals, open incidents), then the rest. Use only what it says."
)


class ShiftHandoff(BaseModel):
    at: datetime
    on_call: str | None = Field(description="Null when the calendar cannot say (see calendar_problem)")
    until: datetime | None
    next: str | None
    calendar_problem: str | None
    open_incidents: list[str]
    silences_ending: list[str] = Field(description="Ids of silences ending within the shift")
    pending_approvals: int


def _structured(handoff: Handoff) -> ShiftHandoff:
    found = handoff.on_call
    return ShiftHandoff(
        at=handoff.at,
        on_call=found.who,
        until=found.until,
        next=found.next_who,
        calendar_problem=found.problem,
        open_incidents=[incident.id for incident in handoff.open_incidents],
        silences_ending=[silence.silence_id for silence in handoff.silences if silence.ends_this_shift],
        pending_approvals=len(handoff.pending),
    )


TOOLS = ToolKinds(get_shift_handoff=read(open_world=True))


def register(server: MCPServer, app: DeskApp) -> None:
    @TOOLS.tool(server)
    async def get_shift_handoff(
        hours: Annotated[int, Field(ge=1, le=MAX_HOURS, description="Hours back and ahead")] = DEFAULT_HOURS,
    ) -> Annotated[CallToolResult, ShiftHandoff]:
        """On call now and next, open incidents, silences, acts, approvals, changes, resolutions."""
        handoff = await gather(app, hours)
        return results.ok(render(handoff), _structured(handoff))

    @server.resource(
        HANDOFF_URI,
        name="shift-handoff",
        description="The shift handoff for the last and next 12 hours",
        mime_type="text/plain",
    )
    async def current_handoff() -> str:
        return render(await gather(app))

    @server.prompt(name="handoff", description="Write the shift handoff for the incoming on-call engineer")
    async def handoff(
        hours: Annotated[str | None, Field(description=f"shift length in hours (default {DEFAULT_HOURS})")] = None,
    ) -> str:
        shift_hours = DEFAULT_HOURS
        if hours is not None and hours.strip():
            if not hours.strip().isdigit() or not 1 <= int(hours) <= MAX_HOURS:
                raise MCPError(
                    INVALID_PARAMS, f"hours must be a whole number from 1 to {MAX_HOURS}, not {one_line(hours, 20)!r}"
                )
            shift_hours = int(hours)
        return f"{PROMPT_OPENING}\n\n{render(await gather(app, shift_hours))}"
