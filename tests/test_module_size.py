"""A module holds one idea whatever its length; 600 lines is the guide that asks whether it still does (issue 23).

Past the guide a module is usually holding a second idea: split it by idea (see docs/architecture.md). When the
module is still one idea, list it in KNOWN_OVER with the reason rather than cut it at an arbitrary line.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import ROOT

GUIDE_LINES = 600
# Modules past the guide that are still one idea, each with the reason; an entry goes when its module is short again.
KNOWN_OVER: dict[str, str] = {
    "incident_desk/core/search/engine.py": "one search's scan: its shared state, when it stops, and the newlines it "
    "counts only where a line number needs them (issue 43); the reading of runs and the skim are their own modules",
}


def modules_over(package: Path, max_lines: int) -> dict[str, int]:
    """``path: lines`` for each Python module under ``package`` longer than ``max_lines``."""
    over = {}
    for module in sorted(package.rglob("*.py")):
        lines = len(module.read_text(encoding="utf-8").splitlines())
        if lines > max_lines:
            over[module.relative_to(package.parent).as_posix()] = lines
    return over


def test_no_module_of_the_package_is_past_the_600_line_guide() -> None:
    over = modules_over(ROOT / "incident_desk", GUIDE_LINES)
    unexplained = {path: lines for path, lines in over.items() if path not in KNOWN_OVER}
    assert unexplained == {}, (
        f"past the {GUIDE_LINES}-line guide: {unexplained}. A module holds one idea whatever its length: split out "
        "a second idea, or, if it is still one, add it to KNOWN_OVER with the reason"
    )


def test_a_known_exception_is_still_past_the_guide() -> None:
    """An entry of KNOWN_OVER whose module is now short (or gone) must be removed, so the exception cannot linger."""
    over = modules_over(ROOT / "incident_desk", GUIDE_LINES)
    short = sorted(KNOWN_OVER.keys() - over.keys())
    assert short == [], f"{', '.join(short)} is within {GUIDE_LINES} lines now: remove it from KNOWN_OVER"
    assert all(reason.strip() for reason in KNOWN_OVER.values()), "each exception says why it is still one idea"


def test_the_check_catches_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "incident_desk"
    (package / "core").mkdir(parents=True)
    (package / "core" / "short.py").write_text("x = 1\n" * GUIDE_LINES, encoding="utf-8")
    (package / "core" / "long.py").write_text("x = 1\n" * (GUIDE_LINES + 1), encoding="utf-8")
    assert modules_over(package, GUIDE_LINES) == {"incident_desk/core/long.py": GUIDE_LINES + 1}
