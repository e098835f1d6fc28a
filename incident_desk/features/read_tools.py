"""Read-side tool twins of the resources: many clients show tools only, so every capability is also a tool."""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from incident_desk.app import DeskApp
from incident_desk.core.incidents import DataError, Incident, Listing, Problem
from incident_desk.core.journal.activity import IncidentState, Standing, stamp, state_of
from incident_desk.core.journal.audit import MAX_RECENT_DECISIONS, AuditError, format_decisions
from incident_desk.core.names import INCIDENT_ID, is_safe_name
from incident_desk.core.neighbours.untrusted import masked_line
from incident_desk.core.search import paging as logfile
from incident_desk.core.search.pattern import MAX_PATTERN_LENGTH, PatternError
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, read
from incident_desk.protocol.tool_schemas import Answer

MAX_PAGE_LINES = 5_000
MAX_MATCHES = 1_000
# list_incidents pages: a screenful by default, and never the whole of a 20,000-alert Alertmanager in one answer.
LIST_PAGE = 50
MAX_LIST_PAGE = 500
MAX_SKIPPED_SHOWN = 50
IncidentId = str
CursorArg = Annotated[str | None, Field(description="next_cursor of the last call")]


class IncidentEntry(BaseModel):
    id: str
    title: str
    service: str
    severity: str
    status: str
    opened: datetime
    source: str = Field(description="The incident source serving it: folder, or a configured source's name")
    state: str = Field(
        description="open, acknowledged, silenced or resolved (from this desk's journal and the source); unknown "
        "while the journal cannot be read"
    )
    acknowledged_by: str | None = Field(default=None, description="Who acknowledged it, when someone did")


class SkippedEntry(BaseModel):
    entry: str
    reason: str


# Item schemas written out rather than referenced: see tool_results.written_out.
WrittenOutIncident = Annotated[IncidentEntry, results.written_out(IncidentEntry)]
WrittenOutSkipped = Annotated[SkippedEntry, results.written_out(SkippedEntry)]


class IncidentList(BaseModel):
    incidents: list[WrittenOutIncident]
    skipped: list[WrittenOutSkipped] = Field(
        description=f"Data-directory entries and sources that could not be read (first page only, at most "
        f"{MAX_SKIPPED_SHOWN})"
    )
    total: int = Field(description="How many incidents match, over every page")
    next_cursor: str | None = Field(description="Pass back as cursor for the next page; null on the last page")


class LogLine(BaseModel):
    number: int
    text: str


WrittenOutLogLine = Annotated[LogLine, results.written_out(LogLine)]


class LogPage(BaseModel):
    incident_id: str
    lines: list[WrittenOutLogLine]
    next_cursor: str | None = Field(description="Pass back as cursor for the next page; null at end of log")
    total_bytes: int


class LogSearch(BaseModel):
    incident_id: str
    pattern: str
    matches: list[WrittenOutLogLine]
    next_cursor: str | None = Field(description="Where to resume the search; null when the log is exhausted")
    scanned_bytes: int
    total_bytes: int
    stopped: str = Field(description="Why this call stopped: end of log, match limit, time budget, byte budget")


class Runbook(BaseModel):
    service: str
    markdown: str


class AuditEntry(BaseModel):
    time: datetime
    service: str
    outcome: str
    ticket: str | None
    approver: str
    protocol_era: str
    exit_status: int | None


WrittenOutAuditEntry = Annotated[AuditEntry, results.written_out(AuditEntry)]


class AuditLog(BaseModel):
    decisions: list[WrittenOutAuditEntry] = Field(description="Newest first")


def _render_lines(lines: list[logfile.Line]) -> str:
    return "\n".join(f"{line.number}: {line.text}" for line in lines)


def _continuation(next_cursor: str | None, what: str) -> str:
    if next_cursor is None:
        return f"({what}: end of log)"
    return f"({what}: more follows; call again with cursor={next_cursor})"


@dataclass(frozen=True)
class ListingView:
    """One view of the incidents for a status and a state, sorted by id with each one's state: made once per view
    of the sources and the journal (in a worker thread: 20,000 alerts take a while), then served a page at a time."""

    incidents: list[Incident]
    ids: list[str]
    states: dict[str, str]
    standings: Mapping[str, Standing]
    problems: tuple[Problem, ...]
    status: str
    wanted: str | None
    unknown_states: str | None


def _render_listing(
    current: Listing,
    status: str,
    standings: Mapping[str, Standing],
    wanted: str | None,
    *,
    unknown_states: str | None = None,
) -> ListingView:
    """The view ``list_incidents`` pages through for one view of the incidents and the journal;
    ``unknown_states`` says why the journal could not give the states (each is then ``unknown``)."""
    incidents = [current.incidents[key] for key in sorted(current.incidents)]
    incidents = [i for i in incidents if status == "all" or i.is_open]
    states = {
        i.id: "unknown" if unknown_states else state_of(standings.get(i.id), silenced=bool(i.silenced_by))
        for i in incidents
    }
    if wanted is not None:
        incidents = [i for i in incidents if states[i.id] == wanted]
    return ListingView(
        incidents=incidents,
        ids=[i.id for i in incidents],
        states=states,
        standings=standings,
        problems=current.problems,
        status=status,
        wanted=wanted,
        unknown_states=unknown_states,
    )


def _render_page(view: ListingView, cursor: str | None, limit: int) -> tuple[str, dict[str, Any]]:
    """The text and structured content of one page of ``view``: the incidents after ``cursor`` (the last id of
    the previous page; ids are sorted, so a page never repeats or skips one when incidents come or go between
    calls), the skipped entries on the first page only."""
    start = bisect.bisect_right(view.ids, cursor) if cursor else 0
    shown = view.incidents[start : start + limit]
    total = len(view.incidents)
    next_cursor = shown[-1].id if shown and start + len(shown) < total else None
    standings, states = view.standings, view.states

    def acknowledger(incident_id: str) -> str | None:
        standing = standings.get(incident_id)
        first = standing.acknowledged if standing is not None else None
        return None if first is None else first.actor

    def marks(incident_id: str) -> str:
        state = states[incident_id]
        if state == "acknowledged":
            standing = standings[incident_id]
            assert standing.acknowledged is not None
            return f", acknowledged by {standing.acknowledged.actor} at {stamp(standing.acknowledged.time)}Z"
        return "" if state in ("open", "unknown") else f", {state}"

    problems = view.problems if cursor is None else ()
    listing = IncidentList(
        incidents=[
            IncidentEntry(
                id=i.id,
                title=i.title,
                service=i.service,
                severity=i.severity,
                status=i.status,
                opened=i.opened,
                source=i.source,
                state=states[i.id],
                acknowledged_by=acknowledger(i.id),
            )
            for i in shown
        ],
        skipped=[SkippedEntry(entry=p.entry, reason=p.reason) for p in problems[:MAX_SKIPPED_SHOWN]],
        total=total,
        next_cursor=next_cursor,
    )
    text = "\n".join(
        f"{i.id} [{i.severity}, {i.status}{marks(i.id)}] {i.service}: {i.title}"
        + ("" if i.source == "folder" else f" (source: {i.source})")
        for i in shown
    )
    status, wanted = view.status, view.wanted
    if not shown:
        text = f"No {status} incidents" if wanted is None else f"No {status} incidents are {wanted}"
        text += f" after cursor {cursor}." if total else "."
    if listing.skipped:
        text += "\n" + "\n".join(f"skipped {p.entry}: {p.reason}" for p in listing.skipped)
        if len(problems) > MAX_SKIPPED_SHOWN:
            text += f"\nskipped {len(problems) - MAX_SKIPPED_SHOWN} more entries, not shown"
    span = f"incidents {start + 1}-{start + len(shown)} of {total}"
    if next_cursor is not None:
        text += f"\n({span}: more follows; call again with cursor={next_cursor})"
    elif cursor is not None and shown:
        text += f"\n({span}: end of the list)"
    if view.unknown_states:
        text += f"\nstates unknown: {view.unknown_states}"
    return text, listing.model_dump(mode="json", by_alias=True)


TOOLS = ToolKinds(
    list_incidents=read(answer=Answer.FIELDS),
    read_incident_log=read(answer=Answer.RECORDS),
    search_incident_log=read(answer=Answer.RECORDS),
    get_runbook=read(),
    get_audit_log=read(),
)


def register(server: MCPServer, app: DeskApp) -> None:
    # The last view of each status and state, with the listing and journal view it was made from: a listing is
    # never changed once made (a look that finds a change makes a new one), so while the same one stands each
    # page of it is cut from the same view.
    views: dict[tuple[str, str | None], tuple[Listing, ListingView]] = {}

    @TOOLS.tool(server)
    async def list_incidents(
        status: Annotated[Literal["open", "all"], Field()] = "open",
        state: Annotated[
            IncidentState | None,
            Field(),
        ] = None,
        cursor: Annotated[
            str | None, Field(max_length=INCIDENT_ID.most, description="next_cursor of the last call")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST_PAGE)] = LIST_PAGE,
    ) -> Annotated[CallToolResult, IncidentList]:
        """Incidents with service, severity, status and state, a page at a time."""
        if cursor is not None and not is_safe_name(cursor, INCIDENT_ID):
            return results.error(f"malformed cursor {cursor!r}: expected the next_cursor of a previous page")
        current = await app.listing()
        try:
            standings = await app.standings()
        except AuditError as exc:
            # The incidents are still worth listing while the journal is down; their states are said unknown.
            if state is not None:
                return results.error(f"Cannot filter on state: the incidents' states cannot be read: {exc}")
            unknown = await app.compute(partial(_render_listing, current, status, {}, None, unknown_states=str(exc)))
            return results.ok_rendered(*_render_page(unknown, cursor, limit))
        made = views.get((status, state))
        if made is None or made[0] is not current or made[1].standings != standings:
            made = (current, await app.compute(partial(_render_listing, current, status, standings, state)))
            views[(status, state)] = made
        return results.ok_rendered(*_render_page(made[1], cursor, limit))

    @TOOLS.tool(server)
    async def read_incident_log(
        incidentId: IncidentId,
        cursor: CursorArg = None,
        limit: Annotated[int | None, Field(ge=1, le=MAX_PAGE_LINES)] = None,
    ) -> Annotated[CallToolResult, LogPage]:
        """One page of an incident's log, oldest first; page on with next_cursor."""
        try:
            page = await app.read_page(incidentId, cursor, limit)
        except (DataError, logfile.CursorError) as exc:
            return results.failed(exc)
        next_cursor = page.next_cursor
        structured = LogPage(
            incident_id=incidentId,
            lines=[LogLine(number=line.number, text=line.text) for line in page.lines],
            next_cursor=next_cursor,
            total_bytes=page.total_bytes,
        )
        text = _render_lines(page.lines) + "\n" + _continuation(next_cursor, f"{len(page.lines)} lines")
        return results.ok(text.lstrip("\n"), structured)

    @TOOLS.tool(server)
    async def search_incident_log(
        incidentId: IncidentId,
        pattern: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_PATTERN_LENGTH,
                description="regex (RE2: no backreferences or lookaround)",
            ),
        ],
        cursor: CursorArg = None,
        limit: Annotated[int, Field(ge=1, le=MAX_MATCHES)] = 50,
        ignoreCase: bool = False,
    ) -> Annotated[CallToolResult, LogSearch]:
        """Log lines matching a regex, with line numbers; resume with next_cursor."""
        try:
            found = await app.search(incidentId, pattern, cursor, limit, ignore_case=ignoreCase)
        except (DataError, PatternError, logfile.CursorError) as exc:
            return results.failed(exc)
        next_cursor = found.next_cursor
        structured = LogSearch(
            incident_id=incidentId,
            pattern=pattern,
            matches=[LogLine(number=line.number, text=line.text) for line in found.matches],
            next_cursor=next_cursor,
            scanned_bytes=found.scanned_bytes,
            total_bytes=found.total_bytes,
            stopped=found.stopped,
        )
        scanned = f"{len(found.matches)} matches in {found.scanned_bytes} bytes"
        if next_cursor is not None and found.stopped != "match limit":
            scanned += f", stopped at the {found.stopped}"
        summary = _continuation(next_cursor, scanned)
        body = _render_lines(found.matches) if found.matches else f"No line matches {pattern!r}."
        return results.ok(f"{body}\n{summary}", structured)

    @TOOLS.tool(server)
    async def get_runbook(
        service: str,
    ) -> Annotated[CallToolResult, Runbook]:
        """A service's runbook (Markdown)."""
        try:
            markdown = await app.runbook(service)
        except DataError as exc:
            return results.failed(exc)
        return results.ok(markdown, Runbook(service=service, markdown=markdown))

    @TOOLS.tool(server)
    async def get_audit_log(
        limit: Annotated[int, Field(ge=1, le=MAX_RECENT_DECISIONS)] = 20,
    ) -> Annotated[CallToolResult, AuditLog]:
        """The latest restart decisions, newest first."""
        try:
            decisions = await app.recent_decisions(limit)
        except AuditError as exc:
            # The journal names itself and why (a PostgreSQL that is down says so, within about a second).
            return results.failed(exc)
        entries = [
            AuditEntry(
                time=d.time,
                service=d.service,
                outcome=str(d.outcome),
                ticket=masked_line(d.ticket) if d.ticket else d.ticket,
                approver=d.approver,
                protocol_era=d.protocol_era,
                exit_status=d.exit_status,
            )
            for d in decisions
        ]
        return results.ok(format_decisions(decisions), AuditLog(decisions=entries))
