"""Load on real HTTP desks: many clients for a while, and what must hold at the end of it.

Each run takes its size (clients, seconds) as arguments: the suite runs a short smoke of the same path
(tests/test_http_sessions.py, tests/test_team_nginx.py), and ``bench/bench_load.py`` the full runs of 30 seconds
that used to sit in the suite, with the same checks. What a run returns says how much it did, for the bench.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import text_of
from tests.http_desk import TOKEN, Desk, run_desk
from tests.nginx_proxy import running_nginx
from tests.postgres_cluster import PASSWORD
from tests.restart_helpers import approve
from tests.test_team_desk import SEALING_KEY
from tests.test_team_desk import _client as replica_client

REPLICAS = 2


@dataclass(frozen=True)
class LoadDone:
    """What a load run did, for the bench to report: its answered rounds in its seconds."""

    rounds: int
    seconds: float


@asynccontextmanager
async def bearer_client(url: str) -> AsyncIterator[Client]:
    """A 2025-11-25 client holding the test bearer token (tests/http_desk.py's TOKEN)."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client


async def clients_sharing_one_token(tmp_path: Path, clients: int, seconds: float) -> LoadDone:
    """One token, one address, default settings: half the clients long-lived, half reconnecting for every round;
    no error, no wrong answer, no session refused or closed under a live client."""
    errors: list[str] = []
    calls = 0
    with run_desk(tmp_path, INCIDENT_DESK_HTTP_TOKEN=TOKEN) as desk:
        began = time.monotonic()
        stop_at = began + seconds

        async def round_trip(client: Client) -> None:
            nonlocal calls
            listing = await client.call_tool("list_incidents", {})
            log = text_of(await client.read_resource("incident://INC-1043/log"))
            if listing.is_error or "INC-1043" not in text_of(listing) or "search-api" not in log:
                errors.append(f"wrong answer: {text_of(listing)[:200]}")
            calls += 1

        async def long_lived(index: int) -> None:
            try:
                async with bearer_client(desk.url) as client:
                    while time.monotonic() < stop_at:
                        await round_trip(client)
            except Exception as exc:
                errors.append(f"long-lived {index}: {exc!r}")

        async def reconnecting(index: int) -> None:
            while time.monotonic() < stop_at:
                try:
                    async with bearer_client(desk.url) as client:
                        await round_trip(client)
                except Exception as exc:
                    errors.append(f"reconnecting {index}: {exc!r}")

        async with anyio.create_task_group() as group:
            for index in range(clients):
                group.start_soon(long_lived if index % 2 else reconnecting, index)
        took = time.monotonic() - began
        stderr = desk.stderr()
    assert errors == [], errors[:5]
    assert calls >= clients, f"{calls} rounds for {clients} clients"
    assert "refused a new session" not in stderr
    assert "closed a client's least recently used idle session" not in stderr, "no live client lost its session"
    return LoadDone(calls, took)


def balanced_replicas(
    tmp_path: Path, url: str, services: Mapping[str, object], stack: ExitStack
) -> tuple[str, list[Desk]]:
    """Replicas r1 and r2 on the journal at ``url``, behind nginx; the balanced URL and the replicas."""
    env = {
        "INCIDENT_DESK_AUDIT_DB": url,
        "INCIDENT_DESK_AUDIT_DB_PASSWORD": PASSWORD,
        "INCIDENT_DESK_SEALING_KEY": SEALING_KEY,
        "INCIDENT_DESK_SERVICES": json.dumps(services),
        "INCIDENT_DESK_TRUSTED_PROXIES": '["127.0.0.1"]',  # as the guide's config.toml says
    }
    replicas = [
        stack.enter_context(run_desk(tmp_path, name=f"r{n}", INCIDENT_DESK_REPLICA_TAG=f"r{n}", **env))
        for n in range(1, REPLICAS + 1)
    ]
    return stack.enter_context(running_nginx([replica.port for replica in replicas])), replicas


def journal_tickets(url: str) -> dict[str, set[str]]:
    """Every ticket in the journal with its outcomes, read straight from PostgreSQL rather than through a desk."""
    import psycopg

    tickets: dict[str, set[str]] = {}
    with psycopg.connect(url, password=PASSWORD) as conn:
        for ticket, outcome in conn.execute("SELECT ticket, outcome FROM decisions"):
            tickets.setdefault(ticket, set()).add(outcome)
    return tickets


async def replicas_behind_nginx(tmp_path: Path, url: str, clients_per_replica: int, seconds: float) -> LoadDone:
    """Two replicas on the journal at ``url`` behind nginx, each client approving simulated restarts of its own
    service in both eras: no error, every returned decision journalled (approved, then simulated) by exactly one
    replica, and each replica deciding at least a quarter of them."""
    load_services = [f"svc-{n:02d}" for n in range(REPLICAS * clients_per_replica)]
    services = {name: {"kind": "simulate"} for name in load_services}
    errors: list[str] = []
    returned: list[str] = []  # the ticket of every restart decision a client was told about
    reads = 0
    with ExitStack() as stack:
        balanced, replicas = balanced_replicas(tmp_path, url, services, stack)
        began = time.monotonic()
        stop_at = began + seconds

        async def client_loop(index: int) -> None:
            nonlocal reads
            mode = "legacy" if index % 2 else "2026-07-28"
            service = load_services[index]
            calls = 0
            while time.monotonic() < stop_at:
                ticket = f"CHG-{index}-{calls}"
                calls += 1
                try:
                    async with replica_client(balanced, mode, elicitation_callback=approve(ticket)) as client:
                        listing = await client.call_tool("list_incidents", {})
                        restart = await client.call_tool("restart_service", {"service": service})
                except Exception as exc:
                    errors.append(f"{mode} {ticket}: {exc!r}")
                    continue
                if listing.is_error or "INC-1043" not in text_of(listing):
                    errors.append(f"{mode} list_incidents: {text_of(listing)}")
                reads += 1
                text = text_of(restart)
                if not text.startswith(f"RESTARTED {service} under {ticket} (simulated)"):
                    errors.append(f"{mode} {ticket}: {text}")
                else:
                    returned.append(ticket)

        async with anyio.create_task_group() as group:
            for index in range(len(load_services)):
                group.start_soon(client_loop, index)
        took = time.monotonic() - began
        # What each replica says it decided, from its own log: nginx spread the load over both.
        simulated_by = [
            {ticket for outcome, ticket in replica.logged_decisions() if outcome == "simulated"} for replica in replicas
        ]
    recorded = journal_tickets(url)
    assert errors == [], errors[:5]
    assert len(returned) >= len(load_services) and reads >= len(load_services), (len(returned), reads)
    # Each returned restart was journalled twice (approved, then simulated) before its result came back.
    assert sum(len(outcomes) for outcomes in recorded.values()) == 2 * len(returned)
    missing = [ticket for ticket in returned if recorded.get(ticket) != {"approved", "simulated"}]
    assert missing == [], missing[:5]
    # Every returned decision was made by exactly one replica, and each replica made at least a quarter of them.
    assert simulated_by[0].isdisjoint(simulated_by[1])
    assert simulated_by[0] | simulated_by[1] == set(returned)
    shares = [len(tickets) / len(returned) for tickets in simulated_by]
    assert min(shares) >= 0.25, shares
    return LoadDone(len(returned), took)
