"""``incident-desk locks``: see the restart locks held on a team desk's journal, and break a stuck one.

A replica that is stopped (not dead) keeps its service's lock, since its restart command may still run; an operator
who has made sure it will not (or that its host is gone) breaks the lock here. Each break is journalled with the
OS user who broke it and the reason given.
"""

from __future__ import annotations

import getpass
import unicodedata
from datetime import UTC
from typing import TYPE_CHECKING

from incident_desk.cli.output import err, out

if TYPE_CHECKING:
    from incident_desk.core.journal.locks import HeldLock
    from incident_desk.settings.model import Settings

SQLITE_LOCKS = (
    "the SQLite journal {location} has no shared restart locks: a restart is held inside the one desk process "
    "running it, and ends with that process (stop or kill it); `locks` works on a PostgreSQL journal (audit_db)"
)


def operator() -> str:
    """Who breaks a lock: the OS user running this command (never anything typed on the command line)."""
    try:
        return f"os:{getpass.getuser()}"
    except (KeyError, OSError):
        return "os:unknown"


def _cell(value: str) -> str:
    """One printable cell: a holder's name comes from a client's identity, so no control character reaches a tty."""
    return "".join("?" if unicodedata.category(ch)[0] == "C" else ch for ch in value)


def format_held(held: list[HeldLock]) -> str:
    if not held:
        return "no restart lock is held"
    headers = ("service", "holder", "since", "session")
    rows = [
        (
            _cell(lock.service),
            _cell(lock.holder.who),
            "-" if lock.holder.since is None else lock.holder.since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
            "-" if lock.backend_pid is None else str(lock.backend_pid),
        )
        for lock in held
    ]
    widths = [max(len(header), *(len(row[i]) for row in rows)) for i, header in enumerate(headers)]
    lines = [headers, *rows]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def run_locks(settings: Settings, action: str, service: str | None, reason: str | None) -> int:
    from incident_desk.assembly import open_journal
    from incident_desk.core.journal.audit import AuditError, Decision
    from incident_desk.core.outcomes import Outcome

    if settings.audit_url is None:
        err(SQLITE_LOCKS.format(location=settings.audit_path))
        return 1
    if action == "break" and not (reason or "").strip():
        err("--reason is required: say why the lock is broken (it goes into the journal)")
        return 2
    try:
        journal = open_journal(settings)
        # Only now, with the driver known to be installed: the postgres extra is optional.
        from incident_desk.core.journal.audit_pg import PostgresJournal

        assert isinstance(journal, PostgresJournal)
        try:
            if action == "list":
                out(format_held(journal.held_locks()))
                return 0
            assert service is not None and reason is not None
            broken = journal.break_lock(service)
            if broken is None:
                err(f"no restart lock of {service} is held; nothing was broken")
                return 1
            who = operator()
            detail = (
                f"restart lock broken by {who}: it was {broken.holder.describe()} (session {broken.backend_pid}); "
                f"reason: {reason.strip()}"
            )
            journal.record(Decision(service, Outcome.LOCK_BROKEN, None, who, "cli", detail=detail))
        finally:
            journal.close()
    except AuditError as exc:
        err(str(exc))
        return 1
    out(
        f"broke the restart lock of {service} ({broken.holder.describe()}); journalled as lock_broken by {who}. "
        "A holder that was only stopped finds the lock gone when it resumes, and kills its restart command."
    )
    return 0
