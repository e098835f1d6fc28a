"""The one async face (DeskApp): features read through it and never on the event loop, and never pick threads."""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from incident_desk.core.incidents import DataFolder, Listing
from incident_desk.server import build_server
from tests.faulty_neighbour import faulty_neighbour
from tests.helpers import ROOT, AppFactory, connect, pinging, synthetic_incidents, text_of

pytestmark = pytest.mark.anyio

INCIDENTS = 10_000


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory in memory when the machine has one: writing 30,000 entries to a busy CI disk takes 20-45 s,
    to tmpfs 1.5 s; the desk's looks at it cost the same either way."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        yield tmp_path
        return
    made = Path(tempfile.mkdtemp(dir=shm, prefix="incident-desk-test-"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


@pytest.mark.timing
async def test_the_timeline_looks_at_ten_thousand_incidents_off_the_loop(
    make_app: AppFactory, fast_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a writer filing incidents meanwhile, every look at the directory is made in a worker thread and a
    ping answers within 0.5 s (at main, the timeline listed the directory on the loop: pings of 1.2-1.5 s)."""
    root = synthetic_incidents(fast_dir / "desk", INCIDENTS)
    looked_from: list[bool] = []
    real_listing = DataFolder.listing

    def recorded(self: DataFolder) -> Listing:
        looked_from.append(threading.current_thread() is threading.main_thread())
        return real_listing(self)

    monkeypatch.setattr(DataFolder, "listing", recorded)
    app = make_app(data_dir=root)
    writing = threading.Event()

    def writer() -> None:
        number = INCIDENTS
        while not writing.is_set():
            entry = root / "incidents" / f"INC-{number}"
            entry.mkdir()
            (entry / "log.txt").write_text("line\n")
            (entry / "incident.toml").write_text(
                'title="t"\nservice="svc"\nseverity="SEV3"\nstatus="open"\nopened=2026-01-01T00:00:00Z\n'
            )
            number += 1
            time.sleep(0.01)

    async with connect(build_server(app), "legacy") as client:
        await client.call_tool("show_incident_timeline", {"incidentId": "INC-1"})  # features and readers loaded
        looked_from.clear()
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        try:
            async with pinging(client) as latencies:
                ends = time.perf_counter() + 3  # three seconds of timelines: a few fresh looks at the directory
                number = 0
                while time.perf_counter() < ends:
                    shown = await client.call_tool("show_incident_timeline", {"incidentId": f"INC-{number}"})
                    assert not shown.is_error, text_of(shown)
                    number += 1
        finally:
            writing.set()
            thread.join()
    assert looked_from and not any(looked_from), "the data directory was listed on the event loop"
    assert len(latencies) >= 5 and max(latencies) < 0.5, f"slowest ping {max(latencies):.2f}s"


@pytest.mark.timing
async def test_a_folder_incident_never_waits_on_a_hanging_source(make_app: AppFactory, tmp_path: Path) -> None:
    root = synthetic_incidents(tmp_path / "desk", 1)
    with faulty_neighbour("hang") as neighbour:
        source = {"kind": "alertmanager", "name": "prod", "url": neighbour.url, "timeout_seconds": 30}
        app = make_app(data_dir=root, incident_sources=[{"kind": "folder"}, source])
        async with connect(build_server(app), "legacy") as client:
            began = time.perf_counter()
            shown = await client.call_tool("show_incident_timeline", {"incidentId": "INC-0"})
            page = await client.call_tool("read_incident_log", {"incidentId": "INC-0"})
            took = time.perf_counter() - began
        assert neighbour.requests == 0, "a folder incident asked the Alertmanager"
    assert not shown.is_error and not page.is_error
    assert took < 10, f"{took:.1f}s: the calls waited toward the hanging source's 30 s deadline"


@pytest.mark.timing
async def test_a_source_another_request_is_asking_is_named_as_still_loading(
    make_app: AppFactory, tmp_path: Path
) -> None:
    """A completion does not wait for a source another request is asking: it lists the folders, and the source's
    own incidents are named as still loading rather than unknown."""
    root = synthetic_incidents(tmp_path / "desk", 1)
    with faulty_neighbour("hang") as neighbour:
        source = {"kind": "alertmanager", "name": "prod", "url": neighbour.url, "timeout_seconds": 10}
        app = make_app(data_dir=root, incident_sources=[{"kind": "folder"}, source])
        async with anyio.create_task_group() as group:
            group.start_soon(app.listing)  # asks the source, for its whole deadline
            await anyio.sleep(0.3)
            began = time.perf_counter()
            listing = await app.listing(wait=0.2)
            took = time.perf_counter() - began
            group.cancel_scope.cancel()
    assert sorted(listing.incidents) == ["INC-0"]
    (problem,) = listing.problems
    assert problem.entry == "source prod"
    assert re.fullmatch(
        rf"alertmanager 'prod' at {neighbour.url} is still loading \(asked \d+\.\ds ago; it gets 10s to answer\)",
        problem.reason,
    ), problem.reason
    assert took < 3, f"{took:.1f}s: the completion waited toward the source's 10 s deadline"


def test_features_never_choose_their_own_threads_or_call_the_desk_directly() -> None:
    """Every read goes through DeskApp's async face: no feature module runs threads or reaches past it (the
    journal's restart locks are async already and stay where the restart feature holds them)."""
    forbidden = re.compile(r"to_thread|CapacityLimiter|app\.sources\.|app\.journal\.(?!locks\.)")
    offenders = [
        f"{module.name}: {found.group()}"
        for module in sorted((ROOT / "incident_desk" / "features").glob("*.py"))
        for found in forbidden.finditer(module.read_text(encoding="utf-8"))
    ]
    assert offenders == []
