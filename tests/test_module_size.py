"""Every room holds one idea: no module of the package is over 500 lines (issue 23).

A module that grows past the bound is holding more than one idea; split it by idea (see docs/architecture.md)
rather than raise the bound.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import ROOT

MAX_LINES = 500
# Known to be over the bound while its split is under way; remove the entry when the split lands.
KNOWN_OVER: frozenset[str] = frozenset()


def modules_over(package: Path, max_lines: int) -> dict[str, int]:
    """``path: lines`` for each Python module under ``package`` longer than ``max_lines``."""
    over = {}
    for module in sorted(package.rglob("*.py")):
        lines = len(module.read_text(encoding="utf-8").splitlines())
        if lines > max_lines:
            over[module.relative_to(package.parent).as_posix()] = lines
    return over


def test_no_module_of_the_package_is_over_500_lines() -> None:
    over = modules_over(ROOT / "incident_desk", MAX_LINES)
    assert {path: lines for path, lines in over.items() if path not in KNOWN_OVER} == {}


def test_a_known_exception_is_still_over_the_bound() -> None:
    """An entry of KNOWN_OVER whose module is now short (or gone) must be removed, so the exception cannot linger."""
    over = modules_over(ROOT / "incident_desk", MAX_LINES)
    short = sorted(KNOWN_OVER - over.keys())
    assert short == [], f"{', '.join(short)} is within {MAX_LINES} lines now: remove it from KNOWN_OVER"


def test_the_check_catches_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "incident_desk"
    (package / "core").mkdir(parents=True)
    (package / "core" / "short.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    (package / "core" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    assert modules_over(package, MAX_LINES) == {"incident_desk/core/long.py": MAX_LINES + 1}
