"""An incident's timeline: its log as lines per minute by level, with its markers, the service's metrics and
changes and the desk's acts, as the model ``Timeline`` and as text.

What ``show_incident_timeline`` answers (``features/timeline.py``) and what ``incident-desk timeline`` prints; no
MCP here, so the command line builds a timeline without loading the SDK.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from functools import partial
from importlib import resources
from typing import Annotated

from pydantic import BaseModel, Field

from incident_desk import what_changed
from incident_desk.app import DeskApp
from incident_desk.core.incidents import DataError, Incident, UnknownIncident
from incident_desk.core.journal.activity import MAX_ACTIVITY_EVENTS, Event
from incident_desk.core.journal.audit import MAX_RECENT_DECISIONS, Decision
from incident_desk.core.neighbours import metrics
from incident_desk.core.timeline import levels as timeline
from incident_desk.core.timeline.cache import TimelineCache
from incident_desk.protocol.tool_schemas import written_out

# What a timeline counts when the incident's log cannot be read: nothing.
_NO_LOG = timeline.LevelScan([], None, 0, 0, 0, 0, "end of log")


class TimelineMinute(BaseModel):
    start: datetime
    error: int
    warn: int
    info: int
    debug: int


class FirstError(BaseModel):
    line: int
    time: datetime | None
    text: str = Field(description="The line as shown (redacted, cut)")


class RestartDecision(BaseModel):
    time: datetime
    outcome: str
    ticket: str | None
    approver: str


# Nested schemas written out rather than referenced: see tool_schemas.written_out.
WrittenOutMinute = Annotated[TimelineMinute, written_out(TimelineMinute)]
WrittenOutFirstError = Annotated[FirstError, written_out(FirstError)]
WrittenOutDecision = Annotated[RestartDecision, written_out(RestartDecision)]


class Timeline(BaseModel):
    incident_id: str
    service: str
    title: str
    opened: datetime
    minutes: list[WrittenOutMinute] = Field(description="Lines per minute by level, oldest first, quiet minutes as 0")
    first_error: WrittenOutFirstError | None
    decisions: list[WrittenOutDecision] = Field(description="Restart decisions for the service, oldest first")
    scanned_bytes: int
    total_bytes: int
    scanned_lines: int
    unparsed_lines: int = Field(description="Lines read that had no time and level")
    stopped: str = Field(description="Why the pass stopped: end of log, time budget, byte budget, minute limit")
    covers: str = Field(description="What span of the log the series covers, in words")
    metrics: list[what_changed.WrittenOutSeries] = Field(
        default_factory=list, description="The service's metric series over the timeline's span"
    )
    changes: list[what_changed.WrittenOutChange] = Field(
        default_factory=list, description="Change events of the service in the span, oldest first"
    )
    acts: list[what_changed.WrittenOutAct] = Field(
        default_factory=list,
        description="What the desk did: the service's restart decisions, and the incident's acknowledgements, "
        "notes, silences and resolution that took effect, oldest first",
    )
    problems: list[str] = Field(default_factory=list, description="Metrics or change sources that could not be read")


def view_html() -> str:
    """The built view (one self-contained HTML file, package data: no Node needed at run time)."""
    return (resources.files("incident_desk") / "data" / "timeline.html").read_text(encoding="utf-8")


def _hhmm(moment: datetime) -> str:
    return moment.strftime("%H:%M")


def human_size(size: int) -> str:
    """A byte count as people read it: ``469 bytes``, ``44.0 MB``, ``1.07 GB`` (decimal units, as disks say)."""
    if size < 1000:
        return f"{size} bytes"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            value = size / scale
            return f"{value:.2f} {unit}" if unit == "GB" and value < 10 else f"{value:.1f} {unit}"
    return f"{size} bytes"  # unreachable: the last scale is 1e3


def _covers(scan: timeline.LevelScan, minutes: list[timeline.Minute]) -> str:
    span = f"{_hhmm(minutes[0].start)}–{_hhmm(minutes[-1].start)} UTC" if minutes else "no timed lines"
    lines = f"{scan.scanned_lines:,} lines"
    if scan.stopped == "end of log":
        return f"the whole log ({human_size(scan.total_bytes)}, {lines}): {span}"
    return (
        f"the first {human_size(scan.scanned_bytes)} of {human_size(scan.total_bytes)} ({lines}, stopped at the "
        f"{scan.stopped}): {span}"
    )


def _build(
    incident: Incident, scan: timeline.LevelScan, decisions: list[Decision], events: list[Event] | None = None
) -> Timeline:
    minutes = timeline.filled_series(scan.minutes)
    first = scan.first_error
    return Timeline(
        incident_id=incident.id,
        service=incident.service,
        title=incident.title,
        opened=incident.opened,
        minutes=[
            TimelineMinute(start=m.start, error=m.error, warn=m.warn, info=m.info, debug=m.debug) for m in minutes
        ],
        first_error=FirstError(line=first.line, time=first.time, text=first.text) if first else None,
        decisions=[
            RestartDecision(time=d.time, outcome=d.outcome, ticket=d.ticket, approver=d.approver) for d in decisions
        ],
        acts=sorted(
            what_changed.restart_acts(decisions) + what_changed.activity_acts(events or []), key=lambda a: a.time
        ),
        scanned_bytes=scan.scanned_bytes,
        total_bytes=scan.total_bytes,
        scanned_lines=scan.scanned_lines,
        unparsed_lines=scan.unparsed_lines,
        stopped=scan.stopped,
        covers=_covers(scan, minutes),
    )


def render_text(view: Timeline) -> str:
    """The compact timeline a model or a text-only client reads: a few lines, with sparklines."""
    totals = [m.error + m.warn + m.info + m.debug for m in view.minutes]
    errors = [m.error for m in view.minutes]
    lines = [
        f"{view.incident_id} {view.service}: {view.title}",
        f"opened {view.opened.isoformat()}; covers {view.covers}",
    ]
    if view.minutes:
        lines.append(f"lines/min {timeline.sparkline(totals)} (peak {max(totals)})")
        lines.append(f"errors    {timeline.sparkline(errors)} ({sum(errors)} in all)")
    if view.first_error is not None:
        at = _hhmm(view.first_error.time) if view.first_error.time else "?"
        lines.append(f"first error {at} (line {view.first_error.line}): {view.first_error.text}")
    else:
        lines.append("no error line in the span covered")
    lines += _what_changed_lines(view)
    if view.decisions:
        lines.append(
            "restarts: "
            + "; ".join(
                f"{d.time.strftime('%Y-%m-%d %H:%M')} {d.outcome}" + (f" {d.ticket}" if d.ticket else "")
                for d in view.decisions
            )
        )
    else:
        lines.append(f"restarts: none journaled for {view.service}")
    incident_acts = [a for a in view.acts if a.kind != "restart"]  # restarts have their own line above
    if incident_acts:
        lines.append("acts: " + "; ".join(f"{a.time.strftime('%Y-%m-%d %H:%M')} {a.summary}" for a in incident_acts))
    return "\n".join(lines)


def _what_changed_lines(view: Timeline) -> list[str]:
    lines = [f"metric {line}" for line in what_changed.series_lines(view.metrics)]
    if view.changes:
        lines.append(
            "changes: "
            + "; ".join(f"{c.time.strftime('%Y-%m-%d %H:%M')} {c.summary} ({c.source})" for c in view.changes)
        )
    lines += [f"unavailable: {problem}" for problem in view.problems]
    return lines


async def _around(app: DeskApp, incident: Incident, view: Timeline) -> Timeline:
    """``view`` with the service's metrics and change events over its span, each failure kept as a problem."""
    first = view.minutes[0].start if view.minutes else None
    last = view.minutes[-1].start if view.minutes else None
    start, end = what_changed.window_around(incident, first, last)
    problems: list[str] = []
    series: list[what_changed.MetricSeries] = []
    if incident.service in app.settings.service_metrics:
        try:
            found = await what_changed.gather_metrics(
                app,
                incident,
                now=min(end, datetime.now(UTC)),
                minutes_before=(incident.opened - start).total_seconds() / 60,
                minutes_after=max(1.0, (end - incident.opened).total_seconds() / 60),
            )
            series, problems = found.series, found.problems
        except metrics.MetricsUnavailable as exc:
            problems.append(str(exc))
    changes: list[what_changed.ChangeEventOut] = []
    if app.settings.change_sources:
        read = await app.change_events(incident.service, incident.id, start, end)
        changes = [what_changed.ChangeEventOut(time=c.time, summary=c.summary, source=c.source) for c in read.events]
        problems += read.problems
    return view.model_copy(update={"metrics": series, "changes": changes, "problems": problems})


async def gather(app: DeskApp, incident_id: str) -> Timeline:
    """The incident's timeline; DataError (UnknownIncident) when there is nothing to draw."""
    incident = await app.incident(incident_id)
    cancelled = threading.Event()
    # Beside the journal: the desk's own state. A log that has only grown is then counted from where it ended.
    summaries = TimelineCache(app.settings.audit_path.parent / "timeline-cache")
    reader = partial(
        summaries.scan,
        anchor=incident.opened,
        time_budget=app.settings.search_time_budget_seconds,
        redactor=app.redactor,
        cancelled=cancelled,
        processes=app.settings.timeline_processes,
    )
    log_problem: str | None = None
    try:
        scan = await app.scan_log(incident_id, reader)
    except UnknownIncident:
        raise
    except DataError as exc:
        if incident.service not in app.settings.service_metrics and not app.settings.change_sources:
            raise  # nothing else to draw: the log's failure is the answer
        # The log is one part: marked unavailable, and the metrics, changes and acts still answer.
        scan, log_problem = _NO_LOG, str(exc)
    finally:
        cancelled.set()
    decisions = await app.recent_decisions(MAX_RECENT_DECISIONS)
    events = await app.activity(incident_id, MAX_ACTIVITY_EVENTS)
    view = _build(incident, scan, timeline.service_decisions(decisions, incident.service), events)
    view = await _around(app, incident, view)
    if log_problem is not None:
        update = {"covers": "no log lines (the log is unavailable)", "problems": [log_problem, *view.problems]}
        view = view.model_copy(update=update)
    return view
