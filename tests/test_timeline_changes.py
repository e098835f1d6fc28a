"""The timeline with what changed: metric series (a real Prometheus with history), change events from a JSON-lines
file and from a command, and the desk's restart decisions, on the log's time axis, in the text every client reads
and in the app drawn by headless Chromium (both themes, labels inside the chart, no network); a day of minutes is
drawn in readable buckets."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.client import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from incident_desk.app import DeskApp
from incident_desk.core.journal.audit import Decision
from incident_desk.core.outcomes import Outcome
from incident_desk.server import build_server
from tests.alertmanager import alert, needs_alertmanager, running_alertmanager
from tests.helpers import AppFactory, connect, text_of
from tests.prometheus import Prometheus, canned_prometheus, needs_prometheus
from tests.test_metrics import ERRORS, LATENCY, OPENED, SERVICE, incident_desk, prometheus  # noqa: F401
from tests.test_sources_alertmanager import STARTED, folder_desk, sources
from tests.test_timeline_browser import VIEW_DIR, harness  # noqa: F401

pytestmark = pytest.mark.anyio


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def change_sources(tmp_path: Path, opened: datetime) -> list[dict[str, Any]]:
    """A deploy file (one record in the window, one of another service, one long before, one not a record) and a
    command printing ``<time> <summary>`` lines, as a ``git log --format='%cI %s'`` would."""
    deploys = tmp_path / "deploys.jsonl"
    records = [
        {"time": _stamp(opened - timedelta(minutes=2)), "service": SERVICE, "summary": "deploy v2.4.1\nforged line"},
        {"time": _stamp(opened - timedelta(minutes=1)), "service": "search-api", "summary": "deploy search"},
        {"time": _stamp(opened - timedelta(days=3)), "service": SERVICE, "summary": "deploy v2.3.0"},
    ]
    deploys.write_text("\n".join(json.dumps(r) for r in records) + "\nnot a record\n", encoding="utf-8")
    printer = "import sys; print(sys.argv[1], 'config push: pool size 50 -> 80 for', sys.argv[2])"
    return [
        {"kind": "files", "name": "deploys", "paths": [str(deploys)]},
        {
            "kind": "command",
            "name": "git",
            "service": SERVICE,
            "argv": [sys.executable, "-c", printer, _stamp(opened + timedelta(minutes=3)), "{service}"],
        },
    ]


def _record_restart(app: DeskApp, at: datetime, era: str) -> None:
    app.journal.record(Decision(SERVICE, Outcome.SIMULATED, "CHG-9", "ana", era, time=at))


@needs_prometheus
async def test_the_text_timeline_has_metrics_changes_and_acts(
    prometheus: Prometheus,  # noqa: F811
    make_app: AppFactory,
    tmp_path: Path,
    era: str,
) -> None:
    queries = {"error_rate": ERRORS, "latency": LATENCY}
    app = make_app(
        data_dir=incident_desk(tmp_path / "desk"),
        services={SERVICE: {"metrics": {"prometheus": prometheus.url, "queries": queries}}},
        change_sources=change_sources(tmp_path, OPENED),
    )
    _record_restart(app, OPENED + timedelta(minutes=5), era)
    async with connect(build_server(app), era) as client:
        result = await client.call_tool("show_incident_timeline", {"incidentId": "INC-7001"})
    assert not result.is_error, text_of(result)
    view = result.structured_content
    assert view is not None
    assert [(c["time"], c["summary"], c["source"]) for c in view["changes"]] == [
        (_stamp(OPENED - timedelta(minutes=2)), "deploy v2.4.1␊forged line", "deploys"),
        (_stamp(OPENED + timedelta(minutes=3)), "config push: pool size 50 -> 80 for payments-api", "git"),
    ]
    assert [(a["kind"], a["summary"]) for a in view["acts"]] == [("restart", "restart simulated CHG-9 by ana")]
    assert {(s["name"], tuple(sorted(s["labels"].items()))) for s in view["metrics"]} == {
        ("error_rate", ()),
        ("latency", (("__name__", "request_latency_seconds"), ("job", SERVICE), ("route", "/pay"))),
        ("latency", (("__name__", "request_latency_seconds"), ("job", SERVICE), ("route", "/refund"))),
    }
    for series in view["metrics"]:  # the timeline's span: 30 minutes either side of the log's one minute
        times = [datetime.fromisoformat(p["time"]) for p in series["points"]]
        assert times[0] == OPENED - timedelta(minutes=30) and times[-1] == OPENED + timedelta(minutes=30)
    assert view["problems"] == []
    text = text_of(result)
    errors = next(s for s in view["metrics"] if s["name"] == "error_rate")
    assert (
        f"metric error_rate: {errors['sparkline']} min {errors['min']:.4g} max {errors['max']:.4g} "
        f"last {errors['last']:.4g} (61 points)" in text.splitlines()
    )
    assert f'metric latency {{job="{SERVICE}", route="/pay"}}: ' in text
    assert (
        f"changes: {OPENED - timedelta(minutes=2):%Y-%m-%d %H:%M} deploy v2.4.1␊forged line (deploys); "
        f"{OPENED + timedelta(minutes=3):%Y-%m-%d %H:%M} config push: pool size 50 -> 80 for payments-api (git)" in text
    )
    assert f"restarts: {OPENED + timedelta(minutes=5):%Y-%m-%d %H:%M} simulated CHG-9" in text


async def test_sources_that_fail_are_named_and_the_timeline_still_answers(
    make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    app = make_app(
        data_dir=incident_desk(tmp_path / "desk"),
        services={SERVICE: {"metrics": {"prometheus": "http://127.0.0.1:9", "queries": {"up": "up"}}}},
        change_sources=[
            {"kind": "files", "name": "gone", "paths": [str(tmp_path / "missing.jsonl")]},
            {"kind": "command", "name": "slow", "argv": ["sleep", "30"], "timeout_seconds": 0.5},
        ],
    )
    async with connect(build_server(app), era) as client:
        result = await client.call_tool("show_incident_timeline", {"incidentId": "INC-7001"})
    assert not result.is_error, text_of(result)
    view = result.structured_content
    assert view is not None
    assert view["problems"] == [
        f"prometheus for {SERVICE} at http://127.0.0.1:9 cannot be reached: connection refused",
        f"change source 'gone': cannot open {tmp_path / 'missing.jsonl'}: No such file or directory",
        "change source 'slow': the command did not finish within 0.5s",
    ]
    assert "unavailable: change source 'slow': the command did not finish within 0.5s" in text_of(result)


async def _render(tmp_path: Path, app: DeskApp, harness: Path) -> tuple[dict[str, Any], dict[str, Any]]:  # noqa: F811
    apps = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})
    async with connect(build_server(app), "legacy", extensions=[apps]) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "show_incident_timeline")
        assert tool.meta is not None
        (view,) = (await client.read_resource(tool.meta["ui"]["resourceUri"])).contents
        result = await client.call_tool("show_incident_timeline", {"incidentId": "INC-7001"})
    assert view.meta is not None and not result.is_error
    request = {
        "html": getattr(view, "text", ""),
        "csp": view.meta["ui"]["csp"],
        "arguments": {"incidentId": "INC-7001"},
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
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    report: dict[str, Any] = json.loads(ran.stdout)
    assert result.structured_content is not None
    return report, result.structured_content


def _assert_drawn_cleanly(report: dict[str, Any]) -> None:
    assert report["requests"] == [], "the view made network requests"
    assert report["consoleErrors"] == []
    assert report["labelsOutside"] == [], "a label is clipped at the chart's edge"
    assert report["markerLabelsOverBars"] == [], "a marker's label is drawn over the bars"
    assert report["markerLabelsOverlapping"] == [], "marker labels are drawn over each other"
    dark, light = report["themes"]["dark"], report["themes"]["light"]
    assert (dark["dataTheme"], light["dataTheme"]) == ("dark", "light")
    for shot in (dark, light):
        assert shot["colours"] > 8 and shot["nonBackground"] > 0.02, "the screenshot is blank"


async def test_chromium_draws_metrics_changes_and_acts_on_one_axis(
    tmp_path: Path,
    make_app: AppFactory,
    harness: Path,  # noqa: F811
) -> None:
    opened = datetime(2026, 11, 29, 10, 30, tzinfo=UTC)
    values = [(opened.timestamp() + 60 * m, str(abs(m) % 9 + (40 if 0 <= m < 10 else 0))) for m in range(-30, 31)]
    with canned_prometheus(values) as url:
        app = make_app(
            data_dir=incident_desk(tmp_path / "desk", opened),
            services={SERVICE: {"metrics": {"prometheus": url, "queries": {"error_rate": "up"}}}},
            change_sources=change_sources(tmp_path, opened),
        )
        _record_restart(app, opened + timedelta(minutes=5), "legacy")
        report, view = await _render(tmp_path, app, harness)
    _assert_drawn_cleanly(report)
    assert [lane["name"] for lane in report["lanes"]] == ["error_rate"]
    assert report["lanes"][0]["points"] == len(view["metrics"][0]["points"]) == 61
    assert report["lanes"][0]["label"] == "error_rate {job=payments-api}: max 48 last 3"
    assert report["markers"] == [
        "marker opened",
        "marker first-error",
        "marker change",
        "marker change",
        "marker restart",
    ]
    assert "deploy v2.4.1␊forged line" in report["markerLabels"]
    assert report["bucketMinutes"] == ["1"]


async def test_chromium_draws_a_day_of_minutes_in_readable_buckets(
    tmp_path: Path,
    make_app: AppFactory,
    harness: Path,  # noqa: F811
) -> None:
    opened = datetime(2026, 11, 29, 0, 0, 30, tzinfo=UTC)
    desk = incident_desk(tmp_path / "desk", opened)
    day = "".join(
        f"2026-11-29T{minute // 60:02d}:{minute % 60:02d}:05 {SERVICE} {'ERROR' if minute % 97 == 0 else 'INFO'} x\n"
        for minute in range(24 * 60)
    )
    (desk / "incidents" / "INC-7001" / "log.txt").write_text(day, encoding="utf-8")
    app = make_app(data_dir=desk)
    report, view = await _render(tmp_path, app, harness)
    _assert_drawn_cleanly(report)
    assert len(view["minutes"]) == 24 * 60
    assert report["minutes"] == 96 and report["bucketMinutes"] == ["15"]
    assert "bars of 15 minutes" in report["status"]
    assert report["xLabels"] == ["00:00", "11:45", "23:45"]


async def test_chromium_shows_a_few_errors_under_millions_of_info_lines_and_acts_outside_the_span(
    tmp_path: Path,
    make_app: AppFactory,
    harness: Path,  # noqa: F811
) -> None:
    """Errors get a lane of their own scale, and acts outside the span are drawn at its edge (issue 45, E13)."""
    opened = datetime(2026, 11, 29, 10, 0, 30, tzinfo=UTC)
    desk = incident_desk(tmp_path / "desk", opened)
    errors = {7: 1, 31: 2, 32: 1}
    with (desk / "incidents" / "INC-7001" / "log.txt").open("w", encoding="utf-8") as log:
        for minute in range(60):
            log.write(f"2026-11-29T10:{minute:02d}:05 {SERVICE} INFO ok\n" * 35_000)
            log.write(f"2026-11-29T10:{minute:02d}:06 {SERVICE} ERROR pool exhausted\n" * errors.get(minute, 0))
    app = make_app(data_dir=desk)
    _record_restart(app, opened - timedelta(days=1), "legacy")
    _record_restart(app, opened + timedelta(hours=5), "legacy")
    report, view = await _render(tmp_path, app, harness)
    _assert_drawn_cleanly(report)
    assert sum(minute["info"] for minute in view["minutes"]) == 2_100_000
    assert sum(minute["error"] for minute in view["minutes"]) == 4
    assert max(report["stackedErrorHeights"]) < 1, "in the stack the errors are a sliver"
    lane = report["errorLane"]
    assert lane["label"] == "error lines on their own scale: at most 2 per minute"
    assert len(lane["renderedHeights"]) == 3
    assert min(lane["renderedHeights"]) > 8, "each minute with an error shows a bar that can be seen"
    outside = report["outsideMarkers"]
    assert [(m["class"], m["side"]) for m in outside] == [
        ("marker restart outside", "before"),
        ("marker restart outside", "after"),
    ]
    before, after = outside
    assert before["x"] < 40 and after["x"] > after["width"] - 10, "each is drawn at the edge it lies beyond"
    assert before["label"].startswith("← 11-28 10:00 restart simulated")
    assert after["label"].endswith("11-29 15:00 →")
    assert "2 act(s) of the desk outside this span, drawn at its edge" in report["status"]


@needs_alertmanager
async def test_an_alert_whose_service_has_no_log_source_still_gets_its_timeline(
    make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    """No log for the alert's service: the log is marked unavailable and the changes still answer (issue 45, E5)."""
    (tmp_path / "am").mkdir()
    with running_alertmanager(tmp_path / "am") as manager:
        manager.post(alert("HighLatency", starts=STARTED, service=SERVICE))
        app = make_app(
            data_dir=folder_desk(tmp_path / "desk"),
            incident_sources=sources(manager, cache_seconds=0),
            change_sources=change_sources(tmp_path, STARTED),
        )
        (incident_id,) = [i.id for i in (await app.listing()).incidents.values() if i.source != "folder"]
        async with connect(build_server(app), era) as client:
            result = await client.call_tool("show_incident_timeline", {"incidentId": incident_id})
    assert not result.is_error, text_of(result)
    view = result.structured_content
    assert view is not None and view["minutes"] == []
    assert view["covers"] == "no log lines (the log is unavailable)"
    assert view["problems"] == [
        f"Log of {incident_id} cannot be read: no log source is configured for service {SERVICE} "
        f"([services.{SERVICE}.logs])"
    ]
    assert [change["source"] for change in view["changes"]] == ["deploys", "git"]
    assert f"unavailable: {view['problems'][0]}" in text_of(result)
