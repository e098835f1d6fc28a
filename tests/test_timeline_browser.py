"""The timeline view in a real browser: headless Chromium loads a test host built on the ext-apps AppBridge,
which renders the desk's real ``ui://`` resource and hands it a real show_incident_timeline result.

Needs Debian's chromium and the view's node_modules (``npm ci`` in app/timeline; CI does both); skipped without.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp.client import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from incident_desk.core.journal.audit import Decision
from incident_desk.core.outcomes import Outcome
from incident_desk.server import build_server
from tests.helpers import ROOT, AppFactory, connect

pytestmark = pytest.mark.anyio

VIEW_DIR = ROOT / "app" / "timeline"
CHROMIUM = Path("/usr/bin/chromium")
LOG = "".join(
    f"10:{minute:02d}:{second:02d} payments-api {level} event\n"
    for minute, levels in enumerate([["INFO"], ["INFO", "WARN"], ["ERROR", "ERROR", "INFO"], [], ["INFO"]])
    for second, level in enumerate(levels)
)


def _harness_ready() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    if shutil.which("node") is None or not (VIEW_DIR / "node_modules" / "playwright-core").is_dir():
        return "the view's node_modules are missing (npm ci in app/timeline)"
    return None


def _run_id(config: pytest.Config) -> str:
    """The test run's id: one for all xdist workers (their controller's), else this process's."""
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput["testrunuid"]) if workerinput else _THIS_RUN


_THIS_RUN = uuid.uuid4().hex


@pytest.fixture(scope="module")
def harness(request: pytest.FixtureRequest) -> Path:
    """The harness, built once per test run. Modules that use it run on several workers at once, and each build
    empties ``dist-harness`` first: a second worker's build removed the page a first worker's Chromium was about
    to open. The first worker to get the lock builds; the others find the run's mark and use that build."""
    missing = _harness_ready()
    if missing:
        pytest.skip(missing)
    built = VIEW_DIR / "dist-harness" / f".built-by-{_run_id(request.config)}"
    lock = Path(tempfile.gettempdir()) / f"incident-desk-harness-{hashlib.sha256(bytes(VIEW_DIR)).hexdigest()[:16]}"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not built.exists():
            subprocess.run(["npm", "run", "build:harness"], cwd=VIEW_DIR, check=True, capture_output=True, timeout=120)
            built.touch()
    return VIEW_DIR / "harness" / "run.mjs"


async def _render(tmp_path: Path, make_app: AppFactory, harness: Path) -> dict[str, Any]:
    entry = tmp_path / "desk" / "incidents" / "INC-7"
    entry.mkdir(parents=True)
    entry.joinpath("incident.toml").write_text(
        'title = "pool exhausted"\nservice = "payments-api"\nseverity = "SEV2"\nstatus = "open"\n'
        "opened = 2026-11-29T10:01:30Z\n"
    )
    entry.joinpath("log.txt").write_text(LOG)
    app = make_app(data_dir=tmp_path / "desk")
    restart_time = datetime(2026, 11, 29, 10, 3, 10, tzinfo=UTC)
    app.journal.record(Decision("payments-api", Outcome.SIMULATED, "CHG-1", "ana", "2026-07-28", time=restart_time))
    apps = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})
    async with connect(build_server(app), "legacy", extensions=[apps]) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "show_incident_timeline")
        assert tool.meta is not None
        (view,) = (await client.read_resource(tool.meta["ui"]["resourceUri"])).contents
        result = await client.call_tool("show_incident_timeline", {"incidentId": "INC-7"})
    assert view.meta is not None
    request = {
        "html": getattr(view, "text", ""),
        "csp": view.meta["ui"]["csp"],
        "arguments": {"incidentId": "INC-7"},
        "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    (tmp_path / "input.json").write_text(json.dumps(request))
    shots = tmp_path / "shots"
    shots.mkdir()
    ran = subprocess.run(
        ["node", str(harness), str(tmp_path / "input.json"), str(shots)],
        cwd=VIEW_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    report: dict[str, Any] = json.loads(ran.stdout)
    return report


async def test_chromium_draws_the_timeline_in_both_themes_with_no_network(
    tmp_path: Path, make_app: AppFactory, harness: Path
) -> None:
    report = await _render(tmp_path, make_app, harness)
    assert report["requests"] == [], "the view made network requests"
    assert report["minutes"] == 5  # 10:00 to 10:04, the quiet minute drawn as an empty column
    assert sorted(report["bars"]) == sorted(
        ["bar info", "bar info", "bar warn", "bar error", "bar info", "bar info"]
    )  # one stacked bar per level present in each minute
    assert report["markers"] == ["marker opened", "marker first-error", "marker restart"]
    assert report["xLabels"] == ["10:00", "10:02", "10:04"]
    assert report["yLabels"] == ["3", "0"]
    assert report["title"] == "INC-7 payments-api: pool exhausted"
    assert report["status"].startswith("Covers the whole log")
    dark, light = report["themes"]["dark"], report["themes"]["light"]
    assert (dark["dataTheme"], light["dataTheme"]) == ("dark", "light")
    assert dark["background"] != light["background"]
    for shot in (dark, light):
        assert shot["width"] >= 600 and shot["height"] > 100
        assert shot["colours"] > 8, "the screenshot is blank"
        assert shot["nonBackground"] > 0.02, "the screenshot is blank"
    # A load the CSP blocked, or one that failed, is an attempt at the network too; the frame's requests are not
    # always seen by the request hooks (it is sandboxed), but its console errors always are.
    assert report["consoleErrors"] == []
