"""Who may restart a service right now: at most one restart of a service at a time.

An embedded (SQLite) desk is one process, so a set in memory is enough. Replicas sharing a PostgreSQL journal
share its locks instead: a session-level advisory lock held on a dedicated connection, which the database frees
only when that connection really ends: the holder exits or is killed (its kernel closes the socket), its host
vanishes (the server's TCP keepalives go unanswered), or an operator breaks the lock. A holder that is merely
stopped (SIGSTOP, a debugger, a frozen VM) keeps it: its restart command may still be running, so no other replica
may start one. That holder blocks restarts of the service until it is killed or the lock is broken (``incident-desk
locks break``). The holder watches its side too: a lock connection that fails or stops answering means the lock is
lost, and the restart command is killed, so that two restarts never run at once.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
import structlog

from incident_desk.core import errors

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Holder:
    """Who holds a service's restart, and since when."""

    who: str
    since: datetime | None

    def describe(self) -> str:
        since = "an unknown time" if self.since is None else self.since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        return f"held by {self.who} since {since}"


@dataclass(frozen=True)
class HeldLock:
    """A service's restart lock as operators see it: who holds it, and the database session holding it."""

    service: str
    holder: Holder
    backend_pid: int | None


class ServiceBusy(errors.Refused):
    """Another restart of the service is running; ``holder`` says whose and since when."""

    def __init__(self, service: str, holder: Holder) -> None:
        super().__init__(f"a restart of {service} is already running ({holder.describe()})")
        self.service = service
        self.holder = holder


class LockLost(errors.Unavailable):
    """The service's lock went while its restart ran (the database restarted, the lock was broken, or its
    connection stopped answering): the restart was cancelled, so that it cannot overlap another replica's."""

    def __init__(self, service: str, reason: str) -> None:
        super().__init__(f"the restart lock of {service} was lost while the restart ran ({reason})")
        self.service = service
        self.reason = reason


@dataclass
class Holding:
    """What ``hold`` gives its body: ``lost`` says why the lock went, once it has (the body is then cancelled)."""

    lost: str | None = None


class RestartLocks(Protocol):
    def hold(self, service: str, who: str) -> AbstractAsyncContextManager[Holding]:
        """Hold ``service`` for the body; raise ``ServiceBusy`` at once if someone else holds it, ``LockLost``
        (after cancelling the body) if the lock goes while the body runs."""

    async def holder(self, service: str) -> Holder | None:
        """Who holds ``service`` right now, or None: asked before a human is asked to approve a restart."""


def this_replica() -> str:
    """How a holder is named to the others: the host and process that run the restart."""
    return f"{socket.gethostname()} pid {os.getpid()}"


class ProcessLocks:
    """The restarts running in this process."""

    def __init__(self) -> None:
        self._held: dict[str, Holder] = {}

    @asynccontextmanager
    async def hold(self, service: str, who: str) -> AsyncIterator[Holding]:
        if service in self._held:
            raise ServiceBusy(service, self._held[service])
        self._held[service] = Holder(who, datetime.now(UTC))
        try:
            yield Holding()
        finally:
            del self._held[service]

    async def holder(self, service: str) -> Holder | None:
        return self._held.get(service)

    def held(self) -> list[HeldLock]:
        return [HeldLock(service, holder, None) for service, holder in sorted(self._held.items())]


HEARTBEAT_SECONDS = 2.0
# A heartbeat unanswered this long means the lock connection is gone (a partition, say): the holder gives up the
# restart well before the server's keepalives below (10 s idle, then 4 probes 5 s apart: about 30 s) free the lock.
HEARTBEAT_DEADLINE_SECONDS = 10.0
UNLOCK_DEADLINE_SECONDS = 5.0
# Nothing of the desk's own making may end a stopped holder's session: no idle or statement timeouts (set to 0
# whatever the server's or role's defaults), and keepalives, which a stopped process's kernel still answers.
LOCK_SESSION_OPTIONS = (
    "-c idle_session_timeout=0 -c idle_in_transaction_session_timeout=0 -c statement_timeout=0 "
    "-c lock_timeout=0 -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=4"
)
LOCK_APPLICATION_NAME = "incident-desk restart lock"


def lock_key(service: str) -> str:
    """The text whose ``hashtextextended`` is the service's advisory lock key."""
    return f"incident-desk restart:{service}"


# The granted advisory locks of restart_holders' services in this database, with the sessions holding them. A
# bigint advisory key shows in pg_locks as classid (high 32 bits), objid (low 32 bits) and objsubid 1.
HELD_LOCKS_SQL = """
SELECT h.service, h.holder, h.since, l.pid
FROM restart_holders h
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid::bigint = (hashtextextended('incident-desk restart:' || h.service, 0) >> 32) & 4294967295
    AND l.objid::bigint = hashtextextended('incident-desk restart:' || h.service, 0) & 4294967295
WHERE %(service)s::text IS NULL OR h.service = %(service)s::text
ORDER BY h.service
"""


def held_from_rows(rows: list[tuple[Any, ...]]) -> list[HeldLock]:
    return [HeldLock(row[0], Holder(row[1], row[2]), int(row[3])) for row in rows]


class PostgresLocks:
    """Advisory locks shared by every replica on one PostgreSQL journal; each hold opens a fresh connection.

    ``held`` lists the locks held now (through the journal's pool); it runs in a worker thread.
    """

    def __init__(self, conninfo: str, location: str, error: type[Exception], held: Any) -> None:
        self._conninfo = conninfo
        self._location = location
        self._error = error
        self._held = held

    async def holder(self, service: str) -> Holder | None:
        found: list[HeldLock] = await anyio.to_thread.run_sync(self._held, service)
        return found[0].holder if found else None

    @asynccontextmanager
    async def hold(self, service: str, who: str) -> AsyncIterator[Holding]:
        import psycopg

        key = lock_key(service)
        try:
            # Dedicated and never pooled: a session lock outlives a checkout, and is re-entrant per connection.
            conn = await psycopg.AsyncConnection.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=5,
                application_name=LOCK_APPLICATION_NAME,
                options=LOCK_SESSION_OPTIONS,
            )
        except psycopg.Error as exc:
            raise self._error(f"audit journal {self._location} cannot be written: {exc}") from None
        holding = Holding()
        locked = False
        try:
            try:
                # Name the holder and take the lock in one transaction, naming first: a rival's naming then waits
                # for this transaction's row, so a refusal never shows a previous holder, or none, by mistake.
                # Should this fail half-way, closing the connection (below) ends the transaction and any lock.
                await conn.execute("BEGIN")
                await conn.execute(
                    "INSERT INTO restart_holders (service, holder, since) VALUES (%s, %s, now()) "
                    "ON CONFLICT (service) DO UPDATE SET holder = excluded.holder, since = excluded.since",
                    (service, who),
                )
                cursor = await conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,))
                row = await cursor.fetchone()
                locked = row is not None and row[0] is True
                # A session lock outlives its transaction; a refusal leaves the holder's row as it was.
                await conn.execute("COMMIT" if locked else "ROLLBACK")
                if not locked:
                    cursor = await conn.execute(
                        "SELECT holder, since FROM restart_holders WHERE service = %s", (service,)
                    )
                    found = await cursor.fetchone()
                    holder = Holder(found[0], found[1]) if found else Holder("another replica", None)
                    raise ServiceBusy(service, holder)
            except psycopg.Error as exc:
                raise self._error(f"audit journal {self._location} cannot be written: {exc}") from None
            finished = False
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_heartbeat, conn, service, holding, tasks.cancel_scope)
                try:
                    yield holding
                    finished = True  # a body that ended on its own (its last steps shielded) keeps its result
                finally:
                    tasks.cancel_scope.cancel()
            if holding.lost is not None and not finished:
                raise LockLost(service, holding.lost)
        finally:
            with anyio.CancelScope(shield=True):
                if locked and holding.lost is None:
                    # Unlock before closing: a closed session's backend frees its locks only as it exits, after
                    # close() returns, and the next restart of this service must not find them still held.
                    with contextlib.suppress(psycopg.Error), anyio.move_on_after(UNLOCK_DEADLINE_SECONDS):
                        await conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
                await conn.close()  # the session's end releases the lock anyway, should the unlock have failed


async def _heartbeat(conn: Any, service: str, holding: Holding, body: anyio.CancelScope) -> None:
    """Notice a lost lock: the database restarted, the lock was broken, or the connection stopped answering.
    The body (the restart) is then cancelled: another replica may take the lock at any moment."""
    import psycopg

    while True:
        await anyio.sleep(HEARTBEAT_SECONDS)
        try:
            with anyio.fail_after(HEARTBEAT_DEADLINE_SECONDS):
                await conn.execute("SELECT 1")
        except (psycopg.Error, TimeoutError) as exc:
            reason = " ".join(str(exc).split()) or f"no answer within {HEARTBEAT_DEADLINE_SECONDS:g}s"
            holding.lost = f"its database connection failed: {reason}"
            log.error("restart lock lost; cancelling the restart", service=service, error=reason)
            body.cancel()
            return
