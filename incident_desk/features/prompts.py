"""The ``postmortem`` prompt: a template the user picks by name, filled with the incident's log."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import Field

from incident_desk.app import DeskApp
from incident_desk.core.acts import runs
from incident_desk.core.incidents import LogUnavailable, UnknownIncident
from incident_desk.core.journal.activity import MAX_ACTIVITY_EVENTS
from incident_desk.core.journal.audit import AuditError

DEFAULT_AUDIENCE = "the engineering team"


SAVE_SENTENCE = (
    "When the postmortem is written, you can keep it on the desk with the save_postmortem tool "
    "(incidentId {id}, markdown): it is then served as postmortem://{id} and shown with similar incidents."
)


def postmortem_text(audience: str | None, log: str, activity: str = "", save_as: str | None = None) -> str:
    """The prompt, worded exactly as clients and tests expect; when the desk journalled acts on the incident (or
    ran runbook actions on its service while it was open), its activity log follows the log; when the desk serves
    ``save_postmortem``, a last sentence says the result can be saved as ``save_as``."""
    who = audience if audience and audience.strip() else DEFAULT_AUDIENCE
    text = (
        f"Write a blameless postmortem for {who}. Sections: impact, timeline, root cause, follow-ups. "
        f"Use only the log below.\n\n{log}"
    )
    if activity:
        text += f"\n\nWhat the on-call desk journalled for this incident (who did what, UTC):\n{activity}"
    if save_as is not None:
        text += "\n\n" + SAVE_SENTENCE.format(id=save_as)
    return text


def register(server: MCPServer, app: DeskApp) -> None:
    @server.prompt(name="postmortem", description="Draft a blameless postmortem for an incident")
    async def postmortem(
        incidentId: Annotated[str, Field(description="e.g. INC-1042")],
        audience: Annotated[str | None, Field(description="who will read it")] = None,
    ) -> str:
        try:
            log = await app.bounded_log_from_loop(incidentId)
        except UnknownIncident as exc:
            # An MCPError keeps its message in both protocol eras; anything else is masked in 2026-07-28.
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        except LogUnavailable as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from None
        try:
            events = await app.activity(incidentId, MAX_ACTIVITY_EVENTS)
            service_runs = await app.action_runs(await app.incident(incidentId), events)
            activity = "\n".join(runs.activity_lines(events, service_runs))
        except AuditError as exc:
            # Still worth drafting from the log alone, but never as if nothing had been done.
            activity = f"(the desk's activity log cannot be read: {exc})"
        # Offered only when this desk serves the tool (its operator may have turned it off).
        can_save = any(tool.name == "save_postmortem" for tool in await server.list_tools())
        return postmortem_text(audience, log, activity, incidentId if can_save else None)
