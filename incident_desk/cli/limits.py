"""``incident-desk limits``: see the act limits' counters (``[act_limits]``), and start a service's again.

The counters are read from the journal, as the desk reads them before asking anyone. A reset is an operator's
answer to a limit that stands in the way of a restart that must happen: it is journalled (``limits_reset``) with
the OS user who made it and the reason given, and the service's restart count and cooldown run from it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from incident_desk.cli.locks import operator
from incident_desk.cli.output import err, out

if TYPE_CHECKING:
    from incident_desk.settings.model import Settings


def _configured(settings: Settings) -> str:
    limits = settings.act_limits

    def said(value: int, text: str) -> str:
        return f"{value} {text}" if value else f"no limit on {text}"

    return (
        f"act limits: {said(limits.per_person_per_hour, 'acts per person per hour')}, "
        f"{said(limits.restarts_per_service_per_hour, 'restarts per service per hour')}, "
        + (f"a {limits.cooldown_seconds}s cooldown after a restart" if limits.cooldown_seconds else "no cooldown")
    )


def run_limits(settings: Settings, action: str | None, service: str | None, reason: str | None) -> int:
    from incident_desk.assembly import open_journal
    from incident_desk.core.acts.limits import all_counters, format_counters, service_counters
    from incident_desk.core.journal.audit import AuditError, Decision
    from incident_desk.core.outcomes import Outcome

    if action == "reset" and not (reason or "").strip():
        err("--reason is required: say why the limits are reset (it goes into the journal)")
        return 2
    if action != "reset" and settings.audit_url is None and not settings.audit_path.exists():
        err(_configured(settings))
        out(f"no act counts towards a limit now ({settings.audit_path} does not exist)")
        return 0
    now = datetime.now(UTC)
    try:
        journal = open_journal(settings)
        try:
            rows = journal.counted_since(now - settings.act_limits.window())
            if action != "reset":
                err(_configured(settings))
                out(format_counters(all_counters(rows, settings.act_limits, now), now))
                return 0
            assert service is not None and reason is not None
            was = service_counters(rows, settings.act_limits, service, now)
            who = operator()
            counted = "; ".join(f"{c.what}: {c.used} of {c.limit or 'no limit'}" for c in was) or "nothing counted"
            detail = f"act limits of {service} reset by {who} (they stood at: {counted}); reason: {reason.strip()}"
            journal.record(Decision(service, Outcome.LIMITS_RESET, None, who, "cli", detail=detail))
        finally:
            journal.close()
    except AuditError as exc:
        err(str(exc))
        return 1
    out(
        f"reset the restart count and cooldown of {service} ({counted}); journalled as limits_reset by {who}. "
        "Its next restarts count from now; the limit on acts per person is not reset."
    )
    return 0
