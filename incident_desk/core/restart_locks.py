"""Who may restart a service right now: at most one restart of a service at a time.

An embedded (SQLite) desk is one process, so a set in memory is enough. Replicas sharing a PostgreSQL journal
share its locks instead: a session-level advisory lock held on a dedicated connection, which the database drops by
itself when the holder dies (its connection closes) or hangs (``idle_session_timeout`` outlives no heartbeat).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import anyio
import structlog

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Holder:
    """Who holds a service's restart, and since when."""

    who: str
    since: datetime | None

    def describe(self) -> str:
        since = "an unknown time" if self.since is None else self.since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        return f"held by {self.who} since {since}"


class ServiceBusy(Exception):
    """Another restart of the service is running; ``holder`` says whose and since when."""

    def __init__(self, service: str, holder: Holder) -> None:
        super().__init__(f"a restart of {service} is already running ({holder.describe()})")
        self.service = service
        self.holder = holder


class RestartLocks(Protocol):
    def hold(self, service: str, who: str) -> AbstractAsyncContextManager[None]:
        """Hold ``service`` for the body; raise ``ServiceBusy`` at once if someone else holds it."""


def this_replica() -> str:
    """How a holder is named to the others: the host and process that run the restart."""
    return f"{socket.gethostname()} pid {os.getpid()}"


class ProcessLocks:
    """The restarts running in this process."""

    def __init__(self) -> None:
        self._held: dict[str, Holder] = {}

    @asynccontextmanager
    async def hold(self, service: str, who: str) -> AsyncIterator[None]:
        if service in self._held:
            raise ServiceBusy(service, self._held[service])
        self._held[service] = Holder(who, datetime.now(UTC))
        try:
            yield
        finally:
            del self._held[service]


HEARTBEAT_SECONDS = 2.0
# A holder that stops answering (a hung replica) loses its session, and so its lock, after this long.
IDLE_SESSION_TIMEOUT = "10s"


class PostgresLocks:
    """Advisory locks shared by every replica on one PostgreSQL journal; ``connect`` opens a fresh connection."""

    def __init__(self, conninfo: str, location: str, error: type[Exception]) -> None:
        self._conninfo = conninfo
        self._location = location
        self._error = error

    @asynccontextmanager
    async def hold(self, service: str, who: str) -> AsyncIterator[None]:
        import psycopg

        key = f"incident-desk restart:{service}"
        try:
            # Dedicated and never pooled: a session lock outlives a checkout, and is re-entrant per connection.
            conn = await psycopg.AsyncConnection.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=5,
                application_name="incident-desk restart lock",
                options=f"-c idle_session_timeout={IDLE_SESSION_TIMEOUT} -c tcp_keepalives_idle=10 "
                "-c tcp_keepalives_interval=5 -c tcp_keepalives_count=3",
            )
        except psycopg.Error as exc:
            raise self._error(f"audit journal {self._location} cannot be written: {exc}") from None
        locked = False
        try:
            try:
                cursor = await conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,))
                row = await cursor.fetchone()
                if row is None or not row[0]:
                    cursor = await conn.execute(
                        "SELECT holder, since FROM restart_holders WHERE service = %s", (service,)
                    )
                    found = await cursor.fetchone()
                    holder = Holder(found[0], found[1]) if found else Holder("another replica", None)
                    raise ServiceBusy(service, holder)
                locked = True
                await conn.execute(
                    "INSERT INTO restart_holders (service, holder, since) VALUES (%s, %s, now()) "
                    "ON CONFLICT (service) DO UPDATE SET holder = excluded.holder, since = excluded.since",
                    (service, who),
                )
            except psycopg.Error as exc:
                raise self._error(f"audit journal {self._location} cannot be written: {exc}") from None
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_heartbeat, conn, service)
                try:
                    yield
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if locked:
                    # Unlock before closing: a closed session's backend frees its locks only as it exits, after
                    # close() returns, and the next restart of this service must not find them still held.
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
                await conn.close()  # the session's end releases the lock anyway, should the unlock have failed


async def _heartbeat(conn: object, service: str) -> None:
    """Keep the lock's session busy enough that ``idle_session_timeout`` ends only a hung holder's."""
    import psycopg

    assert isinstance(conn, psycopg.AsyncConnection)
    while True:
        await anyio.sleep(HEARTBEAT_SECONDS)
        try:
            await conn.execute("SELECT 1")
        except psycopg.Error as exc:
            # A database restart frees the lock silently: say so, since another replica may now restart too.
            log.error("restart lock lost", service=service, error=str(exc))
            return
