"""The memory knows the desk's history from the start: a fresh desk's first find_similar_incidents finds incidents
of the same kind (the data folder's and the sources', remembered in the background at start and waited for before
it answers), never lists an incident still open as past, and ranks an unrelated alert below same-kind incidents."""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from incident_desk.server import build_server
from tests.alertmanager import Alertmanager, alert, needs_alertmanager, running_alertmanager
from tests.helpers import AppFactory, connect, text_of
from tests.memory_corpus import log_head

pytestmark = [pytest.mark.anyio, needs_alertmanager]

STARTED = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[Alertmanager]:
    with running_alertmanager(tmp_path) as running:
        yield running


def _desk(root: Path) -> Path:
    """Resolved incidents of two kinds, and two open ones of the first kind."""
    entries = {
        "INC-1": ("Workers OOMKilled", "billing", "resolved", "oom", 1),
        "INC-2": ("No space left", "billing", "resolved", "disk_full", 2),
        "INC-3": ("Memory limit exceeded again", "billing", "open", "oom", 3),
        "INC-4": ("Pods OOMKilled", "checkout", "open", "oom", 4),
        "INC-5": ("Out of memory in workers", "media", "closed", "oom", 5),
    }
    for incident_id, (title, service, status, kind, seed) in entries.items():
        entry = root / "incidents" / incident_id
        entry.mkdir(parents=True)
        resolution = 'resolution = "raised the memory limit to 2Gi"\n' if status != "open" else ""
        (entry / "incident.toml").write_text(
            f'title = "{title}"\nservice = "{service}"\nseverity = "SEV2"\nstatus = "{status}"\n'
            f"opened = 2026-01-0{seed}T00:00:00Z\n{resolution}"
        )
        (entry / "log.txt").write_bytes(log_head(kind, random.Random(seed)))
    return root


async def test_a_fresh_desk_finds_same_kind_history_on_its_first_call(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    unrelated = alert(
        "TargetDown", starts=STARTED, service="billing", severity="critical", summary="Billing target down again"
    )
    manager.post(unrelated, alert("QueueBacklog", starts=STARTED, service="billing", summary="Billing queue backlog"))
    desk = _desk(tmp_path / "desk")
    sources = [{"kind": "folder"}, {"kind": "alertmanager", "name": "prod", "url": manager.url, "cache_seconds": 0}]
    earlier = make_app(data_dir=desk, incident_sources=sources)  # the desk's last run served the alerts only
    alert_ids = sorted(key for key in earlier.sources.listing().incidents if key.startswith("prod-"))
    for alert_id in alert_ids:
        await earlier.incident(alert_id)
    assert earlier.memory is not None and earlier.memory.wait_idle()
    assert earlier.memory.memory.count() == 2
    manager.post({**unrelated, "endsAt": datetime.now(UTC).isoformat()})  # then TargetDown resolved: it is past
    app = make_app(data_dir=desk, incident_sources=sources)
    async with connect(build_server(app), era) as client:
        first = await client.call_tool("find_similar_incidents", {"incidentId": "INC-3", "limit": 10})
        by_words = await client.call_tool("find_similar_incidents", {"query": "OOMKilled memory limit", "limit": 10})
    assert not first.is_error, text_of(first)
    found = [entry["incident_id"] for entry in first.structured_content["incidents"]]
    assert found[:2] in (["INC-1", "INC-5"], ["INC-5", "INC-1"]), text_of(first)
    assert not {"INC-3", "INC-4"} & set(found), "an incident still open is not past"
    firing = set(alert_ids) - set(found)
    assert len(firing) == 1, "the alert still firing is not past; the resolved one is"
    past_alert = next(incident_id for incident_id in found if incident_id.startswith("prod-"))
    assert found.index(past_alert) > 1, f"an unrelated alert above same-kind incidents: {text_of(first)}"
    (shown,) = [entry for entry in first.structured_content["incidents"] if entry["incident_id"] == past_alert]
    assert shown["status"] == "last seen firing" and f"{past_alert} [last seen firing, opened " in text_of(first)
    words = [entry["incident_id"] for entry in by_words.structured_content["incidents"]]
    assert words[:2] in (["INC-1", "INC-5"], ["INC-5", "INC-1"]) and not {"INC-3", "INC-4"} & set(words)
    assert "still remembering" not in text_of(first)


async def test_a_first_answer_that_cannot_wait_for_the_history_says_so(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start-up pass is slow (a source slow to list everything): the first answer waits a bounded time, then
    says the desk is still remembering rather than pass for the whole history; once the pass is done, it does not."""
    from incident_desk.features import memory as memory_feature

    monkeypatch.setattr(memory_feature, "LEARN_WAIT_SECONDS", 0.3)
    app = make_app(data_dir=_desk(tmp_path / "desk"))
    release = threading.Event()
    assert app.memory is not None
    real = app.memory._look
    assert real is not None

    def slow() -> Any:
        release.wait(30)
        return real()

    monkeypatch.setattr(app.memory, "_look", slow)
    async with connect(build_server(app), "legacy") as client:
        early = await client.call_tool("find_similar_incidents", {"query": "OOMKilled memory limit"})
        release.set()
        assert app.memory is not None and app.memory.learnt(30)
        later = await client.call_tool("find_similar_incidents", {"query": "OOMKilled memory limit"})
    assert not early.is_error and text_of(early).splitlines()[-1].startswith(
        "(the desk is still remembering its history: "
    )
    assert "still remembering" not in text_of(later)
    assert [entry["incident_id"] for entry in later.structured_content["incidents"]][:2] in (
        ["INC-1", "INC-5"],
        ["INC-5", "INC-1"],
    )


async def test_a_served_desk_learns_its_history_in_the_background_after_the_handshake(tmp_path: Path) -> None:
    """Over stdio, the first request after initialize (here tools/list, which reads no incident) starts the pass:
    the folder's five incidents are remembered without anything listing them."""
    import sqlite3
    import sys
    import time

    from mcp import Client, StdioServerParameters

    from tests.helpers import ROOT, child_env

    audit = tmp_path / "audit.sqlite3"
    env = child_env(audit, INCIDENT_DESK_DATA_DIR=str(_desk(tmp_path / "desk")))
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    remembered = 0
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        deadline = time.monotonic() + 60
        while remembered < 5 and time.monotonic() < deadline:
            await anyio.sleep(0.2)
            with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(audit)) as db:
                remembered = db.execute("SELECT COUNT(*) FROM memory").fetchone()[0]
    assert remembered == 5
