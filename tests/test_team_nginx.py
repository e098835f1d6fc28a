"""Two desk replicas behind Debian's nginx, configured by the shipped deploy/nginx.conf, one PostgreSQL journal.

2025-11-25 stateful sessions stay on the replica that made them (its tag in the session id); 2026-07-28 requests
go anywhere; under load through the balancer nothing fails and every decision returned has its journal row.
Behind nginx each desk still counts sessions per real client, from the X-Forwarded-For nginx sets.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path

import anyio
import httpx2
import pytest

from incident_desk.http.sessions import HANDSHAKE_GRACE_SECONDS
from tests.helpers import text_of
from tests.http_desk import Desk, open_session, ping, run_desk
from tests.nginx_proxy import running_nginx
from tests.nginx_proxy import unavailable_reason as nginx_unavailable
from tests.postgres_cluster import PASSWORD, Cluster
from tests.postgres_cluster import unavailable_reason as postgres_unavailable
from tests.restart_helpers import SERVICE, Restarts, approve
from tests.restart_helpers import restarts_fixture as restarts_fixture
from tests.test_team_desk import SEALING_KEY, _client

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.http,
    pytest.mark.skipif(postgres_unavailable() is not None, reason=str(postgres_unavailable())),
    pytest.mark.skipif(nginx_unavailable() is not None, reason=str(nginx_unavailable())),
]

REPLICAS = 2
CLIENTS_PER_REPLICA = 25
LOAD_SERVICES = [f"svc-{n:02d}" for n in range(REPLICAS * CLIENTS_PER_REPLICA)]


def _balanced(tmp_path: Path, url: str, services: Mapping[str, object], stack: ExitStack) -> tuple[str, list[Desk]]:
    """Replicas r1 and r2 on one journal, behind nginx; the balanced URL and the replicas."""
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


def _initialize_session_id(url: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    response = httpx2.post(url, json=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return str(response.headers["mcp-session-id"])


async def test_2025_stateful_sessions_live_their_whole_life_through_nginx(
    tmp_path: Path, postgres_cluster: Cluster, restarts: Restarts
) -> None:
    url = postgres_cluster.new_database(f"desk_{uuid.uuid4().hex[:12]}")
    with ExitStack() as stack:
        balanced, _ = _balanced(tmp_path, url, restarts.services(), stack)
        tags = {_initialize_session_id(balanced).split(".", 1)[0] for _ in range(4)}
        texts = []
        for _ in range(4):  # round robin spreads the sessions over both replicas
            async with _client(balanced, "legacy", elicitation_callback=approve()) as client:
                await client.list_tools()
                log = text_of(await client.read_resource("incident://INC-1043/log"))
                # The approval question travels on the open call's stream: the session's own replica must answer.
                restart = text_of(await client.call_tool("restart_service", {"service": SERVICE}))
                listing = text_of(await client.call_tool("list_incidents", {}))
                texts.append((log, restart, listing))
    assert tags == {"r1", "r2"}
    for log, restart, listing in texts:
        assert "search-api" in log and "INC-1043" in listing
        assert restart.startswith("RESTARTED payments-api under CHG-2291"), restart
    assert restarts.executions() == [SERVICE] * 4


async def test_2026_calls_through_nginx_finish_approvals_on_any_replica(
    tmp_path: Path, postgres_cluster: Cluster, restarts: Restarts
) -> None:
    url = postgres_cluster.new_database(f"desk_{uuid.uuid4().hex[:12]}")
    with ExitStack() as stack:
        balanced, _ = _balanced(tmp_path, url, restarts.services(), stack)
        texts = []
        for _ in range(4):
            async with _client(balanced, "2026-07-28", elicitation_callback=approve()) as client:
                texts.append(text_of(await client.call_tool("restart_service", {"service": SERVICE})))
    assert all(text.startswith("RESTARTED payments-api under CHG-2291") for text in texts), texts
    assert restarts.executions() == [SERVICE] * 4


@pytest.mark.slow
async def test_two_replicas_and_25_clients_each_for_30_seconds_through_nginx(
    tmp_path: Path, postgres_cluster: Cluster
) -> None:
    url = postgres_cluster.new_database(f"desk_{uuid.uuid4().hex[:12]}")
    services = {name: {"kind": "simulate"} for name in LOAD_SERVICES}
    errors: list[str] = []
    returned: list[str] = []  # the ticket of every restart decision a client was told about
    reads = 0
    with ExitStack() as stack:
        balanced, replicas = _balanced(tmp_path, url, services, stack)
        stop_at = time.monotonic() + 30

        async def client_loop(index: int) -> None:
            nonlocal reads
            mode = "legacy" if index % 2 else "2026-07-28"
            service = LOAD_SERVICES[index]
            calls = 0
            while time.monotonic() < stop_at:
                ticket = f"CHG-{index}-{calls}"
                calls += 1
                try:
                    async with _client(balanced, mode, elicitation_callback=approve(ticket)) as client:
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
            for index in range(len(LOAD_SERVICES)):
                group.start_soon(client_loop, index)
        # What each replica says it decided, from its own log: nginx spread the load over both.
        simulated_by = [
            {ticket for outcome, ticket in replica.logged_decisions() if outcome == "simulated"} for replica in replicas
        ]
    recorded = _tickets(url)
    assert errors == []
    assert len(returned) >= len(LOAD_SERVICES) and reads >= len(LOAD_SERVICES)
    # Each returned restart was journalled twice (approved, then simulated) before its result came back.
    assert sum(len(outcomes) for outcomes in recorded.values()) == 2 * len(returned)
    missing = [ticket for ticket in returned if recorded.get(ticket) != {"approved", "simulated"}]
    assert missing == []
    # Every returned decision was made by exactly one replica, and each replica made at least a quarter of them.
    assert simulated_by[0].isdisjoint(simulated_by[1])
    assert simulated_by[0] | simulated_by[1] == set(returned)
    shares = [len(tickets) / len(returned) for tickets in simulated_by]
    assert min(shares) >= 0.25, shares


def test_behind_nginx_sessions_are_counted_per_real_client(tmp_path: Path) -> None:
    """Idle cap 1, clients on 127.0.0.2 and 127.0.0.3: a new session from .2 closes only .2's idle one, whatever
    .2 claims in its own forwarded headers."""
    env = {"INCIDENT_DESK_TRUSTED_PROXIES": '["127.0.0.1"]', "INCIDENT_DESK_HTTP_MAX_SESSIONS_PER_CLIENT": "1"}
    spoofed = {"X-Forwarded-For": "127.0.0.3", "Forwarded": "for=127.0.0.3"}
    with (
        run_desk(tmp_path, **env) as desk,
        running_nginx([desk.port, desk.port]) as balanced,  # both upstreams are this one desk
        httpx2.Client(timeout=10, transport=httpx2.HTTPTransport(local_address="127.0.0.2")) as second,
        httpx2.Client(timeout=10, transport=httpx2.HTTPTransport(local_address="127.0.0.3")) as third,
    ):
        first_of_second = open_session(second, balanced, **spoofed).headers["mcp-session-id"]
        only_of_third = open_session(third, balanced).headers["mcp-session-id"]
        time.sleep(HANDSHAKE_GRACE_SECONDS + 0.5)
        assert open_session(second, balanced, **spoofed).status_code == 200
        statuses = [ping(second, balanced, first_of_second), ping(third, balanced, only_of_third)]
    assert statuses == [404, 200]


def _tickets(url: str) -> dict[str, set[str]]:
    """Every ticket in the journal with its outcomes, read straight from PostgreSQL rather than through a desk."""
    import psycopg

    tickets: dict[str, set[str]] = {}
    with psycopg.connect(url, password=PASSWORD) as conn:
        for ticket, outcome in conn.execute("SELECT ticket, outcome FROM decisions"):
            tickets.setdefault(ticket, set()).add(outcome)
    return tickets
