"""``incident-desk demo`` replays its twelve scripted transcripts; its output for each era is a golden file."""

from __future__ import annotations

from pathlib import Path

import pytest

from incident_desk.cli import main as cli
from incident_desk.cli import parser as cli_parser
from incident_desk.cli.demo import TRANSCRIPTS
from tests.helpers import ERAS, ROOT

GOLDEN = ROOT / "tests" / "golden" / "demo"


@pytest.mark.timing  # its slow-client transcript turns on a model missing a wall-clock deadline
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


def test_demo_refuses_a_link_planted_in_the_out_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A link at a transcript's name used to be followed and its target overwritten."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "05-elicitation.txt").symlink_to(victim)
    assert cli.main(["demo", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"incident-desk: demo: {out / '05-elicitation.txt'} is a symbolic link" in err
    assert "Traceback" not in err
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert sorted(path.name for path in out.iterdir()) == ["05-elicitation.txt"], "nothing half written"


def test_demo_names_an_out_that_is_a_file_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "transcripts.txt"
    out.write_text("keep\n", encoding="utf-8")
    assert cli.main(["demo", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"incident-desk: demo: --out {out} exists and is not a directory\n"
    assert out.read_text(encoding="utf-8") == "keep\n"


def test_safe_write_refuses_a_link_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The write goes to a fresh file renamed into place, so a link at the name is never written through."""
    from incident_desk import safe_write

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    (tmp_path / "name.txt").symlink_to(victim)
    with pytest.raises(safe_write.UnsafeTarget, match=r"is a symbolic link"):
        safe_write.replace_file(tmp_path, "name.txt", b"new\n")
    assert victim.read_text(encoding="utf-8") == "precious\n"
    (tmp_path / "name.txt").unlink()
    safe_write.replace_file(tmp_path, "name.txt", b"new\n")
    assert (tmp_path / "name.txt").read_bytes() == b"new\n" and not (tmp_path / "name.txt").is_symlink()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["name.txt", "victim.txt"], "no temporary file left"


def test_demo_shows_the_text_timeline_and_speaks_of_no_unseen_article(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo"]) == 0
    printed = capsys.readouterr().out
    assert "=== 12-timeline.txt (legacy)" in printed
    assert "lines/min █ (peak 6)" in printed and "first error 10:58 (line 3)" in printed
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in (printed, readme, cli_parser.build_parser().format_help()):
        assert "article" not in text.lower()
        assert "/nCause" not in text
