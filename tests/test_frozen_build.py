"""The frozen build's cache (tests/frozen_build.py): reused only for the same inputs, never half-built.

The build itself is tests/test_frozen.py's; here a stand-in for packaging/build.py records how often it runs.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from tests import frozen_build

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the cache's lock is flock(2)")


class BuildFailed(Exception):
    pass


class StandInBuild:
    """What the cache calls of packaging/build.py: ``build`` (writes an executable) and ``executable_path``."""

    def __init__(self, *, fail: bool = False) -> None:
        self.builds = 0
        self.fail = fail

    def executable_path(self, mode: str, dist_dir: Path) -> Path:
        return dist_dir / mode / "incident-desk" / "incident-desk"

    def build(self, mode: str, dist_dir: Path, work_dir: Path) -> Path:
        self.builds += 1
        exe = self.executable_path(mode, dist_dir)
        exe.parent.mkdir(parents=True)
        work_dir.mkdir(parents=True)
        if self.fail:
            raise BuildFailed("PyInstaller failed")
        exe.write_text(f"build {self.builds}\n", encoding="utf-8")
        return exe


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "checkout"
    for name, text in {
        "incident_desk/__init__.py": "",
        "incident_desk/data/sample.txt": "sample",
        "packaging/incident_desk.spec": "spec",
        "packaging/hooks/hook-x.py": "",
        "pyproject.toml": "[project]",
        "uv.lock": "lock",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    monkeypatch.setattr(frozen_build, "ROOT", root)
    return root


@pytest.mark.parametrize(
    "changed", ["incident_desk/__init__.py", "incident_desk/data/sample.txt", "packaging/hooks/hook-x.py", "uv.lock"]
)
def test_any_change_to_an_input_makes_a_new_key(sources: Path, changed: str) -> None:
    before = frozen_build.build_key()
    assert frozen_build.build_key() == before
    (sources / changed).write_text("changed", encoding="utf-8")
    assert frozen_build.build_key() != before


def test_caches_and_build_outputs_are_not_inputs(sources: Path) -> None:
    before = frozen_build.build_key()
    for name in ("incident_desk/__pycache__/x.cpython-311.pyc", "packaging/dist/onedir/x", "packaging/build/x"):
        (sources / name).parent.mkdir(parents=True, exist_ok=True)
        (sources / name).write_text("output", encoding="utf-8")
    assert frozen_build.build_key() == before


def test_a_build_is_reused_until_the_sources_change_and_then_replaced(sources: Path, tmp_path: Path) -> None:
    build = StandInBuild()
    cache = tmp_path / "cache"
    first = frozen_build.cached_onedir_build(build, cache)
    assert frozen_build.cached_onedir_build(build, cache) == first
    assert build.builds == 1
    assert first.read_text(encoding="utf-8") == "build 1\n"

    (sources / "incident_desk" / "__init__.py").write_text("changed", encoding="utf-8")
    second = frozen_build.cached_onedir_build(build, cache)
    assert build.builds == 2
    assert second != first and second.read_text(encoding="utf-8") == "build 2\n"
    assert not first.exists(), "the build of the old sources was left in the cache"
    assert sorted(path.name for path in cache.iterdir()) == sorted([second.parents[2].name, "lock"])


def test_a_failed_build_leaves_nothing_to_reuse(sources: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(BuildFailed):
        frozen_build.cached_onedir_build(StandInBuild(fail=True), cache)
    assert [path.name for path in cache.iterdir()] == ["lock"]
    build = StandInBuild()
    assert frozen_build.cached_onedir_build(build, cache).is_file()
    assert build.builds == 1


def test_sessions_asking_at_once_share_one_build(sources: Path, tmp_path: Path) -> None:
    """flock(2) locks belong to an open file description: each call opens its own, so threads stand in for the
    xdist workers and sessions that ask together."""
    started = threading.Event()

    class SlowBuild(StandInBuild):
        def build(self, mode: str, dist_dir: Path, work_dir: Path) -> Path:
            started.set()
            threading.Event().wait(0.3)
            return super().build(mode, dist_dir, work_dir)

    build = SlowBuild()
    found: list[Path] = []
    askers = [
        threading.Thread(target=lambda: found.append(frozen_build.cached_onedir_build(build, tmp_path / "c")))
        for _ in range(3)
    ]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(timeout=10)
    assert started.is_set()
    assert build.builds == 1
    assert len(found) == 3 and len(set(found)) == 1
