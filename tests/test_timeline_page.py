"""``incident-desk timeline ID --html FILE``: the chart as one self-contained page, drawn in headless Chromium
with every request refused. The browser part needs Debian's chromium and the view's
node_modules, like tests/test_timeline_browser.py, and is skipped without them."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from incident_desk.cli import main as cli
from incident_desk.core.journal.audit import Decision
from incident_desk.core.outcomes import Outcome
from tests.helpers import AppFactory
from tests.test_timeline_browser import VIEW_DIR, _harness_ready

LOG = "".join(
    f"10:{minute:02d}:{second:02d} payments-api {level} event {minute}\n"
    for minute, levels in enumerate(
        [["INFO"], ["INFO", "WARN"], ["ERROR", "ERROR", "INFO"], [], ["INFO"], ["DEBUG", "INFO"], ["ERROR"]]
    )
    for second, level in enumerate(levels)
)
HOSTILE_TITLE = "pool </script><script>document.title='pwned'</script> & <b>"
# What would make a browser load something: the same rule as app/timeline/check-singlefile.mjs.
LOADS = re.compile(r"<(script|link|img|iframe|source|video|audio|embed|object)\b[^>]*\b(src|href|data)\s*=", re.I)


def _desk(tmp_path: Path, make_app: AppFactory) -> Path:
    entry = tmp_path / "desk" / "incidents" / "INC-7"
    entry.mkdir(parents=True)
    entry.joinpath("incident.toml").write_text(
        f'title = "{HOSTILE_TITLE}"\nservice = "payments-api"\nseverity = "SEV2"\nstatus = "open"\n'
        "opened = 2026-11-29T10:00:30Z\n"
    )
    entry.joinpath("log.txt").write_text(LOG)
    app = make_app(data_dir=tmp_path / "desk")
    restart_time = datetime(2026, 11, 29, 10, 6, 40, tzinfo=UTC)  # at the right edge: its label must stay inside
    app.journal.record(Decision("payments-api", Outcome.SIMULATED, "CHG-1", "ana", "2026-07-28", time=restart_time))
    app.journal.close()
    return tmp_path / "desk"


def _write_page(tmp_path: Path, make_app: AppFactory, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    desk = _desk(tmp_path, make_app)
    page = tmp_path / "timeline.html"
    assert cli.main(["timeline", "INC-7", "--data-dir", str(desk), "--html", str(page)]) == 0
    captured = capsys.readouterr()
    assert f"wrote {page}" in captured.err
    return page, captured.out


def test_the_page_carries_the_view_and_its_data_and_loads_nothing(
    tmp_path: Path, make_app: AppFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    page, text = _write_page(tmp_path, make_app, capsys)
    assert text.startswith("INC-7 payments-api: pool"), "the text timeline goes to stdout"
    assert "restarts: 2026-11-29 10:06 simulated CHG-1" in text
    html = page.read_text(encoding="utf-8")
    assert "default-src 'none'" in html and 'http-equiv="Content-Security-Policy"' in html
    assert LOADS.search(html) is None, "the page would load something"
    found = re.search(r'<script type="application/json" id="timeline-data">(.*?)</script>', html, re.S)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    assert data["incident_id"] == "INC-7" and data["title"] == HOSTILE_TITLE
    assert len(data["minutes"]) == 7 and [d["ticket"] for d in data["decisions"]] == ["CHG-1"]
    assert "</script><script>" not in found.group(1), "the data cannot close its own script element"


def test_an_unknown_incident_writes_no_page(
    tmp_path: Path, make_app: AppFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "timeline.html"
    assert cli.main(["timeline", "INC-404", "--html", str(page)]) == 1
    assert capsys.readouterr().err == "incident-desk: No such incident: INC-404\n"
    assert not page.exists()


@pytest.mark.subprocess
def test_chromium_draws_the_page_with_no_network_and_every_label_in_place(
    tmp_path: Path, make_app: AppFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = _harness_ready()
    if missing:
        pytest.skip(missing)
    page, _ = _write_page(tmp_path, make_app, capsys)
    shot = tmp_path / "page.png"
    ran = subprocess.run(
        ["node", str(VIEW_DIR / "harness" / "page.mjs"), str(page), str(shot)],
        cwd=VIEW_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    report: dict[str, Any] = json.loads(ran.stdout)
    assert report["requests"] == [], "the page made network requests"
    assert report["consoleErrors"] == []
    assert report["minutes"] == 7
    assert report["bars"] == 9  # one per level present in each minute
    assert report["markers"] == ["marker opened", "marker first-error", "marker restart"]
    assert report["xLabels"] == ["10:00", "10:03", "10:06"]
    assert report["title"] == f"INC-7 payments-api: {HOSTILE_TITLE}"
    assert report["documentTitle"] != "pwned"
    assert report["status"].startswith("Covers the whole log (")
    assert report["labelsOutside"] == [], "a label is clipped at the chart's edge"
    assert report["markerLabelsOverBars"] == [], "a marker's label is drawn over the bars"
    assert report["dataTheme"] == "light"
    screenshot = report["screenshot"]
    assert screenshot["width"] >= 600 and screenshot["height"] > 100
    assert screenshot["colours"] > 8, "the page is blank"
    assert screenshot["nonBackground"] > 0.02, "the page is blank"
    assert shot.stat().st_size > 1000
