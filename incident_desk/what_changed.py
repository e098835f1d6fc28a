"""What changed around an incident, as both ``query_incident_metrics`` and the timeline show it: metric series from
the service's Prometheus, change events from the change sources, and the desk's own acts.

Shared by the metrics and timeline features (which never import each other); the reads go through the async face
of :class:`DeskApp`, so nothing here blocks the event loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import BaseModel, Field

from incident_desk.app import DeskApp
from incident_desk.core.incidents import Incident
from incident_desk.core.journal.activity import Event
from incident_desk.core.journal.audit import Decision
from incident_desk.core.neighbours import metrics
from incident_desk.core.neighbours.untrusted import masked_line
from incident_desk.protocol import tool_results as results

DEFAULT_MINUTES_BEFORE = 30.0
# Without minutes_after the window runs to now, but never more than this past the incident's opening.
MAX_MINUTES_AFTER = 7 * 24 * 60.0


class MetricPoint(BaseModel):
    time: datetime
    value: float


WrittenOutPoint = Annotated[MetricPoint, results.written_out(MetricPoint)]


class MetricSeries(BaseModel):
    name: str = Field(description="The query's name in [services.<name>.metrics], or 'alert' for the alert's own")
    query: str
    labels: dict[str, str]
    points: list[WrittenOutPoint] = Field(description="Oldest first; at most metrics_max_points (the newest kept)")
    total_points: int = Field(description="How many points Prometheus answered for the window")
    cut: bool = Field(description="True when older points were left out to stay within the cap")
    min: float | None
    max: float | None
    last: float | None
    sparkline: str


class ChangeEventOut(BaseModel):
    time: datetime
    summary: str
    source: str = Field(description="The [[change_sources]] entry it came from")


class ActRecord(BaseModel):
    """Something the desk did (a restart decision today; more kinds of act can join)."""

    time: datetime
    kind: str = Field(description="restart, acknowledge, note, silence, unsilence, resolve or postmortem")
    summary: str


# A note's text as the timeline shows it beside the act: the activity log has it whole.
ACT_TEXT_CHARS = 80

WrittenOutSeries = Annotated[MetricSeries, results.written_out(MetricSeries)]
WrittenOutChange = Annotated[ChangeEventOut, results.written_out(ChangeEventOut)]
WrittenOutAct = Annotated[ActRecord, results.written_out(ActRecord)]


@dataclass(frozen=True)
class Gathered:
    series: list[MetricSeries]
    problems: list[str]
    notes: list[str]
    window: metrics.Window | None


def metric_series_out(series: metrics.Series) -> MetricSeries:
    finite = [p for p in series.points if math.isfinite(p.value)]
    values = [p.value for p in finite]
    return MetricSeries(
        name=series.name,
        query=series.query,
        labels=series.labels,
        points=[MetricPoint(time=p.time, value=p.value) for p in finite],
        total_points=series.total_points,
        cut=series.cut,
        min=min(values) if values else None,
        max=max(values) if values else None,
        last=values[-1] if values else None,
        sparkline=metrics.sparkline(values),
    )


def labels_text(labels: dict[str, str]) -> str:
    shown = {k: v for k, v in labels.items() if k != "__name__"}
    return "{" + ", ".join(f'{k}="{v}"' for k, v in shown.items()) + "}" if shown else ""


def series_lines(series: Sequence[MetricSeries]) -> list[str]:
    """Each series as one line with its sparkline and min/max/last, and a line of note when it was cut."""
    lines: list[str] = []
    for s in series:
        if s.last is None or s.min is None or s.max is None:
            lines.append(f"{s.name} {labels_text(s.labels)}: no values in the window".replace("  ", " "))
            continue
        head = f"{s.name} {labels_text(s.labels)}".rstrip()
        lines.append(
            f"{head}: {s.sparkline} min {metrics.number(s.min)} max {metrics.number(s.max)} "
            f"last {metrics.number(s.last)} ({len(s.points)} points)"
        )
        if s.cut:
            lines.append(
                f"  cut: showing the newest {len(s.points)} of {s.total_points} points (metrics_max_points = "
                f"{len(s.points)}); narrow minutes_before/minutes_after for the rest"
            )
    return lines


async def gather_metrics(
    app: DeskApp,
    incident: Incident,
    *,
    now: datetime,
    name: str | None = None,
    minutes_before: float = DEFAULT_MINUTES_BEFORE,
    minutes_after: float | None = None,
) -> Gathered:
    """The incident's metric series; MetricsUnavailable when none can be asked or Prometheus does not answer."""
    service = incident.service
    config = app.settings.service_metrics.get(service)
    # An alert's g0.expr is written by whoever raised the alert: asked only when the operator turned it on.
    alert_expression = incident.expression if app.settings.alert_expression_queries else None
    queries = dict(metrics.queries_for(config, alert_expression))
    notes: list[str] = []
    if config is None:
        raise metrics.MetricsUnavailable(
            f"{service} has no metrics: add [services.{service}.metrics] with a prometheus URL and named queries"
            + (" (the alert's own expression is asked of that Prometheus too)" if alert_expression else "")
        )
    from_alert = (
        metrics.ALERT_QUERY_NAME if alert_expression and metrics.ALERT_QUERY_NAME not in config.queries else None
    )
    if incident.expression and not alert_expression:
        notes.append(
            "the alert carries its own expression (its generator URL's g0.expr), which the desk does not ask: "
            "whoever raises an alert writes it (alert_expression_queries = true asks it, capped)"
        )
    if name is not None:
        if name not in queries:
            known = ", ".join(sorted(queries)) or "none"
            raise metrics.MetricsUnavailable(f"{service} has no query named {name!r} (its queries: {known})")
        queries = {name: queries[name]}
    if not queries:
        raise metrics.MetricsUnavailable(f"[services.{service}.metrics] names no queries")
    after = minutes_after
    if after is None:
        # To now, but no further than fits the point cap, so an old incident's window still holds its opening.
        fits = (app.settings.metrics_max_points - 1) * config.step_seconds / 60 - minutes_before
        after = min(MAX_MINUTES_AFTER, max(1.0, fits))
        if incident.opened + timedelta(minutes=after) < now:
            notes.append(
                f"the window ends {after:g} minutes after the incident opened, so each series fits "
                "metrics_max_points; pass minutes_after for a later end"
            )
    window = metrics.incident_window(incident.opened, now, minutes_before, after, config.step_seconds)
    if window.step_seconds > config.step_seconds:
        notes.append(f"step widened to {window.step_seconds:g}s to keep the window within Prometheus's limits")
    if from_alert in queries:
        caps = metrics.caps_for(config, app.settings.metrics_max_points, from_alert=True)
        notes.append(
            f'"{from_alert}" came from the alert: its own expression (its generator URL\'s g0.expr), not a query of '
            f"this desk, asked of {service}'s Prometheus and held to {caps.series} series of {caps.points} points"
        )
    found, problems = await app.metric_series(service, queries, window, from_alert=from_alert)
    return Gathered([metric_series_out(s) for s in found], [f"{p.name}: {p.reason}" for p in problems], notes, window)


def restart_acts(decisions: Sequence[Decision]) -> list[ActRecord]:
    """The journal's restart decisions as acts of the desk, oldest first."""
    return [
        ActRecord(
            time=d.time,
            kind="restart",
            summary=f"restart {d.outcome}" + (f" {d.ticket}" if d.ticket else "") + f" by {d.approver}",
        )
        for d in sorted(decisions, key=lambda d: d.time)
    ]


def activity_acts(events: Sequence[Event]) -> list[ActRecord]:
    """An incident's acts that took effect (acknowledge, note, silence, unsilence, resolve), oldest first; the kind
    is the act, so the view styles each kind its own way."""
    return [
        ActRecord(
            time=e.time,
            kind=str(e.act),
            summary=f"{e.act} by {e.actor}"
            + (f" {e.ticket}" if e.ticket else "")
            + (f": {masked_line(e.text, ACT_TEXT_CHARS)}" if e.text else ""),
        )
        for e in sorted(events, key=lambda e: e.time)
        if e.took_effect
    ]


def window_around(incident: Incident, first: datetime | None, last: datetime | None) -> tuple[datetime, datetime]:
    """The timeline's span: the log's timed minutes and the incident's opening, with a little room either side."""
    start = min(first or incident.opened, incident.opened - timedelta(minutes=DEFAULT_MINUTES_BEFORE))
    end = max(last or incident.opened, incident.opened) + timedelta(minutes=DEFAULT_MINUTES_BEFORE)
    return start, min(end, start + timedelta(days=1))
