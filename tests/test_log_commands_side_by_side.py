"""Log commands of different incidents run side by side, up to a bound; a burst for one incident runs it once.

Four 2-second log commands used to finish at 2, 4, 6 and 8 s: one lock per service held while its command ran.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from incident_desk.core.incidents import DataFolder
from incident_desk.core.sources import IncidentSources
from incident_desk.core.sources.config import CommandLogConfig
from incident_desk.core.sources.logs import LOG_COMMANDS_AT_ONCE, CommandLog, CommandSlots, LogSourceError
from incident_desk.server import build_server
from incident_desk.settings.model import load_settings
from tests.alertmanager import Alertmanager, alert, needs_alertmanager, running_alertmanager
from tests.helpers import AppFactory, connect, text_of
from tests.test_sources_alertmanager import folder_desk

pytestmark = pytest.mark.anyio

STARTED = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
OPENED = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
# Each run appends a line to the file named by its first argument, then takes two seconds to print its incident.
SLOW_LOG = "import sys, time\nopen(sys.argv[1], 'a').write('ran\\n')\ntime.sleep(2)\nprint(sys.argv[2], 'log line')"


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[Alertmanager]:
    with running_alertmanager(tmp_path) as running:
        yield running


def slow_log(runs: Path, **extra: Any) -> dict[str, Any]:
    return {"kind": "command", "argv": [sys.executable, "-c", SLOW_LOG, str(runs), "{incident}"], **extra}


@needs_alertmanager
async def test_four_two_second_log_commands_finish_together(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    manager.post(*(alert("HighLatency", starts=STARTED, service="payments", instance=f"host-{n}") for n in range(4)))
    runs = tmp_path / "runs.txt"
    app = make_app(
        data_dir=folder_desk(tmp_path / "desk"),
        incident_sources=[{"kind": "folder"}, {"kind": "alertmanager", "name": "prod", "url": manager.url}],
        services={"payments": {"logs": slow_log(runs)}},
    )
    finished: dict[str, float] = {}
    texts: dict[str, str] = {}
    async with connect(build_server(app), era) as client:
        listed = await client.call_tool("list_incidents", {})
        ids = [entry["id"] for entry in listed.structured_content["incidents"] if entry["source"] == "prod"]
        assert len(ids) == 4

        async def read(incident_id: str) -> None:
            answer = await client.call_tool("read_incident_log", {"incidentId": incident_id})
            assert not answer.is_error, text_of(answer)
            texts[incident_id] = text_of(answer)
            finished[incident_id] = time.monotonic() - began

        began = time.monotonic()
        async with anyio.create_task_group() as group:
            for incident_id in ids:
                group.start_soon(read, incident_id)
    assert all(f"1: {incident_id} log line" in texts[incident_id] for incident_id in ids)
    assert runs.read_text().count("ran") == 4
    assert max(finished.values()) < 5, f"the four finished at {sorted(round(t, 1) for t in finished.values())} s"


def test_a_burst_for_one_incident_runs_its_command_once(tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    sources = _sources(tmp_path, slow_log(runs))
    read = _reader(sources)
    threads = [threading.Thread(target=read, args=("prod-1",)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert runs.read_text().count("ran") == 1


def test_log_commands_run_at_most_the_bound_at_once(tmp_path: Path) -> None:
    """Twice the bound of incidents at once: never more than the bound running, and the rest wait their turn."""
    running = tmp_path / "running"
    running.mkdir()
    peaks = tmp_path / "peaks.txt"
    counts = (
        "import os, sys, time\n"
        "marker = os.path.join(sys.argv[1], str(os.getpid()))\n"
        "open(marker, 'w').close()\n"
        "open(sys.argv[2], 'a').write(str(len(os.listdir(sys.argv[1]))) + '\\n')\n"
        "time.sleep(1)\n"
        "os.unlink(marker)\n"
        "print('done')"
    )
    config = {"kind": "command", "argv": [sys.executable, "-c", counts, str(running), str(peaks)]}
    sources = _sources(tmp_path, config)
    read = _reader(sources)
    texts: list[bytes] = []
    threads = [
        threading.Thread(target=lambda n=n: texts.append(read(f"prod-{n}"))) for n in range(2 * LOG_COMMANDS_AT_ONCE)
    ]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    took = time.monotonic() - began
    seen = [int(line) for line in peaks.read_text().split()]
    assert texts == [b"done\n"] * (2 * LOG_COMMANDS_AT_ONCE)
    assert len(seen) == 2 * LOG_COMMANDS_AT_ONCE and max(seen) <= LOG_COMMANDS_AT_ONCE
    assert took < 5, f"{took:.1f}s: the commands ran one after another"


def _sources(tmp_path: Path, config: dict[str, Any]) -> IncidentSources:
    settings = load_settings({"services": {"payments": {"logs": config}}})
    return IncidentSources(DataFolder(tmp_path), [], settings.service_logs)


def _reader(sources: IncidentSources) -> Any:
    def read(incident_id: str) -> bytes:
        with sources.service_log(incident_id, "payments", OPENED) as handle:
            return handle.read()

    return read


def test_a_command_that_finds_no_free_slot_within_its_timeout_is_a_named_error(tmp_path: Path) -> None:
    slots = CommandSlots(1)
    settings = load_settings({"services": {"payments": {"logs": slow_log(tmp_path / "runs.txt", timeout_seconds=0.5)}}})
    config = settings.service_logs["payments"]
    assert isinstance(config, CommandLogConfig)
    log = CommandLog("payments", config, slots=slots)
    with slots.held("another command", 1), pytest.raises(LogSourceError) as refused:
        log.open("prod-1", OPENED)
    assert str(refused.value) == (
        "the log command of payments did not start within 0.5s: the desk runs at most 1 log commands at once, "
        "and 1 were running"
    )
    assert not (tmp_path / "runs.txt").exists()
