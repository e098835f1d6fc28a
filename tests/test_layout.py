"""Folders say what the files are: at most 12 loose modules at the top of the package and at the top of core/.

A thirteenth loose module is a sign that a new kind of file wants a folder of its own (docs/architecture.md).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import ROOT

MAX_LOOSE = 12
PACKAGE = ROOT / "incident_desk"


def loose_modules(folder: Path) -> list[str]:
    """The modules directly in ``folder``, not counting a package's ``__init__`` and ``__main__``."""
    return sorted(path.name for path in folder.glob("*.py") if path.name not in ("__init__.py", "__main__.py"))


def test_the_top_of_the_package_holds_at_most_12_loose_modules() -> None:
    loose = loose_modules(PACKAGE)
    assert len(loose) <= MAX_LOOSE, f"{len(loose)} loose modules at the top: {', '.join(loose)}"


def test_the_top_of_core_holds_at_most_12_loose_modules() -> None:
    loose = loose_modules(PACKAGE / "core")
    assert len(loose) <= MAX_LOOSE, f"{len(loose)} loose modules in core/: {', '.join(loose)}"


def test_the_count_sees_a_thirteenth_module(tmp_path: Path) -> None:
    for index in range(MAX_LOOSE + 1):
        (tmp_path / f"module_{index}.py").write_text("", encoding="utf-8")
    (tmp_path / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "inner.py").write_text("", encoding="utf-8")
    assert len(loose_modules(tmp_path)) == MAX_LOOSE + 1


def test_every_folder_of_the_package_is_a_row_of_the_architecture_page() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    folders = sorted(
        path.parent.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("__init__.py")
        if path.parent != PACKAGE and "data" not in path.parts
    )
    missing = [folder for folder in folders if f"| `{folder}/` |" not in page]
    assert not missing, f"docs/architecture.md has no row for: {', '.join(missing)}"
