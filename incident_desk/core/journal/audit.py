"""The durable audit journal of restart decisions.

Every decision is committed (one SQLite transaction, ``synchronous=FULL``) before the tool result that reports
it is returned, so a crash right after a restart cannot lose the record of who approved it. Connections are
short-lived and opened per call: the journal is safe to use from worker threads and from several processes. One
more stays open to tell whether anything changed since a revision (``revision``).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import unicodedata
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from incident_desk.core import errors
from incident_desk.core.journal import desks
from incident_desk.core.journal.activity import Counted, Event, Standing, counted_from_row, event_from_row
from incident_desk.core.journal.fields import FIELD_LIMITS, WORDS_FIELDS, cut, kept_words, storable
from incident_desk.core.journal.locks import ProcessLocks, RestartLocks
from incident_desk.core.journal.memory import desk_token
from incident_desk.core.journal.revision import KeptStandings, SQLiteRevision
from incident_desk.core.neighbours.untrusted import masked_line
from incident_desk.core.outcomes import LIMIT_OUTCOMES, RESTART_OUTCOMES, Outcome

__all__ = ["FIELD_LIMITS", "cut", "storable"]


# 2: every row belongs to one desk (``desk``), and the ``activity`` table holds each incident's acts and notes.
SCHEMA_VERSION = 2
# The desk a journal opened without a name reads and writes as: the bundled sample desk's (settings.journal_desk).
DEFAULT_DESK = "sample"
BUSY_TIMEOUT_SECONDS = 10.0

_SCHEMA = """
CREATE TABLE decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    service TEXT NOT NULL,
    outcome TEXT NOT NULL,
    ticket TEXT,
    approver TEXT NOT NULL,
    protocol_era TEXT NOT NULL,
    exit_status INTEGER,
    detail TEXT NOT NULL DEFAULT '',
    nonce TEXT UNIQUE,
    desk TEXT NOT NULL DEFAULT ''
)
"""

# Version 1 journals gain the desk column (their rows go to the desk that upgrades them) and the activity table.
_ACTIVITY_SCHEMA = [
    """CREATE TABLE activity (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    desk TEXT NOT NULL,
    time TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    act TEXT NOT NULL,
    outcome TEXT NOT NULL,
    actor TEXT NOT NULL,
    text TEXT NOT NULL DEFAULT '',
    ticket TEXT,
    protocol_era TEXT NOT NULL DEFAULT '',
    nonce TEXT UNIQUE
)""",
    "CREATE INDEX activity_by_incident ON activity (desk, incident_id, id)",
    "CREATE INDEX decisions_by_desk ON decisions (desk, id)",
]
_SELECT_ACTIVITY = """
SELECT id, desk, time, incident_id, act, outcome, actor, text, ticket, protocol_era, nonce FROM activity
WHERE desk = :desk AND (:incident_id IS NULL OR incident_id = :incident_id)
    AND (:acts IS NULL OR instr(',' || :acts || ',', ',' || act || ',') > 0)
ORDER BY id DESC LIMIT :limit
"""

# The rows an act limit counts (``core.acts.limits``): a restart's from the audit journal, an incident act's approval
# from the activity log. SQLite compares the ISO times as text: ``since`` is read a little early, the limits filter.
LIMIT_OUTCOMES_LIST = sorted(outcome.value for outcome in LIMIT_OUTCOMES)
_SELECT_COUNTED = """
SELECT time, 'restart', outcome, approver, service, nonce FROM decisions
WHERE desk = :desk AND time >= :since AND instr(',' || :outcomes || ',', ',' || outcome || ',') > 0
UNION ALL
SELECT time, act, outcome, actor, NULL, nonce FROM activity
WHERE desk = :desk AND time >= :since AND outcome = 'approved'
"""
COUNTED_SLACK = timedelta(seconds=2)

# Nonces are made by the desk and must stay whole to stay unique: one longer than this is a bug, not input to cut.
MAX_NONCE_CHARS = 64

# Reads select at most one character more than a field keeps, so a row written before the bounds (or by hand)
# costs no more than a bounded one once it leaves SQLite, and is shown cut like any other. SQLite still reads such
# an oversized value once to cut it; the desk never holds more than the cut.
_SELECT_RECENT = """
SELECT id, substr(time, 1, 64), substr(service, 1, :service), substr(outcome, 1, 64), substr(ticket, 1, :ticket),
    substr(approver, 1, :approver), substr(protocol_era, 1, :protocol_era),
    CASE WHEN typeof(exit_status) = 'integer' THEN exit_status END,
    substr(detail, 1, :detail), substr(nonce, 1, :nonce)
FROM decisions WHERE desk = :desk AND (:only_service IS NULL OR service = :only_service)
    AND (:since IS NULL OR time >= :since)
ORDER BY id DESC LIMIT :limit
"""
_SELECTED_CHARS = {**{name: limit + 1 for name, limit in FIELD_LIMITS.items()}, "nonce": MAX_NONCE_CHARS}


# doctor's write check, always rolled back.
PROBE_INSERT = (
    "INSERT INTO decisions (time, service, outcome, approver, protocol_era) VALUES (%s, %s, %s, %s, %s) RETURNING id"
)
PROBE_ROW = ("1970-01-01T00:00:00+00:00", "incident-desk doctor", "approved", "doctor", "doctor")

# The most decisions a client or the CLI can ask for in one read (get_audit_log, `incident-desk audit`).
MAX_RECENT_DECISIONS = 500


URL_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(value: str) -> bool:
    return value.split("://", 1)[0].lower() in URL_SCHEMES and "://" in value


def url_has_password(url: str) -> bool:
    return urlsplit(url).password is not None or "password=" in urlsplit(url).query.lower()


def display_url(url: str) -> str:
    """The URL as messages show it: no password, even one that slipped in."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    if parts.username:
        host = f"{parts.username}@{host}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class AuditError(errors.Unavailable):
    """The journal cannot be opened, read or written; the message names the file."""


class DuplicateApproval(AuditError, errors.Refused):
    """An approval whose nonce is already in the journal: a replayed answer, which must not act twice."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Decision:
    """One journal row. ``id`` is set only on decisions read back from the journal."""

    service: str
    outcome: Outcome
    ticket: str | None
    approver: str
    protocol_era: str
    exit_status: int | None = None
    detail: str = ""
    time: datetime = field(default_factory=_now)
    nonce: str | None = None
    id: int | None = None

    def __post_init__(self) -> None:
        # Rows read back carry plain text: an outcome this version does not know fails here, named.
        try:
            outcome: Outcome | None = Outcome(self.outcome)
        except ValueError:
            outcome = None
        if outcome not in RESTART_OUTCOMES:
            known = ", ".join(o.value for o in Outcome if o in RESTART_OUTCOMES)
            raise ValueError(f"unknown audit outcome {self.outcome!r} (known: {known})")
        object.__setattr__(self, "outcome", outcome)
        for name, limit in FIELD_LIMITS.items():
            value = getattr(self, name)
            if value is not None:
                value = kept_words(value) if self.id is None and name in WORDS_FIELDS else value
                object.__setattr__(self, name, cut(storable(value), limit))
        if self.time.tzinfo is None or self.time.utcoffset() is None:
            raise ValueError("decision time must be timezone-aware; a naive time is ambiguous in an audit trail")
        object.__setattr__(self, "time", self.time.astimezone(UTC))


class Journal(Protocol):
    """What the desk needs of a journal, SQLite or PostgreSQL."""

    location: str
    locks: RestartLocks

    desk: str
    # The former names whose rows this desk took over when it opened the journal (``core.journal.desks``).
    adopted: list[str]

    def record(self, decision: Decision) -> int: ...
    def recent(self, limit: int = 50, service: str | None = None, since: datetime | None = None) -> list[Decision]: ...
    def record_event(self, event: Event) -> int: ...
    def activity(self, incident_id: str | None, limit: int = 500, acts: tuple[str, ...] = ()) -> list[Event]: ...
    def counted_since(self, since: datetime) -> list[Counted]: ...
    def count(self) -> int: ...
    def revision(self) -> Hashable | None: ...
    def standings(self) -> Mapping[str, Standing]: ...
    def standings_at_once(self) -> Mapping[str, Standing] | None: ...
    def probe(self) -> None: ...
    def check_writable(self) -> None: ...
    def close(self) -> None: ...


class AuditJournal:
    """An append-only SQLite journal of decisions at ``path``."""

    def __init__(
        self, path: Path, desk: str = DEFAULT_DESK, *, derived: bool = False, renamed_from: Sequence[str] = ()
    ) -> None:
        """``derived``: the desk's name is made from its data directory (not set by ``desk_name``);
        ``renamed_from``: names whose rows this desk takes over (``core.journal.desks``)."""
        self.path = Path(path)
        self.desk = desk
        self.location = str(self.path)
        # One process per SQLite desk: its own restarts are all there is to exclude.
        self.locks: RestartLocks = ProcessLocks()
        try:
            _make_private_dirs(self.path.parent)
            _create_private_file(self.path)
        except OSError as exc:
            raise AuditError(f"audit journal {self.path} cannot be created: {exc}") from None
        with self._connect() as conn:
            self._initialise(conn)
            self.adopted = self._adopt(conn, derived, renamed_from)
        self._revision = SQLiteRevision(self.path)
        self._standings = KeptStandings(self)

    def record(self, decision: Decision) -> int:
        """Append ``decision`` in its own transaction; the returned row id means it is on disk."""
        if decision.nonce is not None and len(decision.nonce) > MAX_NONCE_CHARS:
            raise ValueError(f"a nonce of {len(decision.nonce)} characters; the desk makes none over {MAX_NONCE_CHARS}")
        row = (
            decision.time.isoformat(),
            decision.service,
            str(decision.outcome),
            decision.ticket,
            decision.approver,
            decision.protocol_era,
            decision.exit_status,
            decision.detail,
            decision.nonce,
            self.desk,
        )
        return self._insert(
            "INSERT INTO decisions (time, service, outcome, ticket, approver, protocol_era, "
            "exit_status, detail, nonce, desk) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
            decision.nonce,
        )

    def record_event(self, event: Event) -> int:
        """Append one activity event for this desk; a nonce already used raises ``DuplicateApproval``."""
        if event.nonce is not None and len(event.nonce) > MAX_NONCE_CHARS:
            raise ValueError(f"a nonce of {len(event.nonce)} characters; the desk makes none over {MAX_NONCE_CHARS}")
        row = (
            self.desk,
            event.time.isoformat(),
            event.incident_id,
            str(event.act),
            str(event.outcome),
            event.actor,
            event.text,
            event.ticket,
            event.protocol_era,
            event.nonce,
        )
        return self._insert(
            "INSERT INTO activity (desk, time, incident_id, act, outcome, actor, text, ticket, protocol_era, nonce) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
            event.nonce,
        )

    def activity(self, incident_id: str | None, limit: int = 500, acts: tuple[str, ...] = ()) -> list[Event]:
        """This desk's events, newest first: one incident's, or every incident's (``None``), of ``acts`` only
        when given."""
        params = {"desk": self.desk, "incident_id": incident_id, "acts": ",".join(acts) or None, "limit": limit}
        with self._connect() as conn:
            rows = conn.execute(_SELECT_ACTIVITY, params).fetchall()
        return [event_from_row(row) for row in rows]

    def counted_since(self, since: datetime) -> list[Counted]:
        """This desk's rows bearing on an act limit, from about ``since`` on (a little earlier: the caller filters)."""
        since_text = (since - COUNTED_SLACK).astimezone(UTC).isoformat()
        params = {"desk": self.desk, "since": since_text, "outcomes": ",".join(LIMIT_OUTCOMES_LIST)}
        with self._connect() as conn:
            rows = conn.execute(_SELECT_COUNTED, params).fetchall()
        return [counted_from_row(row) for row in rows]

    def _insert(self, sql: str, row: tuple[Any, ...], nonce: str | None) -> int:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                cursor = conn.execute(sql, row)
                conn.execute("COMMIT")
            except sqlite3.IntegrityError:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise DuplicateApproval(f"approval {nonce} is already recorded in {self.path}") from None
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            row_id = cursor.lastrowid
        if row_id is None:
            raise AuditError(f"audit journal {self.path} did not return a row id for the recorded decision")
        return row_id

    def revision(self) -> Hashable | None:
        """A value that differs whenever the journal may have changed since it was taken, whoever wrote to it; None
        when it cannot be read now. What is derived from a read made after taking it holds while it stays equal."""
        return self._revision()

    def revision_at_once(self) -> Hashable | None:
        """The revision when it can be told without waiting or opening the file (``SQLiteRevision.at_once``)."""
        return self._revision.at_once()

    def standings(self) -> Mapping[str, Standing]:
        """Who acknowledged and who resolved each incident: read once per revision (``KeptStandings``)."""
        return self._standings()

    def standings_at_once(self) -> Mapping[str, Standing] | None:
        """The standings kept while the journal is known unchanged, told on the caller's thread in microseconds;
        None when a worker thread must call ``standings`` (nothing kept yet, a change, or the file busy)."""
        return self._standings.at_once(self._revision.at_once)

    def close(self) -> None:
        """Closes the connection that watches for changes; the others are opened per call."""
        self._revision.close()

    def probe(self) -> None:
        """Write a row and read it back inside a transaction that is rolled back (``doctor``)."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                inserted = conn.execute(PROBE_INSERT.replace("%s", "?"), PROBE_ROW).fetchone()
                found = conn.execute("SELECT service FROM decisions WHERE id = ?", (inserted[0],)).fetchone()
            finally:
                conn.execute("ROLLBACK")
        if found is None or found[0] != PROBE_ROW[1]:
            raise AuditError(f"audit journal {self.path} did not read back the row it wrote")

    def check_writable(self) -> None:
        """Raise ``AuditError`` unless the journal can take a write now (nothing is written): checked before a
        human is asked to approve anything."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")

    def recent(self, limit: int = 50, service: str | None = None, since: datetime | None = None) -> list[Decision]:
        """The last ``limit`` decisions, newest first: of ``service`` only, from ``since`` on, when given."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        since_text = None if since is None else since.astimezone(UTC).isoformat()
        params = {**_SELECTED_CHARS, "desk": self.desk, "limit": limit, "only_service": service, "since": since_text}
        with self._connect() as conn:
            rows = conn.execute(_SELECT_RECENT, params).fetchall()
        return [row_to_decision(row) for row in rows]

    def count(self) -> int:
        """How many decisions the journal holds."""
        with self._connect() as conn:
            (total,) = conn.execute("SELECT COUNT(*) FROM decisions WHERE desk = ?", (self.desk,)).fetchone()
        return int(total)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A fresh, closed-on-exit connection; sqlite3 errors become ``AuditError`` naming the file."""
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise AuditError(f"audit journal {self.path} cannot be opened: {exc}") from None
        try:
            with closing(conn):
                conn.execute("PRAGMA synchronous=FULL")
                yield conn
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise AuditError(
                    f"audit journal {self.path} is not an SQLite database (or is corrupt): {exc}; "
                    "move it aside or point audit_db elsewhere"
                ) from None
            raise AuditError(f"audit journal {self.path}: {exc}") from None

    def _initialise(self, conn: sqlite3.Connection) -> None:
        # WAL lets readers (the audit resource, the CLI) run while the server writes. Where a filesystem
        # refuses it (some network shares) SQLite keeps the rollback journal, which is just as durable.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise AuditError(
                    f"audit journal {self.path} has schema version {version}, newer than this incident-desk "
                    f"understands ({SCHEMA_VERSION}); upgrade incident-desk or use another audit_db"
                )
            if version == 0:
                tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
                if tables:
                    raise AuditError(
                        f"{self.path} is an SQLite database but not an incident-desk audit journal "
                        f"(it holds tables {', '.join(sorted(t[0] for t in tables))})"
                    )
                conn.execute(_SCHEMA)
                for statement in _ACTIVITY_SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version == 1:
                # In place, in this transaction: the rows stay, and belong to the desk that upgrades the journal.
                conn.execute("ALTER TABLE decisions ADD COLUMN desk TEXT NOT NULL DEFAULT ''")
                conn.execute("UPDATE decisions SET desk = ?", (self.desk,))
                for statement in _ACTIVITY_SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _adopt(self, conn: sqlite3.Connection, derived: bool, renamed_from: Sequence[str]) -> list[str]:
        """Move the rows of this desk's former names to its name, in one transaction; the names moved."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            tables = [table for table in desks.DESK_TABLES if table in present]
            existing = [row[0] for row in conn.execute(desks.distinct_desks_sql(tables))]
            former = desks.former_names(self.desk, derived, renamed_from, existing)
            for name in former:
                names = {"old": name, "new": self.desk}
                if "memory_text" in present:  # the full-text rows of the entries about to go
                    conn.execute(_FORGET_TEXT_OF_DUPLICATES, names)
                for table, statement in desks.move_statements(postgres=False):
                    if table in present:
                        conn.execute(statement, names)
            if former and "memory_text" in present:
                conn.execute(_RETOKEN_TEXT, {"new": self.desk, "token": desk_token(self.desk)})
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return former


# The memory's full-text rows carry the desk as a token (``memory.desk_token``): moved with their entries.
_FORGET_TEXT_OF_DUPLICATES = (
    "DELETE FROM memory_text WHERE rowid IN (SELECT id FROM memory WHERE desk = :old AND incident_id IN "
    "(SELECT incident_id FROM memory WHERE desk = :new))"
)
_RETOKEN_TEXT = "UPDATE memory_text SET desk = :token WHERE rowid IN (SELECT id FROM memory WHERE desk = :new)"


def _make_private_dirs(directory: Path) -> None:
    """Create missing directories one by one so each (not just the last) is owner-only."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)


def _create_private_file(path: Path) -> None:
    """Create the journal owner-only; SQLite gives its -wal and -shm files the same mode."""
    if sys.platform == "win32" or path.exists():
        return
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(fd)


def row_to_decision(row: tuple[Any, ...]) -> Decision:
    """A selected row (id, ISO time, fields cut one past their limits) as a ``Decision``."""
    row_id, time, service, outcome, ticket, approver, era, exit_status, detail, nonce = row
    return Decision(
        service=_read_back(service, "service"),
        outcome=outcome,
        ticket=None if ticket is None else _read_back(ticket, "ticket"),
        approver=_read_back(approver, "approver"),
        protocol_era=_read_back(era, "protocol_era"),
        exit_status=exit_status,
        detail=_read_back(detail, "detail"),
        time=datetime.fromisoformat(time),
        nonce=nonce,
        id=row_id,
    )


def _read_back(selected: str, name: str) -> str:
    """A field as selected (one character past its limit at most): cut and marked if the row held more."""
    limit = FIELD_LIMITS[name]
    if len(selected) <= limit:
        return selected
    marker = f"…[cut: over {limit} characters]"
    return selected[: limit - len(marker)] + marker


_HEADERS = ("time", "service", "outcome", "ticket", "approver", "era", "exit")
_MAX_CELL = 40


def _cell(value: str) -> str:
    """One printable line: tickets come from a form, so control characters must not reach a terminal."""
    clean = "".join("?" if unicodedata.category(ch)[0] == "C" else ch for ch in value)
    return clean if len(clean) <= _MAX_CELL else clean[: _MAX_CELL - 3] + "..."


def format_decisions(decisions: Sequence[Decision]) -> str:
    """A fixed-width table for the ``audit://recent`` resource and the ``incident-desk audit`` command."""
    if not decisions:
        return "no decisions recorded yet"
    rows = [
        (
            d.time.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
            _cell(d.service),
            _cell(str(d.outcome)),
            _cell(masked_line(d.ticket)) if d.ticket else "-",
            _cell(d.approver),
            _cell(d.protocol_era),
            "-" if d.exit_status is None else str(d.exit_status),
        )
        for d in decisions
    ]
    widths = [max(len(header), *(len(row[i]) for row in rows)) for i, header in enumerate(_HEADERS)]
    lines = [_HEADERS, tuple("-" * w for w in widths), *rows]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)
