"""list_incidents a page at a time, and incident://index bounded: 20,000 alerts of a real Alertmanager never make
one answer, and the loop keeps answering while the desk fetches, sorts and pages them."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client

from incident_desk.server import build_server
from tests.alertmanager import BINARY, Alertmanager, alert, needs_alertmanager, running_alertmanager
from tests.helpers import AppFactory, connect, pinging, synthetic_incidents, text_of
from tests.test_sources_alertmanager import folder_desk

pytestmark = pytest.mark.anyio

ALERTS = 20_000
STARTED = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
PING_WITHIN = 0.5


@pytest.fixture(scope="module")
def loaded_manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    """One Alertmanager holding 20,000 firing alerts, posted a thousand at a time."""
    if BINARY is None:
        pytest.skip("prometheus-alertmanager is not installed")
    with running_alertmanager(tmp_path_factory.mktemp("alertmanager")) as manager:
        for first in range(0, ALERTS, 1000):
            batch = [
                alert(
                    "HighLatency",
                    starts=STARTED,
                    service=f"svc-{number % 50}",
                    instance=f"host-{number}",
                    severity="critical",
                    summary=f"p99 over SLO on host-{number}",
                )
                for number in range(first, first + 1000)
            ]
            answer = httpx2.post(manager.url + "/api/v2/alerts", json=batch, timeout=30)
            assert answer.status_code == 200, answer.text
        yield manager


def _trivial(client: Client, era: str) -> Any:
    """Something trivial to ask while the desk works: a ping where the era has one, else the tool list."""
    return client.send_ping if era == "legacy" else client.list_tools


@needs_alertmanager
@pytest.mark.timing
async def test_twenty_thousand_alerts_come_a_page_at_a_time_while_the_loop_keeps_answering(
    make_app: AppFactory, loaded_manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    source = {
        "kind": "alertmanager",
        "name": "prod",
        "url": loaded_manager.url,
        "timeout_seconds": 30,
        "max_response_bytes": 64 * 1024 * 1024,
    }
    app = make_app(data_dir=folder_desk(tmp_path / "desk"), incident_sources=[{"kind": "folder"}, source])
    async with connect(build_server(app), era) as client:
        async with pinging(client, asks=(_trivial(client, era),)) as latencies:
            began = time.monotonic()
            first = await client.call_tool("list_incidents", {})
            took = time.monotonic() - began
            index = text_of(await client.read_resource("incident://index")).splitlines()
        assert latencies, "the pings did not run"
        assert max(latencies) < PING_WITHIN, f"slowest answer {max(latencies):.2f}s while listing (took {took:.1f}s)"
        assert not first.is_error, text_of(first)
        page = first.structured_content
        second = await client.call_tool("list_incidents", {"cursor": page["next_cursor"]})
        resumed = await client.call_tool("list_incidents", {"cursor": index[999], "limit": 1})
    later = second.structured_content
    assert page["total"] == later["total"] == ALERTS + 1
    ids = [entry["id"] for entry in page["incidents"]]
    assert len(ids) == 50 and ids == sorted(ids) and ids[0] == "INC-1"
    assert page["next_cursor"] == ids[-1]
    assert text_of(first).splitlines()[-1] == (
        f"(incidents 1-50 of {ALERTS + 1}: more follows; call again with cursor={ids[-1]})"
    )
    next_ids = [entry["id"] for entry in later["incidents"]]
    assert len(next_ids) == 50 and next_ids[0] > ids[-1] and next_ids == sorted(next_ids)
    assert text_of(second).splitlines()[-1].startswith(f"(incidents 51-100 of {ALERTS + 1}: more follows;")
    more = ALERTS + 1 - 1000
    assert len(index) == 1001 and index[:50] == ids and index[50:100] == next_ids
    assert index[-1] == f"({more} more open incidents: call list_incidents with cursor={index[999]} for them)"
    assert resumed.structured_content["incidents"][0]["id"] > index[999]


async def test_the_pages_walk_every_incident_once_even_as_incidents_come_and_go(
    make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    root = synthetic_incidents(tmp_path / "desk", 120)
    app = make_app(data_dir=root, data_freshness_seconds=0)
    everything = sorted(f"INC-{number}" for number in range(120))
    seen: list[str] = []
    texts: list[str] = []
    async with connect(build_server(app), era) as client:
        cursor = None
        while True:
            arguments: dict[str, Any] = {"limit": 50} if cursor is None else {"limit": 50, "cursor": cursor}
            answer = await client.call_tool("list_incidents", arguments)
            assert not answer.is_error, text_of(answer)
            seen += [entry["id"] for entry in answer.structured_content["incidents"]]
            texts.append(text_of(answer).splitlines()[-1])
            cursor = answer.structured_content["next_cursor"]
            if cursor is None:
                break
            if len(seen) == 50:  # between pages an incident already shown leaves, and one not yet shown comes
                shutil.rmtree(root / "incidents" / everything[0])
                filed = root / "incidents" / "INC-99999"
                filed.mkdir()
                (filed / "log.txt").write_text("line\n")
                (filed / "incident.toml").write_text(
                    'title="t"\nservice="svc"\nseverity="SEV3"\nstatus="open"\nopened=2026-01-01T00:00:00Z\n'
                )
    assert seen == sorted([*everything, "INC-99999"])
    assert texts == [
        "(incidents 1-50 of 120: more follows; call again with cursor=" + seen[49] + ")",
        "(incidents 50-99 of 120: more follows; call again with cursor=" + seen[99] + ")",
        "(incidents 100-120 of 120: end of the list)",
    ]


async def test_a_cursor_that_is_not_an_incident_id_is_refused_by_name(make_app: AppFactory, era: str) -> None:
    async with connect(build_server(make_app()), era) as client:
        bad = await client.call_tool("list_incidents", {"cursor": "../INC-1042"})
        long = await client.call_tool("list_incidents", {"cursor": "INC-" + "9" * 5000})
        past = await client.call_tool("list_incidents", {"cursor": "ZZZ"})
        whole = await client.call_tool("list_incidents", {})
    assert (
        bad.is_error and text_of(bad) == "malformed cursor '../INC-1042': expected the next_cursor of a previous page"
    )
    assert long.is_error and "cursor" in text_of(long) and "9" * 100 not in text_of(long)
    assert not past.is_error and text_of(past) == "No open incidents after cursor ZZZ."
    assert past.structured_content["total"] == 2 and past.structured_content["next_cursor"] is None
    assert text_of(whole).splitlines() == [
        line for line in text_of(whole).splitlines() if not line.startswith("(incidents")
    ], "a listing that fits one page says nothing about pages"
