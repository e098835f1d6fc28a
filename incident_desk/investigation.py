"""An incident investigated without a model: the log's templates, metric steps, changes before the opening, past
incidents like it and runbook sections, each a ranked finding with its provenance (``core.evidence``).

Shared by ``investigate_incident``, ``summarize_incident`` (the provider and raw-log steps), the ``postmortem``
prompt and ``incident-desk investigate``. Every read goes through the async face of :class:`DeskApp` (the log
pass in a worker thread with its helpers, neighbours with their deadlines), so nothing here blocks the event loop.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import BinaryIO

from incident_desk import what_changed
from incident_desk.app import DeskApp
from incident_desk.core.errors import IncidentDeskError
from incident_desk.core.evidence import findings as evidence
from incident_desk.core.evidence.cache import TemplateCache
from incident_desk.core.evidence.report import Report, ranked, report
from incident_desk.core.evidence.scan import TemplateScan
from incident_desk.core.evidence.steps import find_step
from incident_desk.core.evidence.tally import Boundary
from incident_desk.core.incidents import DataError, Incident, RunbookMissing, UnknownIncident
from incident_desk.core.neighbours import metrics
from incident_desk.core.search.paging import Cursor

DEFAULT_BUDGET_TOKENS = 1500
# The baseline is every line timed before this long before the opening: what the service wrote when it was well.
BASELINE_ENDS_BEFORE_OPENING = timedelta(minutes=10)
CHANGES_BEFORE_OPENING = timedelta(hours=6)
METRIC_MINUTES_BEFORE, METRIC_MINUTES_AFTER = 60.0, 30.0
SIMILAR_LIMIT = 3
TOP_FINDINGS_FOR_PROMPTS = 5  # findings handed to a model with the log window (summary, postmortem)
_SUMMARY_BUDGET_TOKENS = 400


@dataclass
class Investigation:
    incident: Incident
    covers: str
    findings: list[evidence.Finding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def report(self, budget_tokens: int = DEFAULT_BUDGET_TOKENS, hidden: frozenset[str] = frozenset()) -> Report:
        incident = self.incident
        head = [f"{incident.id} {incident.service}: {incident.title}", f"evidence from {self.covers}"]
        head += [f"unavailable: {problem}" for problem in self.problems]
        return report(head, self.findings, budget_tokens, hidden)


def _size(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def covers(scan: TemplateScan, baseline_end: datetime) -> str:
    """What the pass read and what it took as the baseline, in words."""
    lines = f"{scan.tally.lines:,} lines"
    read = (
        f"the whole log ({_size(scan.total_bytes)}, {lines})"
        if scan.stopped == "end of log"
        else f"the first {_size(scan.scanned_bytes)} of {_size(scan.total_bytes)} ({lines}, stopped at the "
        f"{scan.stopped}; call again to read on)"
    )
    baseline = scan.tally.baseline_lines
    if not baseline:
        return f"{read}; no baseline (no line before {baseline_end.strftime('%H:%M')}Z), so no template is new"
    return f"{read}; baseline: {baseline:,} lines before {baseline_end.strftime('%H:%M')}Z"


def _log_pass(
    app: DeskApp, incident: Incident, boundary: Boundary, cancelled: threading.Event, handle: BinaryIO
) -> tuple[TemplateScan, list[evidence.Finding]]:
    """The template pass and its findings, in one worker thread (samples are read from the same handle)."""
    cache = TemplateCache(app.settings.audit_path.parent / "template-cache")
    scan = cache.scan_templates(
        handle,
        boundary,
        time_budget=app.settings.search_time_budget_seconds,
        cancelled=cancelled,
        processes=app.settings.timeline_processes,
    )

    def cursor(line: int, offset: int) -> str:
        return app.cursors.encode(incident.id, Cursor(line, offset))

    return scan, evidence.pattern_findings(handle, scan, boundary.anchor, app.redactor, cursor)


async def _metric_findings(app: DeskApp, incident: Incident, problems: list[str]) -> list[evidence.Finding]:
    if incident.service not in app.settings.service_metrics:
        return []
    try:
        gathered = await what_changed.gather_metrics(
            app,
            incident,
            now=min(datetime.now(UTC), incident.opened + timedelta(minutes=METRIC_MINUTES_AFTER)),
            minutes_before=METRIC_MINUTES_BEFORE,
            minutes_after=METRIC_MINUTES_AFTER,
        )
    except metrics.MetricsUnavailable as exc:
        problems.append(str(exc))
        return []
    problems += gathered.problems
    window = gathered.window
    found = []
    for series in gathered.series:
        step = find_step([(point.time, point.value) for point in series.points])
        if step is not None and window is not None:
            labels = what_changed.labels_text(series.labels)
            found.append(evidence.metric_finding(series.name, series.query, labels, step, window.start, window.end))
    return found


async def _change_findings(app: DeskApp, incident: Incident, problems: list[str]) -> list[evidence.Finding]:
    if not app.settings.change_sources:
        return []
    start = incident.opened - CHANGES_BEFORE_OPENING
    read = await app.change_events(incident.service, incident.id, start, incident.opened)
    problems += read.problems
    return evidence.change_findings([(e.time, e.summary, e.source) for e in read.events], incident.opened)


async def _similar_findings(
    app: DeskApp, incident: Incident, patterns: list[str], problems: list[str]
) -> list[evidence.Finding]:
    if app.memory is None:
        return []
    words = " ".join([incident.title, incident.service, *(p.replace("<*>", " ") for p in patterns)])
    try:
        found = await app.similar_incidents(words, incident.id, SIMILAR_LIMIT)
    except IncidentDeskError as exc:
        problems.append(f"incident memory: {exc}")
        return []
    best = max((item.score for item in found), default=0.0)
    return [
        evidence.similar_finding(
            item.incident.incident_id, item.incident.title, item.incident.resolution, item.score, best
        )
        for item in found
    ]


async def _runbook_findings(app: DeskApp, incident: Incident, patterns: list[str]) -> list[evidence.Finding]:
    try:
        markdown = await app.runbook(incident.service)
    except RunbookMissing:
        return []
    except DataError:
        return []
    return evidence.runbook_findings(incident.service, markdown, patterns)


async def investigate(app: DeskApp, incident_id: str) -> Investigation:
    """The incident's findings, best first (UnknownIncident; a log that cannot be read is a problem, not a
    failure: the other findings still answer)."""
    incident = await app.incident(incident_id)
    baseline_end = incident.opened - BASELINE_ENDS_BEFORE_OPENING
    boundary = Boundary(baseline_end.timestamp(), incident.opened)
    problems: list[str] = []
    cancelled = threading.Event()
    try:
        scan, patterns = await app.scan_log(incident_id, partial(_log_pass, app, incident, boundary, cancelled))
        covered = covers(scan, baseline_end)
    except UnknownIncident:
        raise
    except DataError as exc:
        patterns, covered = [], "no log lines (the log is unavailable)"
        problems.append(str(exc))
    finally:
        cancelled.set()
    found = list(patterns)
    found += await _metric_findings(app, incident, problems)
    found += await _change_findings(app, incident, problems)
    top = [f.detail["pattern"] for f in patterns[:3]]
    found += await _similar_findings(app, incident, top, problems)
    found += await _runbook_findings(app, incident, top)
    return Investigation(incident, covered, found, problems)


def findings_text(investigation: Investigation) -> str:
    """The best findings as a few lines for a model beside the log window (a summary, a postmortem), without
    cursors and without past incidents (the same text every time for the same log and neighbours; the prompts
    ask for an account of this incident's log)."""
    about_this_incident = [f for f in investigation.findings if f.kind != evidence.SIMILAR_INCIDENT]
    top = Investigation(
        investigation.incident, investigation.covers, ranked(about_this_incident)[:TOP_FINDINGS_FOR_PROMPTS]
    )
    return top.report(_SUMMARY_BUDGET_TOKENS, frozenset({"cursor"})).text


def after_log(log: str, findings: str) -> str:
    """``log`` as it is, then ``findings`` after one blank line (nothing when there are none)."""
    if not findings:
        return log
    return log + ("\n" if log.endswith("\n") else "\n\n") + findings


FINDINGS_HEADING = "Findings of investigate_incident (ranked, no model):"


async def findings_for_prompt(app: DeskApp, incident_id: str) -> str:
    """``FINDINGS_HEADING`` and ``findings_text`` of the incident, or empty when it cannot be investigated (the
    log's own failure is the caller's to report)."""
    try:
        return f"{FINDINGS_HEADING}\n{findings_text(await investigate(app, incident_id))}"
    except IncidentDeskError:
        return ""
