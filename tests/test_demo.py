"""``incident-desk demo`` replays its twelve scripted transcripts; its output for each era is a golden file."""

from __future__ import annotations

from pathlib import Path

import pytest

from incident_desk import cli
from incident_desk.demo import TRANSCRIPTS
from tests.helpers import ERAS, ROOT

GOLDEN = ROOT / "tests" / "golden" / "demo"


@pytest.mark.parametrize("era", ERAS)
def test_demo_output_matches_the_golden_transcripts(
    era: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["demo", "--era", era, "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    names = [name for name, _ in TRANSCRIPTS]
    assert names == [f"{number:02d}-{name.split('-', 1)[1]}" for number, name in enumerate(names, start=1)]
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [f"{name}.txt" for name in names]
    for name in names:
        written = (tmp_path / "out" / f"{name}.txt").read_text(encoding="utf-8")
        assert written == (GOLDEN / era / f"{name}.txt").read_text(encoding="utf-8"), name
        assert f"=== {name}.txt ({era})\n{written}" in printed


def test_demo_refuses_an_unknown_era(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_code:
        cli.main(["demo", "--era", "2024-11-05"])
    assert exit_code.value.code == 2
    assert "invalid choice: '2024-11-05'" in capsys.readouterr().err


def test_demo_shows_the_text_timeline_and_speaks_of_no_unseen_article(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo"]) == 0
    printed = capsys.readouterr().out
    assert "=== 12-timeline.txt (legacy)" in printed
    assert "lines/min █ (peak 6)" in printed and "first error 10:58 (line 3)" in printed
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in (printed, readme, cli.build_parser().format_help()):
        assert "article" not in text.lower()
        assert "/nCause" not in text
