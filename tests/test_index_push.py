"""Push: a client subscribed to ``incident://index`` hears of an alert posted to a real Alertmanager within
``watch_interval_seconds`` + 2 s, in both eras (2025-11-25 ``resources/subscribe``, 2026-07-28
``subscriptions/listen``), in process, over stdio and over HTTP; nobody subscribed costs no read of the source; a
client that stopped reading holds up nobody else; a source that is down is logged once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceUpdatedNotification

from incident_desk.server import build_server
from tests.alertmanager import Alertmanager, alert, counting_proxy, needs_alertmanager, running_alertmanager
from tests.helpers import ROOT, AppFactory, child_env
from tests.http_desk import TOKEN, run_desk
from tests.test_sources_alertmanager import STARTED, folder_desk

pytestmark = [pytest.mark.anyio, needs_alertmanager]

INDEX = "incident://index"
INTERVAL = 1.0
# What the issue allows between the alert reaching Alertmanager and the client hearing of it.
ALLOWED = INTERVAL + 2.0


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[Alertmanager]:
    with running_alertmanager(tmp_path) as running:
        yield running


def _alert(name: str) -> dict[str, Any]:
    return alert(name, starts=STARTED, service="payments-api", severity="critical")


def _config(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "desk.toml"
    config.write_text(
        f'data_dir = "{folder_desk(tmp_path / "desk")}"\nwatch_interval_seconds = {INTERVAL}\n\n'
        '[[incident_sources]]\nkind = "folder"\n\n'
        f'[[incident_sources]]\nkind = "alertmanager"\nname = "prod"\nurl = "{url}"\ncache_seconds = 0\n',
        encoding="utf-8",
    )
    return config


class Heard:
    """The index updates a 2025 client heard, by a message handler."""

    def __init__(self) -> None:
        self.updates = 0
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification) and message.params.uri == INDEX:
            self.updates += 1
            self.changed.set()

    async def next_update(self) -> float:
        """Seconds until the next update arrives (fails past ALLOWED)."""
        began = time.monotonic()
        with anyio.fail_after(ALLOWED + 5):
            await self.changed.wait()
        self.changed = anyio.Event()
        return time.monotonic() - began


async def _heard_within_allowed(client: Client, mode: str, heard: Heard, manager: Alertmanager) -> float:
    """Subscribe as the era does, post an alert, and return how long until the client heard of it."""
    if mode == "legacy":
        await client.subscribe_resource(INDEX)
        manager.post(_alert("NewPage"))
        return await heard.next_update()
    async with client.listen(resource_subscriptions=[INDEX]) as subscription:
        manager.post(_alert("NewPage"))
        began = time.monotonic()
        with anyio.fail_after(ALLOWED + 5):
            async for event in subscription:
                assert getattr(event, "uri", None) == INDEX
                return time.monotonic() - began
    raise AssertionError("the listen stream ended without an update")


async def test_in_process_a_subscriber_hears_of_a_new_alert_in_time(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    app = make_app(
        data_dir=folder_desk(tmp_path / "desk"),
        incident_sources=[{"kind": "folder"}, {"kind": "alertmanager", "name": "prod", "url": manager.url}],
        watch_interval_seconds=INTERVAL,
    )
    heard = Heard()
    async with Client(build_server(app), mode=era, message_handler=heard) as client:
        waited = await _heard_within_allowed(client, era, heard, manager)
    assert waited <= ALLOWED, waited


async def test_nobody_subscribed_costs_no_read_of_the_source(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path
) -> None:
    with counting_proxy(manager.url) as proxy:
        app = make_app(
            data_dir=folder_desk(tmp_path / "desk"),
            incident_sources=[{"kind": "alertmanager", "name": "prod", "url": proxy.url}],
            watch_interval_seconds=0.2,
        )
        async with Client(build_server(app), mode="legacy") as client:
            await anyio.sleep(1.5)
            idle_reads = proxy.alert_reads
            await client.subscribe_resource(INDEX)
            await anyio.sleep(1.5)
            watched_reads = proxy.alert_reads
            await client.unsubscribe_resource(INDEX)
            await anyio.sleep(0.5)
            after = proxy.alert_reads
            await anyio.sleep(1.5)
            left_alone = proxy.alert_reads
    assert idle_reads == 0
    assert watched_reads >= 3  # the baseline, then one look per interval
    assert left_alone - after <= 1  # a look under way when the subscriber left may finish; then none


async def test_a_client_that_stopped_reading_holds_up_nobody_else(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path
) -> None:
    app = make_app(
        data_dir=folder_desk(tmp_path / "desk"),
        incident_sources=[{"kind": "alertmanager", "name": "prod", "url": manager.url}],
        watch_interval_seconds=INTERVAL,
    )
    server = build_server(app)
    stuck = anyio.Event()

    async def never_returns(message: Any) -> None:
        stuck.set()
        await anyio.sleep_forever()

    heard = Heard()
    async with (
        Client(server, mode="legacy", message_handler=never_returns, read_timeout_seconds=60) as frozen,
        Client(server, mode="legacy", message_handler=heard) as lively,
    ):
        await frozen.subscribe_resource(INDEX)
        await lively.subscribe_resource(INDEX)
        manager.post(_alert("FirstPage"))
        first = await heard.next_update()
        assert stuck.is_set()  # the frozen client got the first update and will read nothing more
        for name in ("SecondPage", "ThirdPage"):
            manager.post(_alert(name))
            assert await heard.next_update() <= ALLOWED
    assert first <= ALLOWED


async def test_a_source_that_is_down_is_logged_once_not_per_look(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    app = make_app(
        data_dir=folder_desk(tmp_path / "desk"),
        incident_sources=[{"kind": "folder"}, {"kind": "alertmanager", "name": "prod", "url": manager.url}],
        watch_interval_seconds=0.2,
    )
    async with Client(build_server(app), mode="legacy") as client:
        await client.subscribe_resource(INDEX)
        manager.stop()
        await anyio.sleep(2.5)
    logged = capfd.readouterr()
    lines = [line for line in (logged.out + logged.err).splitlines() if "incident source down" in line]
    assert len(lines) == 1, lines
    assert "prod" in lines[0]


@asynccontextmanager
async def _stdio_client(tmp_path: Path, url: str, mode: str, heard: Heard) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "incident_desk", "--config", str(_config(tmp_path, url))],
        env=child_env(tmp_path / "audit.sqlite3"),
        cwd=str(ROOT),
    )
    async with Client(stdio_client(params), mode=mode, message_handler=heard) as client:
        yield client


async def test_over_stdio_a_subscriber_hears_of_a_new_alert_in_time(
    manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    heard = Heard()
    mode = "legacy" if era == "legacy" else "auto"
    async with _stdio_client(tmp_path, manager.url, mode, heard) as client:
        assert client.protocol_version == ("2025-11-25" if era == "legacy" else "2026-07-28")
        _declares_subscribe(client)
        waited = await _heard_within_allowed(client, era, heard, manager)
    assert waited <= ALLOWED, waited


def _declares_subscribe(client: Client) -> None:
    """The server declares resources.subscribe (2025: the handler; 2026: subscriptions/listen)."""
    resources = client.server_capabilities.resources
    assert resources is not None and resources.subscribe is True


@pytest.mark.http
async def test_over_http_a_subscriber_hears_of_a_new_alert_in_time(
    manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    heard = Heard()
    config = _config(tmp_path, manager.url)
    with run_desk(tmp_path, "--config", str(config), INCIDENT_DESK_HTTP_TOKEN=TOKEN) as desk:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
            Client(
                streamable_http_client(desk.url, http_client=http),
                mode="legacy" if era == "legacy" else "auto",
                message_handler=heard,
            ) as client,
        ):
            assert client.protocol_version == ("2025-11-25" if era == "legacy" else "2026-07-28")
            _declares_subscribe(client)
            waited = await _heard_within_allowed(client, era, heard, manager)
    assert waited <= ALLOWED, waited


@pytest.mark.http
async def test_a_stateless_desk_refuses_a_2025_subscription_it_could_never_serve(
    manager: Alertmanager, tmp_path: Path
) -> None:
    from mcp.shared.exceptions import MCPError

    config = _config(tmp_path, manager.url)
    with run_desk(tmp_path, "--config", str(config), "--stateless", INCIDENT_DESK_HTTP_TOKEN=TOKEN) as desk:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
            Client(streamable_http_client(desk.url, http_client=http), mode="legacy") as client,
        ):
            with pytest.raises(MCPError, match="stateless HTTP cannot send updates to a 2025-11-25 client"):
                await client.subscribe_resource(INDEX)
            with pytest.raises(MCPError, match="only incident://index can be subscribed to on this desk"):
                await client.subscribe_resource("runbook://db")
