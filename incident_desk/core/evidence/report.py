"""An investigation as text within a token budget: the best findings first, the lowest-ranked dropped to fit, and
how many were dropped said at the end. The structured answer keeps exactly the findings the text shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from incident_desk.core.evidence.findings import Finding

BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class Report:
    text: str
    findings: list[Finding]
    dropped: int


def _line(rank: int, finding: Finding, hidden: frozenset[str]) -> str:
    where = "; ".join(f"{key} {value}" for key, value in finding.provenance.items() if key not in hidden)
    return f"{rank}. [{finding.kind} {finding.score:.2f}] {finding.summary} ({where})"


def ranked(findings: Sequence[Finding]) -> list[Finding]:
    """Best first; within a score, in the order given (log patterns as ranked, changes nearest first)."""
    return sorted(findings, key=lambda f: -f.score)


def _dropped_line(dropped: int) -> str:
    return f"({dropped} lower-ranked finding{'s' if dropped != 1 else ''} dropped to fit the budget)"


def report(
    head: Sequence[str], findings: Sequence[Finding], budget_tokens: int, hidden: frozenset[str] = frozenset()
) -> Report:
    """The text (``head`` lines, then one line per finding) in at most ``budget_tokens * 4`` bytes; provenance
    keys in ``hidden`` are left out of the text (a cursor means nothing to a model that cannot page)."""
    limit = budget_tokens * BYTES_PER_TOKEN
    order = ranked(findings)
    lines = [*head]
    kept: list[Finding] = []
    for finding in order:
        line = _line(len(kept) + 1, finding, hidden)
        dropped_after = len(order) - len(kept) - 1
        room = "\n".join([*lines, line] + ([_dropped_line(dropped_after)] if dropped_after else []))
        if len(room.encode()) > limit:
            break
        lines.append(line)
        kept.append(finding)
    dropped = len(order) - len(kept)
    if dropped:
        lines.append(_dropped_line(dropped))
    if not order:
        lines.append("No finding: nothing new, rising or changed was found in what was read.")
    text = "\n".join(lines)  # cut only when the head alone is over the budget
    return Report(text.encode()[:limit].decode("utf-8", errors="ignore"), kept, dropped)
