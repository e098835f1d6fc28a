"""The audit journal on PostgreSQL, for replicas that share one journal.

Same interface and rules as the SQLite journal (``core.audit``): each decision is committed (autocommit, with the
server's default ``synchronous_commit = on``) before ``record`` returns, and a nonce can be recorded once, which the
database enforces across every replica. A small pool keeps connections; broken ones are replaced at checkout.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from incident_desk.core.journal import desks
from incident_desk.core.journal.activity import Counted, Event, Standing, counted_from_row, event_from_row
from incident_desk.core.journal.audit import (
    DEFAULT_DESK,
    FIELD_LIMITS,
    LIMIT_OUTCOMES_LIST,
    MAX_NONCE_CHARS,
    PROBE_INSERT,
    PROBE_ROW,
    SCHEMA_VERSION,
    AuditError,
    Decision,
    DuplicateApproval,
    display_url,
    row_to_decision,
)
from incident_desk.core.journal.locks import (
    HELD_LOCKS_SQL,
    HeldLock,
    PostgresLocks,
    RestartLocks,
    held_from_rows,
)
from incident_desk.core.journal.revision import KeptStandings

# Advisory locks, hashtextextended, and pg_terminate_backend with a timeout (breaking a stuck lock).
MIN_SERVER_VERSION = 140000
# Writes wait this long for a pooled connection: a busy journal is worth waiting for before a restart is refused.
POOL_TIMEOUT_SECONDS = 5.0
# Reads and the checks made before a human is asked wait this long for a pooled connection, then check with a fresh
# connection whether the database is down (and say so at once) before waiting the rest of the usual time.
READ_TIMEOUT_SECONDS = 1.0
# libpq's connect_timeout; it counts whole seconds and treats anything under 2 as 2.
CONNECT_TIMEOUT_SECONDS = 5
DIRECT_CONNECT_TIMEOUT_SECONDS = 2
BREAK_WAIT_MILLISECONDS = 5000

_SCHEMA = [
    """CREATE TABLE decisions (
        id BIGSERIAL PRIMARY KEY,
        time TIMESTAMPTZ NOT NULL,
        service TEXT NOT NULL,
        outcome TEXT NOT NULL,
        ticket TEXT,
        approver TEXT NOT NULL,
        protocol_era TEXT NOT NULL,
        exit_status INTEGER,
        detail TEXT NOT NULL DEFAULT '',
        nonce TEXT UNIQUE
    )""",
    "ALTER TABLE decisions ADD COLUMN desk TEXT NOT NULL DEFAULT ''",
    # Who holds each service's restart lock, for the busy refusal; the lock itself is an advisory lock.
    "CREATE TABLE restart_holders (service TEXT PRIMARY KEY, holder TEXT NOT NULL, since TIMESTAMPTZ NOT NULL)",
    "CREATE TABLE incident_desk_schema (version INTEGER NOT NULL)",
]
# Version 2, made on a new journal or added to a version 1 one in place (its rows go to the desk upgrading it).
_ACTIVITY_SCHEMA = [
    """CREATE TABLE activity (
        id BIGSERIAL PRIMARY KEY,
        desk TEXT NOT NULL,
        time TIMESTAMPTZ NOT NULL,
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
WHERE desk = %(desk)s AND (%(incident_id)s::text IS NULL OR incident_id = %(incident_id)s)
    AND (%(acts)s::text[] IS NULL OR act = ANY(%(acts)s::text[]))
ORDER BY id DESC LIMIT %(limit)s
"""

_SELECT_COUNTED = """
SELECT time, 'restart', outcome, approver, service, nonce FROM decisions
WHERE desk = %(desk)s AND time >= %(since)s AND outcome = ANY(%(outcomes)s::text[])
UNION ALL
SELECT time, act, outcome, actor, NULL, nonce FROM activity
WHERE desk = %(desk)s AND time >= %(since)s AND outcome = 'approved'
"""

_SELECT_RECENT = """
SELECT id, time, left(service, %(service)s), left(outcome, 64), left(ticket, %(ticket)s),
    left(approver, %(approver)s), left(protocol_era, %(protocol_era)s), exit_status,
    left(detail, %(detail)s), left(nonce, %(nonce)s)
FROM decisions WHERE desk = %(desk)s AND (%(only_service)s::text IS NULL OR service = %(only_service)s)
    AND (%(since)s::timestamptz IS NULL OR time >= %(since)s)
ORDER BY id DESC LIMIT %(limit)s
"""
_SELECTED_CHARS = {**{name: limit + 1 for name, limit in FIELD_LIMITS.items()}, "nonce": MAX_NONCE_CHARS}


class PostgresJournal:
    """An append-only journal of decisions in the PostgreSQL database at ``url``."""

    def __init__(
        self,
        url: str,
        password: str | None = None,
        *,
        pool_timeout: float = POOL_TIMEOUT_SECONDS,
        desk: str = DEFAULT_DESK,
        derived: bool = False,
        renamed_from: Sequence[str] = (),
    ) -> None:
        """``derived`` and ``renamed_from`` say which former names' rows this desk takes over, as in SQLite."""
        self.location = display_url(url)
        self.desk = desk
        self._derived = derived
        self._renamed_from = tuple(renamed_from)
        self.adopted: list[str] = []
        conninfo = make_conninfo(url, password=password) if password else url
        try:
            with psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
                self._initialise(conn)
        except psycopg.Error as exc:
            hint = (
                "; no password was given: store it with `incident-desk key set --kind audit-db` or set "
                "INCIDENT_DESK_AUDIT_DB_PASSWORD"
                if password is None and "password" in str(exc)
                else ""
            )
            raise AuditError(
                f"audit journal {self.location} (setting audit_db) cannot be reached: {_reason(exc)}{hint}"
            ) from None
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=4,
            open=False,
            timeout=pool_timeout,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS},
            check=ConnectionPool.check_connection,
            name="incident-desk-journal",
        )
        self._pool.open()
        self._conninfo = conninfo
        self.locks: RestartLocks = PostgresLocks(conninfo, self.location, AuditError, self.held_locks)

    def close(self) -> None:
        self._pool.close()

    def standings(self) -> Mapping[str, Standing]:
        """Who acknowledged and who resolved each incident, read on every call (no revision to keep them by)."""
        return KeptStandings(self)()

    def revision(self) -> None:
        """Never known without a query to the server, which costs what the read it would spare costs: every read
        goes to the journal."""

    def standings_at_once(self) -> None:
        """Never kept (``revision``): every listing reads the journal in a worker thread."""

    def record(self, decision: Decision) -> int:
        """Append ``decision``, committed when this returns; a nonce already recorded raises ``DuplicateApproval``."""
        if decision.nonce is not None and len(decision.nonce) > MAX_NONCE_CHARS:
            raise ValueError(f"a nonce of {len(decision.nonce)} characters; the desk makes none over {MAX_NONCE_CHARS}")
        row = (
            decision.time,
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
            "INSERT INTO decisions (time, service, outcome, ticket, approver, protocol_era, exit_status, "
            "detail, nonce, desk) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (nonce) DO NOTHING RETURNING id",
            row,
            decision.nonce,
        )

    def record_event(self, event: Event) -> int:
        """Append one activity event for this desk; a nonce already used raises ``DuplicateApproval``."""
        if event.nonce is not None and len(event.nonce) > MAX_NONCE_CHARS:
            raise ValueError(f"a nonce of {len(event.nonce)} characters; the desk makes none over {MAX_NONCE_CHARS}")
        row = (
            self.desk,
            event.time,
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
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (nonce) DO NOTHING RETURNING id",
            row,
            event.nonce,
        )

    def activity(self, incident_id: str | None, limit: int = 500, acts: tuple[str, ...] = ()) -> list[Event]:
        """This desk's events, newest first (one incident's, or all; of ``acts`` only when given)."""
        params = {"desk": self.desk, "incident_id": incident_id, "acts": list(acts) or None, "limit": limit}
        with self._connection("read", READ_TIMEOUT_SECONDS) as conn:
            rows = conn.execute(_SELECT_ACTIVITY, params).fetchall()
        return [event_from_row(row) for row in rows]

    def counted_since(self, since: datetime) -> list[Counted]:
        """This desk's rows bearing on an act limit from ``since`` on, whichever replica wrote them."""
        with self._connection("read", READ_TIMEOUT_SECONDS) as conn:
            rows = conn.execute(
                _SELECT_COUNTED, {"desk": self.desk, "since": since, "outcomes": LIMIT_OUTCOMES_LIST}
            ).fetchall()
        return [counted_from_row(row) for row in rows]

    def _insert(self, sql: str, row: tuple[Any, ...], nonce: str | None) -> int:
        with self._connection("written") as conn:
            # ON CONFLICT rather than catching UniqueViolation: the refusal leaves nothing half-done behind.
            inserted = conn.execute(sql, row).fetchone()
        if inserted is None:
            raise DuplicateApproval(f"approval {nonce} is already recorded in {self.location}")
        return int(inserted[0])

    def recent(self, limit: int = 50, service: str | None = None, since: datetime | None = None) -> list[Decision]:
        """The last ``limit`` decisions, newest first: of ``service`` only, from ``since`` on, when given."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        params = {**_SELECTED_CHARS, "desk": self.desk, "limit": limit, "only_service": service, "since": since}
        with self._connection("read", READ_TIMEOUT_SECONDS) as conn:
            rows = conn.execute(_SELECT_RECENT, params).fetchall()
        return [row_to_decision((row[0], row[1].isoformat(), *row[2:])) for row in rows]

    def count(self) -> int:
        with self._connection("read", READ_TIMEOUT_SECONDS) as conn:
            found = conn.execute("SELECT COUNT(*) FROM decisions WHERE desk = %s", (self.desk,)).fetchone()
        return int(found[0]) if found else 0

    def probe(self) -> None:
        """Write a row and read it back inside a transaction that is rolled back (``doctor``)."""
        with self._connection("written") as conn:
            try:
                with conn.transaction(force_rollback=True):
                    inserted = conn.execute(PROBE_INSERT, PROBE_ROW).fetchone()
                    found = conn.execute(
                        "SELECT service FROM decisions WHERE id = %s", (inserted[0] if inserted else None,)
                    ).fetchone()
            except psycopg.Error as exc:
                raise AuditError(f"audit journal {self.location} cannot be written: {_reason(exc)}") from None
        if found is None or found[0] != PROBE_ROW[1]:
            raise AuditError(f"audit journal {self.location} did not read back the row it wrote")

    def schema_version(self) -> int:
        with self._connection("read") as conn:
            found = conn.execute("SELECT version FROM incident_desk_schema").fetchone()
        return int(found[0]) if found else 0

    def check_writable(self) -> None:
        """Raise ``AuditError`` unless the journal answers now and this desk may append to it (no row is
        written): checked before a human is asked to approve anything."""
        with self._connection("reached", READ_TIMEOUT_SECONDS) as conn:
            found = conn.execute("SELECT has_table_privilege('decisions', 'INSERT')").fetchone()
        if found is None or found[0] is not True:
            raise AuditError(f"audit journal {self.location} cannot be written: this desk's role may not insert")

    def held_locks(self, service: str | None = None) -> list[HeldLock]:
        """The restart locks held right now (``service``'s alone, when given), with the sessions holding them."""
        with self._connection("read", READ_TIMEOUT_SECONDS) as conn:
            rows = conn.execute(HELD_LOCKS_SQL, {"service": service}).fetchall()
        return held_from_rows(rows)

    def break_lock(self, service: str) -> HeldLock | None:
        """End the session holding ``service``'s restart lock, so the database frees it; None if none held it.

        The caller journals the break: this only ends the session, and waits until its lock is gone.
        """
        with self._connection("written", READ_TIMEOUT_SECONDS) as conn:
            found = held_from_rows(conn.execute(HELD_LOCKS_SQL, {"service": service}).fetchall())
            if not found:
                return None
            (held,) = found
            ended = conn.execute(
                "SELECT pg_terminate_backend(%s, %s)", (held.backend_pid, BREAK_WAIT_MILLISECONDS)
            ).fetchone()
            if ended is None or ended[0] is not True:
                raise AuditError(
                    f"the restart lock of {service} could not be broken: session {held.backend_pid} did not end "
                    f"within {BREAK_WAIT_MILLISECONDS / 1000:g}s"
                )
            deadline = time.monotonic() + BREAK_WAIT_MILLISECONDS / 1000
            while conn.execute(HELD_LOCKS_SQL, {"service": service}).fetchone() is not None:
                if time.monotonic() > deadline:
                    raise AuditError(f"the restart lock of {service} is still held after its session ended")
                time.sleep(0.05)
        return held

    def connection(self, doing: str) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection for the desk's other tables (the incident memory); AuditError as for the journal."""
        return self._connection(doing, READ_TIMEOUT_SECONDS)

    @contextmanager
    def _connection(self, doing: str, timeout: float = POOL_TIMEOUT_SECONDS) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection. ``timeout`` under ``POOL_TIMEOUT_SECONDS`` (reads, checks): after that long without
        one, a connection of its own says at once whether the database is down; if it is not (back from an outage
        while the pool's reconnection backs off, or every pooled connection busy), wait the rest of the usual time."""
        waits = [timeout] if timeout >= POOL_TIMEOUT_SECONDS else [timeout, POOL_TIMEOUT_SECONDS - timeout]
        for attempt, wait in enumerate(waits):
            entered = False
            try:
                with self._pool.connection(timeout=wait) as conn:
                    entered = True
                    yield conn
                return
            except PoolTimeout:
                if entered:
                    raise
                if attempt == len(waits) - 1:
                    raise AuditError(
                        f"audit journal {self.location} cannot be {doing}: no connection to it came free within "
                        f"{sum(waits):g}s"
                    ) from None
                self._unless_down(doing)
            except psycopg.Error as exc:
                raise AuditError(f"audit journal {self.location} cannot be {doing}: {_reason(exc)}") from None

    def _unless_down(self, doing: str) -> None:
        """Raise ``AuditError`` saying the database is down (with its own reason) when a fresh connection fails."""
        try:
            psycopg.connect(self._conninfo, connect_timeout=DIRECT_CONNECT_TIMEOUT_SECONDS).close()
        except psycopg.Error as exc:
            down = f"the database is down or unreachable ({_reason(exc)})"
            raise AuditError(f"audit journal {self.location} cannot be {doing}: {down}") from None

    def _initialise(self, conn: psycopg.Connection[Any]) -> None:
        if conn.info.server_version < MIN_SERVER_VERSION:
            raise AuditError(
                f"audit journal {self.location} (setting audit_db): PostgreSQL {conn.info.server_version} is too "
                f"old; incident-desk needs {MIN_SERVER_VERSION // 10000} or newer"
            )
        with conn.transaction():
            # Replicas starting together: one creates the schema, the others wait and find it.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('incident-desk schema', 0))")
            found = conn.execute("SELECT to_regclass('incident_desk_schema')").fetchone()
            if found is None or found[0] is None:
                taken = conn.execute("SELECT to_regclass('decisions'), to_regclass('restart_holders')").fetchone()
                if taken is not None and any(taken):
                    raise AuditError(
                        f"audit journal {self.location} (setting audit_db) already holds a decisions or "
                        "restart_holders table that is not incident-desk's; use a database of its own"
                    )
                for statement in [*_SCHEMA, *_ACTIVITY_SCHEMA]:
                    conn.execute(statement)
                conn.execute("INSERT INTO incident_desk_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
                return
            self._check_and_upgrade(conn)
            self.adopted = self._adopt(conn)

    def _adopt(self, conn: psycopg.Connection[Any]) -> list[str]:
        """Move the rows of this desk's former names to its name (``core.journal.desks``), inside the schema
        lock's transaction, so replicas starting together move them once; the names moved. A role that may not
        read or move them (``doctor`` as a read-only user) moves nothing: the desk itself does at its start."""
        try:
            with conn.transaction():
                return self._move_former_rows(conn)
        except psycopg.errors.InsufficientPrivilege:
            return []

    def _move_former_rows(self, conn: psycopg.Connection[Any]) -> list[str]:
        found = conn.execute(
            "SELECT " + ", ".join(f"to_regclass('{table}') IS NOT NULL" for table in desks.DESK_TABLES)
        ).fetchone()
        present = {table for table, exists in zip(desks.DESK_TABLES, found or (), strict=False) if exists}
        tables = [table for table in desks.DESK_TABLES if table in present]
        existing = [row[0] for row in conn.execute(desks.distinct_desks_sql(tables)).fetchall()]
        former = desks.former_names(self.desk, self._derived, self._renamed_from, existing)
        for name in former:
            for table, statement in desks.move_statements(postgres=True):
                if table in present:
                    conn.execute(statement, {"old": name, "new": self.desk})
        return former

    def _check_and_upgrade(self, conn: psycopg.Connection[Any]) -> None:
        """A journal made before: refuse a newer or foreign schema, upgrade an older one in place."""
        version_row = conn.execute("SELECT max(version) FROM incident_desk_schema").fetchone()
        version = int(version_row[0]) if version_row and version_row[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise AuditError(
                f"audit journal {self.location} (setting audit_db) has schema version {version}, newer than "
                f"this incident-desk understands ({SCHEMA_VERSION}); upgrade incident-desk on every replica"
            )
        if version < 1:
            raise AuditError(
                f"audit journal {self.location} (setting audit_db) has no schema version; it was not made by "
                "incident-desk"
            )
        if version == 1:
            # In place, in this transaction (under the schema lock): every row stays, owned by this desk.
            conn.execute("ALTER TABLE decisions ADD COLUMN desk TEXT NOT NULL DEFAULT ''")
            conn.execute("UPDATE decisions SET desk = %s", (self.desk,))
            for statement in _ACTIVITY_SCHEMA:
                conn.execute(statement)
            conn.execute("UPDATE incident_desk_schema SET version = %s", (SCHEMA_VERSION,))


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or exc.__class__.__name__
