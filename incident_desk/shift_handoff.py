"""The shift handoff gathered from a running desk: what the ``handoff`` feature and ``incident-desk handoff`` share.

Everything comes through the DeskApp's async face (the sources, the journal, the calendars, the change sources),
each part read at once and each failure a named line of the handoff rather than a failed handoff: a calendar that
hangs names itself in the on-call line while the rest still answers. Text from people and neighbours is masked and
made one visible line (``core.handoff.shift.visible``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import anyio

from incident_desk.app import DeskApp
from incident_desk.core import errors
from incident_desk.core.handoff import shift
from incident_desk.core.handoff.oncall import OnCall
from incident_desk.core.incidents import Incident, Listing
from incident_desk.core.journal.activity import Event, Standing, state_of
from incident_desk.core.journal.audit import Decision
from incident_desk.core.sources.silences import SilenceError

# How many of the newest journal rows of each kind a handoff reads: more than a shift makes, bounded whatever.
JOURNAL_ROWS = 5000
# At most this many services' change sources are asked (those of the open and the resolved incidents).
MAX_CHANGE_SERVICES = 20


async def gather(app: DeskApp, hours: int = shift.DEFAULT_HOURS) -> shift.Handoff:
    """The handoff at the desk's clock, covering ``hours`` back (and, for silences, ``hours`` ahead)."""
    at = app.clock()
    since = at - timedelta(hours=hours)
    problems: list[str] = []
    listing = Listing({}, (), ())
    standings: Mapping[str, Standing] = {}
    events: list[Event] = []
    decisions: list[Decision] = []

    async def read_listing() -> None:
        nonlocal listing
        listing = await app.listing()

    async def read_journal() -> None:
        nonlocal standings, events, decisions
        try:
            standings = await app.standings()
            events, decisions = await app.journal_rows(JOURNAL_ROWS)
        except errors.Unavailable as exc:
            problems.append(f"the journal: {exc}")

    async with anyio.create_task_group() as group:
        group.start_soon(read_listing)
        group.start_soon(read_journal)
    problems += [
        f"{problem.entry}: {problem.reason}" for problem in listing.problems if problem.entry.startswith("source ")
    ]
    mask = app.redactor
    # Resolved on this desk (the journal) though its source still lists it: it belongs under Resolved.
    open_incidents = [
        listing.incidents[key]
        for key in listing.open_incident_ids()
        if (standing := standings.get(key)) is None or standing.resolved is None
    ]
    resolved = shift.resolved_in_window(events, since, mask)
    services = sorted({incident.service for incident in open_incidents})
    desk_on_call: OnCall | None = None
    service_on_call: list[tuple[str, OnCall]] = []
    silences: list[shift.SilenceShown] = []
    changes: list[shift.ChangeShown] = []

    async def read_on_call() -> None:
        nonlocal desk_on_call, service_on_call
        desk_on_call, service_on_call = await app.on_call(at, services)

    async def read_silences() -> None:
        silences.extend(await _silences(app, open_incidents, at, hours))

    async def read_changes() -> None:
        wanted = sorted({*services, *(_service_of(listing, r.incident_id) for r in resolved)} - {""})
        found, failed = await _changes(app, wanted[:MAX_CHANGE_SERVICES], since, at)
        changes.extend(found)
        problems.extend(failed)

    async with anyio.create_task_group() as group:
        group.start_soon(read_on_call)
        group.start_soon(read_silences)
        group.start_soon(read_changes)
    assert desk_on_call is not None
    notes = shift.last_notes(events)
    return shift.Handoff(
        at=at,
        hours=hours,
        on_call=desk_on_call,
        service_on_call=tuple(service_on_call),
        open_incidents=tuple(_open(incident, standings, notes, mask) for incident in open_incidents),
        silences=tuple(silences),
        acts=tuple(shift.acts_in_window(events, decisions, since, mask)),
        pending=tuple(
            shift.pending_approvals(
                events, decisions, at, timedelta(seconds=app.settings.approval_timeout_seconds), mask
            )
        ),
        changes=tuple(sorted(changes, key=lambda change: change.time)),
        resolved=tuple(resolved),
        problems=tuple(problems),
    )


def _service_of(listing: Listing, incident_id: str) -> str:
    found = listing.incidents.get(incident_id)
    return found.service if found is not None else ""


def _open(
    incident: Incident, standings: Mapping[str, Standing], notes: dict[str, Event], mask: shift.Masker
) -> shift.OpenIncident:
    standing = standings.get(incident.id)
    first = standing.acknowledged if standing is not None else None
    note = notes.get(incident.id)
    return shift.OpenIncident(
        id=incident.id,
        service=incident.service,
        title=shift.visible(mask, incident.title),
        state=state_of(standing, silenced=bool(incident.silenced_by)),
        acknowledged_by=shift.visible(mask, first.actor) if first is not None else None,
        last_note=None
        if note is None
        else shift.Note(note.time, shift.visible(mask, note.actor), shift.visible(mask, note.text)),
    )


async def _silences(app: DeskApp, incidents: list[Incident], at: datetime, hours: int) -> list[shift.SilenceShown]:
    """Each silence muting an open incident, as its Alertmanager shows it, with its end."""
    mask = app.redactor
    shown: list[shift.SilenceShown] = []
    for incident in incidents:
        if not incident.silenced_by:
            continue
        try:
            muting = await app.silences_of(incident)
        except SilenceError as exc:
            shown += [
                shift.SilenceShown(incident.id, silence_id, None, "", "", False, problem=str(exc))
                for silence_id in incident.silenced_by
            ]
            continue
        for silence in muting:
            shown.append(
                shift.SilenceShown(
                    incident_id=incident.id,
                    silence_id=silence.id,
                    ends=silence.ends_at,
                    created_by=shift.visible(mask, silence.created_by),
                    comment=shift.visible(mask, silence.comment),
                    ends_this_shift=shift.ends_this_shift(silence.ends_at, at, hours),
                )
            )
    return sorted(shown, key=lambda silence: (silence.ends is None, silence.ends or at, silence.incident_id))


async def _changes(
    app: DeskApp, services: list[str], since: datetime, at: datetime
) -> tuple[list[shift.ChangeShown], list[str]]:
    if not app.settings.change_sources:
        return [], []
    mask = app.redactor
    found: list[shift.ChangeShown] = []
    problems: list[str] = []
    for service in services:
        read = await app.change_events(service, "", since, at)
        found += [
            shift.ChangeShown(event.time, event.service, shift.visible(mask, event.summary), event.source)
            for event in read.events
        ]
        problems += [f"changes of {service}: {problem}" for problem in read.problems]
    return found, sorted(set(problems))
