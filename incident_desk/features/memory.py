"""Incident memory: ``find_similar_incidents`` (what happened last time, and what fixed it), ``save_postmortem``
and the ``postmortem://{id}`` resource. Ranking is the memory store's (BM25 or PostgreSQL full text): offline,
deterministic, no model."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp
from incident_desk.core.incidents import CLOSED_STATUSES, DataError
from incident_desk.core.journal.activity import Act, Event, stamp
from incident_desk.core.journal.audit import AuditError
from incident_desk.core.journal.memory import (
    MAX_POSTMORTEM_CHARS,
    MAX_SIMILAR,
    MAX_TEXT_CHARS,
    MemoryUnavailable,
    Postmortem,
    Similar,
)
from incident_desk.core.neighbours.untrusted import masked_line, masked_text
from incident_desk.core.outcomes import Outcome
from incident_desk.identity import principal
from incident_desk.protocol import client_features
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, note, read

MAX_QUERY_CHARS = 2000
DEFAULT_SIMILAR = 5
# How long the first answer of a fresh desk waits for the memory's start-up pass over the desk's history.
LEARN_WAIT_SECONDS = 10.0


class SimilarIncident(BaseModel):
    incident_id: str
    title: str
    service: str
    source: str = Field(description="The incident source that served it (folder, alertmanager:...)")
    status: str = Field(description="resolved or closed; else `last seen {status}`: it was open when last served")
    score: float = Field(description="How closely it matches (higher is closer; comparable within one answer)")
    opened: datetime
    resolution: str = Field(description="What fixed it (empty when nobody said)")
    resolved: datetime | None
    resolve_minutes: int | None = Field(description="Minutes from opened to resolved")
    restarts: int = Field(description="Restarts of its service done while it was open")
    silences: int = Field(description="Silences made for it")
    postmortem: str | None = Field(description="postmortem://{id} when a postmortem was saved")


WrittenOutSimilar = Annotated[SimilarIncident, results.written_out(SimilarIncident)]


class SimilarIncidents(BaseModel):
    matched_on: str = Field(description="What was looked for: the incident's words or the query")
    incidents: list[WrittenOutSimilar] = Field(description="Best match first")


class PostmortemSaved(BaseModel):
    incident_id: str
    author: str
    time: datetime
    uri: str


def _entry(found: Similar) -> SimilarIncident:
    past = found.incident
    seconds = past.resolve_seconds
    return SimilarIncident(
        incident_id=past.incident_id,
        title=masked_line(past.title),
        service=past.service,
        source=past.source,
        # Open when it was last served and not open now: the desk saw it end, or no longer sees it.
        status=past.status if past.status.lower() in CLOSED_STATUSES else f"last seen {past.status}",
        score=found.score,
        opened=past.opened,
        resolution=masked_line(past.resolution, MAX_TEXT_CHARS),
        resolved=past.resolved,
        resolve_minutes=None if seconds is None else seconds // 60,
        restarts=past.restarts,
        silences=past.silences,
        postmortem=f"postmortem://{past.incident_id}" if past.has_postmortem else None,
    )


def _line(entry: SimilarIncident) -> str:
    fixed = f"fixed: {entry.resolution}" if entry.resolution else "no resolution recorded"
    took = f" in {entry.resolve_minutes} min" if entry.resolve_minutes is not None else ""
    done = []
    if entry.restarts:
        done.append(f"{entry.restarts} restart{'s' if entry.restarts > 1 else ''}")
    if entry.silences:
        done.append(f"{entry.silences} silence{'s' if entry.silences > 1 else ''}")
    acts = f"; {', '.join(done)}" if done else ""
    pm = f"; postmortem {entry.postmortem}" if entry.postmortem else ""
    return (
        f"{entry.incident_id} [{entry.status}, opened {stamp(entry.opened)}Z] {entry.service}: {entry.title} -- "
        f"{fixed}{took}{acts}{pm}"
    )


TOOLS = ToolKinds(find_similar_incidents=read(), save_postmortem=note(repeatable=True))


def register(server: MCPServer, app: DeskApp) -> None:
    @TOOLS.tool(server)
    async def find_similar_incidents(
        incidentId: Annotated[str | None, Field()] = None,
        query: Annotated[
            str | None, Field(description="or words: an error line, a symptom", max_length=MAX_QUERY_CHARS)
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_SIMILAR)] = DEFAULT_SIMILAR,
    ) -> Annotated[CallToolResult, SimilarIncidents]:
        """Past incidents like an incident or a query, best first, with what fixed them."""
        if incidentId is None and not (query and query.strip()):
            return results.error("Give incidentId or query: there is nothing to look for")
        if query is not None and len(query) > MAX_QUERY_CHARS:
            return results.error(f"query is {len(query)} characters long; at most {MAX_QUERY_CHARS}")
        words = query or ""
        try:
            if incidentId is not None:
                remembered = await app.remember_now(await app.incident(incidentId))
                words = " ".join((remembered.title, remembered.service, remembered.labels, remembered.signature, words))
            still_to_learn = await app.history_learnt(LEARN_WAIT_SECONDS)
            found = await app.past_incidents(words, incidentId, limit)
        except (DataError, MemoryUnavailable, AuditError) as exc:
            return results.failed(exc)
        entries = [_entry(item) for item in found]
        subject = incidentId if incidentId is not None else f"“{masked_line(query, 80)}”"
        if not entries:
            text = f"No past incident on this desk looks like {subject}."
        else:
            text = "\n".join([f"Past incidents like {subject}, best first:", *(_line(e) for e in entries)])
        if still_to_learn:
            text += (
                f"\n(the desk is still remembering its history: {still_to_learn} incidents to go; ask again for a "
                "fuller answer)"
            )
        matched = masked_line(words, 300)
        return results.ok(text, SimilarIncidents(matched_on=matched, incidents=entries))

    @TOOLS.tool(server)
    async def save_postmortem(
        incidentId: str,
        markdown: Annotated[str, Field(description=f"at most {MAX_POSTMORTEM_CHARS} characters")],
        ctx: Context,
    ) -> Annotated[CallToolResult, PostmortemSaved]:
        """Keep an incident's postmortem as postmortem://{id}."""
        if len(markdown) > MAX_POSTMORTEM_CHARS:
            return results.error(
                f"POSTMORTEM NOT SAVED -- it is {len(markdown)} characters long; at most {MAX_POSTMORTEM_CHARS}"
            )
        if not markdown.strip():
            return results.error("POSTMORTEM NOT SAVED -- it is empty")
        try:
            incident = await app.incident(incidentId)
        except DataError as exc:
            return results.failed(exc)
        author = principal.approver(ctx)
        event = Event(
            desk=app.desk_name,
            incident_id=incidentId,
            act=Act.POSTMORTEM,
            outcome=Outcome.DONE,
            actor=author,
            text=f"postmortem saved ({len(markdown)} characters): postmortem://{incidentId}",
            protocol_era=client_features.view(ctx).era,
        )
        try:
            # Kept masked: a postmortem quotes logs, and the journal's file outlives what any reader is shown.
            await app.save_postmortem(Postmortem(incidentId, masked_text(markdown), author, event.time))
            await app.record_event(event)
            await app.remember_now(incident)
        except (MemoryUnavailable, AuditError) as exc:
            return results.error(f"POSTMORTEM NOT SAVED -- {exc}")
        uri = f"postmortem://{incidentId}"
        return results.ok(
            f"POSTMORTEM SAVED for {incidentId} by {author}: {uri}",
            PostmortemSaved(incident_id=incidentId, author=author, time=event.time, uri=uri),
        )

    @server.resource(
        "postmortem://{id}",
        name="postmortem",
        description="An incident's saved postmortem (Markdown), as save_postmortem kept it",
        mime_type="text/markdown",
    )
    async def postmortem_resource(id: str) -> str:
        try:
            saved = await app.postmortem(id)
        except (MemoryUnavailable, AuditError) as exc:
            raise results.resource_failure(exc) from None
        if saved is None:
            raise ResourceNotFoundError(f"No postmortem saved for {id}")
        return masked_text(saved.markdown)
