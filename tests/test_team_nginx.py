"""Two desk replicas behind Debian's nginx, configured by the shipped deploy/nginx.conf, one PostgreSQL journal.

2025-11-25 stateful sessions stay on the replica that made them (its tag in the session id); 2026-07-28 requests
go anywhere; under load through the balancer nothing fails and every decision returned has its journal row.
Behind nginx each desk still counts sessions per real client, from the X-Forwarded-For nginx sets.
"""

from __future__ import annotations

import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import httpx2
import pytest

from incident_desk.http.sessions import HANDSHAKE_GRACE_SECONDS
from tests.helpers import text_of
from tests.http_desk import open_session, ping, run_desk
from tests.load_runs import balanced_replicas, replicas_behind_nginx
from tests.nginx_proxy import running_nginx
from tests.nginx_proxy import unavailable_reason as nginx_unavailable
from tests.postgres_cluster import Cluster
from tests.postgres_cluster import unavailable_reason as postgres_unavailable
from tests.restart_helpers import SERVICE, Restarts, approve
from tests.restart_helpers import restarts_fixture as restarts_fixture
from tests.test_team_desk import _client

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.http,
    pytest.mark.skipif(postgres_unavailable() is not None, reason=str(postgres_unavailable())),
    pytest.mark.skipif(nginx_unavailable() is not None, reason=str(nginx_unavailable())),
]


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
        balanced, _ = balanced_replicas(tmp_path, url, restarts.services(), stack)
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
        balanced, _ = balanced_replicas(tmp_path, url, restarts.services(), stack)
        texts = []
        for _ in range(4):
            async with _client(balanced, "2026-07-28", elicitation_callback=approve()) as client:
                texts.append(text_of(await client.call_tool("restart_service", {"service": SERVICE})))
    assert all(text.startswith("RESTARTED payments-api under CHG-2291") for text in texts), texts
    assert restarts.executions() == [SERVICE] * 4


async def test_two_replicas_and_5_clients_each_for_3_seconds_through_nginx(
    tmp_path: Path, postgres_database: str
) -> None:
    """The path of bench/bench_load.py's 25 clients per replica for 30 seconds, briefly."""
    await replicas_behind_nginx(tmp_path, postgres_database, clients_per_replica=5, seconds=3)


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
