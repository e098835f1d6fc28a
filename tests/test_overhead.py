"""The desk's own per-call work: change detection of the data directory is shared between calls, not per call."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from incident_desk.core import desk as desk_module
from incident_desk.core.desk import Desk, bundled_sample_desk
from incident_desk.server import build_server
from tests.helpers import ROOT, AppFactory, child_env, connect

pytestmark = pytest.mark.anyio


def _counting_directory_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every listing of a data-directory subdirectory made to detect changes, by name."""
    checked: list[str] = []
    original = Desk._directory_signature

    def counting(self: Desk, name: str, *files: str) -> Any:
        checked.append(name)
        return original(self, name, *files)

    monkeypatch.setattr(Desk, "_directory_signature", counting)
    return checked


async def test_calls_within_the_freshness_window_share_one_look_at_the_data_directory(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    checked = _counting_directory_checks(monkeypatch)
    server = build_server(make_app(data_freshness_seconds=60))
    async with connect(server, era) as client:
        for _ in range(20):
            result = await client.call_tool("list_incidents", {"status": "all"})
            assert not result.is_error
        await client.read_resource("incident://index")
        await client.read_resource("incident://INC-1043/log")
    assert sorted(checked) == ["incidents", "runbooks"]


async def test_an_incident_filed_while_the_desk_runs_shows_up_once_the_freshness_window_passes(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "desk"
    shutil.copytree(bundled_sample_desk(), data)
    clock = [1000.0]
    monkeypatch.setattr(desk_module, "monotonic", lambda: clock[0])
    server = build_server(make_app(data_dir=data, data_freshness_seconds=1.0))
    async with connect(server, "legacy") as client:
        before = (await client.call_tool("list_incidents", {"status": "all"})).structured_content
        assert before is not None
        filed = data / "incidents" / "INC-9000"
        shutil.copytree(data / "incidents" / "INC-1043", filed)
        clock[0] += 0.5
        within = (await client.call_tool("list_incidents", {"status": "all"})).structured_content
        assert within == before
        clock[0] += 0.6
        after = (await client.call_tool("list_incidents", {"status": "all"})).structured_content
    assert after is not None
    assert "INC-9000" in [entry["id"] for entry in after["incidents"]]


def test_a_freshness_of_zero_looks_on_every_call(tmp_path: Path) -> None:
    data = tmp_path / "desk"
    shutil.copytree(bundled_sample_desk(), data)
    desk = Desk(data, freshness_seconds=0)
    before = set(desk.listing().incidents)
    shutil.copytree(data / "incidents" / "INC-1043", data / "incidents" / "INC-9001")
    assert set(desk.listing().incidents) == before | {"INC-9001"}


# Loaded only by what needs them: config --write (the writers), the first log read or search (redaction, RE2).
NOT_NEEDED_TO_ANSWER = (
    "ruamel.yaml",
    "tomlkit",
    "re2",
    "incident_desk.core.redact",
    "incident_desk.client_configs.merge",
)


@pytest.mark.subprocess
def test_building_the_served_desk_imports_nothing_the_first_answer_does_not_need(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from incident_desk.cli import build_parser\n"
        "from incident_desk.settings import load_settings\n"
        "from incident_desk.app import build_app\n"
        "from incident_desk.server import build_server\n"
        "build_parser()\n"
        "build_server(build_app(load_settings({})))\n"
        f"print(sorted(name for name in {NOT_NEEDED_TO_ANSWER!r} if name in sys.modules))\n"
    )
    env = child_env(tmp_path / "audit.sqlite3")
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
