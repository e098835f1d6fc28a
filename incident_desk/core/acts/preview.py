"""What an act will touch, worked out before anyone is asked, shown in the question and bound to the approval.

A person approves an effect, not a sentence: the preview names the command a restart runs, every alert a
silence will cover, every silence an unsilence will expire with who made it. Its digest goes into the approval's
binding, and the act works the preview out again before it runs: if the targets differ, it does not run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from incident_desk.core.incidents import Incident
from incident_desk.core.neighbours.untrusted import masked_line, one_line
from incident_desk.core.outcomes import FOREIGN_SILENCE

MAX_REASON_CHARS = 500  # a model's own words for why it asks: untrusted, masked, cut
MAX_NAMED_TARGETS = 10  # the alerts named in a preview; the count is always whole


@dataclass(frozen=True)
class Preview:
    """The lines shown to the approver, and the targets they were worked out from (what the digest binds)."""

    lines: tuple[str, ...]
    targets: tuple[str, ...]

    @property
    def digest(self) -> str:
        """A short stable name of the targets: equal exactly when the act would touch the same things."""
        encoded = json.dumps(list(self.targets), separators=(",", ":")).encode()
        return hashlib.sha256(encoded).hexdigest()[:32]


def question(first_line: str, preview: Preview, reason: str | None) -> str:
    """The form's message and the page's text: the act's own sentence, then what it will touch, then why."""
    lines = [first_line, *preview.lines]
    if reason:
        lines.append(f"Requested because: {reason}")
    return "\n".join(lines)


def shown_reason(reason: str | None, mask: Callable[[str], str]) -> str | None:
    """A requester's reason as the approver sees it: secrets masked (``mask``: the desk's redactor), one line."""
    if reason is None or not reason.strip():
        return None
    return one_line(mask(reason), MAX_REASON_CHARS)


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def alert_names(incidents: Sequence[Incident]) -> str:
    """``{n} alert(s): a, b, … (and k more)``: each by its alertname and id, the first ten named."""
    named = [f"{dict(incident.labels).get('alertname', incident.title)} ({incident.id})" for incident in incidents]
    shown = ", ".join(masked_line(name, 120) for name in named[:MAX_NAMED_TARGETS])
    more = f" (and {len(named) - MAX_NAMED_TARGETS} more)" if len(named) > MAX_NAMED_TARGETS else ""
    return f"{len(named)} alert(s): {shown or 'none'}{more}"


def restart_preview(argv: Sequence[str] | None, lock_holder: str | None) -> Preview:
    """``Will run: [...]`` (or ``Will simulate a restart``), and who holds the service's restart lock now."""
    lines = [f"Will run: {list(argv)}" if argv is not None else "Will simulate a restart"]
    if lock_holder:
        lines.append(f"The restart lock is held now: {one_line(lock_holder, 200)}")
    return Preview(tuple(lines), ("run", *(argv or ("simulate",))))


def covered_by_labels(labels: Iterable[tuple[str, str]], incidents: Iterable[Incident]) -> list[Incident]:
    """The alerts a silence with these exact matchers covers now: each whose labels hold every pair."""
    wanted = set(labels)
    return sorted((incident for incident in incidents if wanted <= set(incident.labels)), key=lambda i: i.id)


def silence_preview(labels: Sequence[tuple[str, str]], covered: Sequence[Incident]) -> Preview:
    matchers = ", ".join(f'{name}="{value}"' for name, value in labels)
    lines = (f"Will silence {alert_names(covered)}", f"Matchers: {masked_line(matchers, 400)}")
    return Preview(lines, ("silence", *(incident.id for incident in covered)))


@dataclass(frozen=True)
class SilenceTarget:
    """A silence an unsilence would expire: who made it, when it ends, what it covers now."""

    silence_id: str
    created_by: str
    ends_at: datetime
    covered: tuple[Incident, ...]
    made_here: bool  # this desk made it for this incident (its journal says so)


def unsilence_preview(targets: Sequence[SilenceTarget]) -> Preview:
    lines = tuple(
        f"Will expire silence {target.silence_id} made by {one_line(target.created_by, 120) or 'nobody named'}, "
        f"ending {_utc(target.ends_at)}Z, covering {alert_names(target.covered)}"
        for target in targets
    )
    bound = tuple(
        f"{target.silence_id}:{_utc(target.ends_at)}:{','.join(incident.id for incident in target.covered)}"
        for target in targets
    )
    return Preview(lines, ("unsilence", *bound))


def foreign_refusal(target: SilenceTarget) -> str:
    """Why an unsilence leaves a silence alone by default: someone else made it, and it may cover more."""
    creator = one_line(target.created_by, 120) or "nobody named"
    return FOREIGN_SILENCE.format(silence_id=target.silence_id, creator=creator, count=len(target.covered))


def resolve_preview(incident: Incident, state: str) -> Preview:
    """The incident and its state, shown; bound to the incident alone (what a resolution touches is its record on
    this desk, whatever happened to it meanwhile: a second resolution of it is a replay, refused as one)."""
    line = f"Will mark {incident.id} ({masked_line(incident.title, 120)}) resolved; it is {state} now"
    return Preview((line,), ("resolve", incident.id))
