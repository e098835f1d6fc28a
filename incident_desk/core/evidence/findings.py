"""Findings: each piece of evidence as one ranked line with its provenance (where a person can check it).

Scores share one scale (0 to 1) so findings of every kind rank together: a new error template scores highest,
then a change just before the opening, a metric step, a rising or new warning, a past incident like this one, the
errors that were always there, and runbook sections.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO

from incident_desk.core.evidence.drain import Template, templates
from incident_desk.core.evidence.masking import MASK_BYTE, mask_lines
from incident_desk.core.evidence.scan import TemplateScan
from incident_desk.core.evidence.steps import Step
from incident_desk.core.evidence.tally import line_time

LOG_PATTERN, METRIC_CHANGE, CHANGE, SIMILAR_INCIDENT, RUNBOOK = (
    "log_pattern",
    "metric_change",
    "change",
    "similar_incident",
    "runbook",
)
MAX_PATTERNS = 12
MAX_SAMPLE_CHARS = 240
_SAMPLE_READ = 4096
_SEVERITY = {"error": 1.0, "warn": 0.7, "other": 0.3}


@dataclass(frozen=True)
class Finding:
    kind: str
    score: float
    summary: str
    provenance: dict[str, Any]
    detail: dict[str, Any] = field(default_factory=dict)  # a log pattern's fields: pattern, count, lines, new, sample


def _rise(template: Template, baseline_lines: int, recent_lines: int) -> float:
    """How much more often the template is seen after the baseline than in it (its share of lines, as a ratio)."""
    after = (template.recent + 0.5) / (recent_lines + 1)
    before = (template.baseline + 0.5) / (baseline_lines + 1)
    return after / before


def pattern_score(template: Template, baseline_lines: int, recent_lines: int) -> tuple[float, bool]:
    """The template's score and whether it is new (absent from a baseline that has lines, present after it)."""
    new = baseline_lines > 0 and template.baseline == 0 and template.recent > 0
    if new:
        novelty = 1.0
    elif baseline_lines and recent_lines and template.recent:
        novelty = min(1.0, max(0.0, math.log2(_rise(template, baseline_lines, recent_lines)) / 4))
    else:
        novelty = 0.0
    score = _SEVERITY[template.level] * (0.5 + 0.5 * novelty)
    if not template.recent:
        score *= 0.5  # gone since the baseline: worth a line, below what is happening now
    return round(score, 3), new


def _sample(
    handle: BinaryIO, offset: int, anchor: datetime, redactor: Callable[[str], str]
) -> tuple[str, str | None, bool]:
    """The template's first line, redacted then masked, its time (ISO, UTC), and whether it held a secret."""
    handle.seek(offset)
    line = handle.read(_SAMPLE_READ).split(b"\n", 1)[0]
    at = line_time(line, anchor)
    text = line.decode("utf-8", errors="replace")
    shown = redactor(text)
    masked = mask_lines(shown.encode() + b"\n")[:-1].replace(MASK_BYTE, b"<*>").decode("utf-8", errors="replace")
    when = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z") if at is not None else None
    return masked[:MAX_SAMPLE_CHARS], when, shown != text


def pattern_findings(
    handle: BinaryIO,
    scan: TemplateScan,
    anchor: datetime,
    redactor: Callable[[str], str],
    cursor: Callable[[int, int], str],
) -> list[Finding]:
    """The pass's templates as findings, best first (at most ``MAX_PATTERNS``); ``cursor(line, offset)`` is the
    ``read_incident_log`` cursor of a template's first line."""
    tally = scan.tally
    baseline_lines = tally.baseline_lines
    recent_lines = tally.lines - baseline_lines - scan.skipped_lines
    ranked = []
    for template in templates(tally.table.items()):
        score, new = pattern_score(template, baseline_lines, recent_lines)
        ranked.append((score, template.recent, -template.first_line, template, new))
    ranked.sort(key=lambda item: item[:3], reverse=True)
    found: list[Finding] = []
    for score, _recent, _first, template, new in ranked[:MAX_PATTERNS]:
        sample, when, held_secret = _sample(handle, template.first_offset, anchor, redactor)
        # A secret without a digit in it is not masked, and one the template's tokens split apart (a key body
        # cut at '+' and '/') no longer looks like one: a template of a line that held a secret is its sample.
        pattern = sample if held_secret else redactor(template.text)
        first, last = template.first_line + 1, template.last_line + 1
        trend = "new" if new else f"{template.baseline} in baseline, {template.recent} after" if baseline_lines else ""
        kind = template.level if template.level != "other" else "line"
        summary = f"{kind} x{template.count}" + (f" ({trend})" if trend else "") + f": {pattern[:160]}"
        found.append(
            Finding(
                LOG_PATTERN,
                score,
                summary,
                {"lines": f"{first}-{last}", "cursor": cursor(first, template.first_offset)},
                {
                    "pattern": pattern,
                    "count": template.count,
                    "first_line": first,
                    "last_line": last,
                    "first_time": when,
                    "new": new,
                    "sample": sample,
                },
            )
        )
    return found


def _number(value: float) -> str:
    return f"{value:.4g}"


def metric_finding(name: str, query: str, labels: str, step: Step, start: datetime, end: datetime) -> Finding:
    direction = "rose" if step.after > step.before else "fell"
    summary = (
        f"{name}{labels} {direction} from {_number(step.before)} to {_number(step.after)} at "
        f"{step.at.strftime('%H:%M')}Z"
    )
    return Finding(
        METRIC_CHANGE,
        round(0.5 + 0.35 * step.relative, 3),
        summary,
        {"query": query, "start": _iso(start), "end": _iso(end), "step_at": _iso(step.at)},
        {"before": step.before, "after": step.after},
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def change_findings(events: Sequence[tuple[datetime, str, str]], opened: datetime) -> list[Finding]:
    """Change events (time, summary, source) before the opening, nearest first; nearer scores higher."""
    before = sorted((e for e in events if e[0] <= opened), key=lambda e: opened - e[0])
    found = []
    for at, summary, source in before:
        minutes = (opened - at).total_seconds() / 60
        found.append(
            Finding(
                CHANGE,
                round(0.4 + 0.5 * math.exp(-minutes / 60), 3),
                f"{minutes:.0f} min before opening: {summary}",
                {"source": source, "time": _iso(at), "record": summary},
            )
        )
    return found


def similar_finding(incident_id: str, title: str, resolution: str, score: float, best: float) -> Finding:
    fixed = f"fixed: {resolution}" if resolution else "no resolution recorded"
    return Finding(
        SIMILAR_INCIDENT,
        round(0.1 + 0.45 * (score / best if best > 0 else 0.0), 3),
        f"{incident_id} {title} -- {fixed}",
        {"incident_id": incident_id, "memory": "find_similar_incidents"},
    )


def _words(text: str) -> set[str]:
    """Lower-case words of four letters or more (masks and punctuation dropped)."""
    cleaned = "".join(char.lower() if char.isalnum() else " " for char in text)
    return {word for word in cleaned.split() if len(word) >= 4 and word.isalpha()}


_COMMON = frozenset({"error", "warn", "warning", "info", "debug", "with", "from", "that", "this", "after"})


def runbook_findings(service: str, markdown: str, patterns: Sequence[str]) -> list[Finding]:
    """The runbook's sections (by heading) sharing words with ``patterns``, most words first (at most three)."""
    wanted = set().union(*(_words(p) for p in patterns)) - _COMMON - _words(service) if patterns else set()
    if not wanted:
        return []
    sections: list[tuple[int, str, list[str]]] = []
    for number, line in enumerate(markdown.splitlines(), start=1):
        if line.startswith("#"):
            sections.append((number, line.lstrip("#").strip(), []))
        elif sections:
            sections[-1][2].append(line)
    scored = []
    for number, heading, body in sections:
        shared = wanted & _words(heading + " " + " ".join(body))
        if shared:
            scored.append((len(shared), number, heading, shared))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [
        Finding(
            RUNBOOK,
            round(min(0.45, 0.15 + 0.05 * count), 3),
            f"runbook section '{heading}' (matches: {', '.join(sorted(shared)[:5])})",
            {"runbook": f"runbook://{service}", "line": number, "section": heading},
        )
        for count, number, heading, shared in scored[:3]
    ]
