"""The PyInstaller build the frozen tests drive, made once for a given set of inputs and reused after that.

A build costs about 35 s of a 2-core VM, and `.ci/run` runs tests/test_frozen.py in two pytest sessions (its
timing test serially after the parallel step), so each used to build its own. The build now goes to a folder in
pytest's cache (``.pytest_cache/d/frozen-build/<key>``), named by a hash of everything that goes into it: the
package's files, packaging/ (the spec, its hooks, build.py, the entry point), pyproject.toml and uv.lock, the
interpreter, and the name and version of every installed distribution. A session finds the folder of the current
inputs, or builds it; any change to the sources makes a new key, so what the tests drive is always a build of
the current sources. A file lock makes xdist workers and concurrent sessions wait for one build rather than race
it, and a build is moved into place only once it has succeeded, so a failed or interrupted build is never reused.
Older builds are removed when a new one is made (a onedir build is about 100 MB).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from tests.helpers import ROOT


class BuildScript(Protocol):
    """What the cache calls of packaging/build.py."""

    def build(self, mode: str, dist_dir: Path, work_dir: Path) -> Path: ...

    def executable_path(self, mode: str, dist_dir: Path) -> Path: ...


SKIPPED_PARTS = frozenset({"__pycache__", "build", "dist"})


def _input_files() -> Iterator[Path]:
    for folder in (ROOT / "incident_desk", ROOT / "packaging"):
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if path.is_file() and not SKIPPED_PARTS.intersection(relative.parts) and path.suffix != ".pyc":
                yield path
    yield ROOT / "pyproject.toml"
    yield ROOT / "uv.lock"


def build_key() -> str:
    """A hash of every input of the build: the sources, the lock, the interpreter and what is installed."""
    digest = hashlib.sha256()
    digest.update(f"{sys.version}\0{os.path.realpath(sys.executable)}\0".encode())
    for dist in sorted(
        (str(dist.metadata["Name"]).lower(), dist.version) for dist in importlib.metadata.distributions()
    ):
        digest.update(f"{dist[0]}=={dist[1]}\0".encode())
    for path in _input_files():
        digest.update(f"{path.relative_to(ROOT).as_posix()}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:24]


def cached_onedir_build(build_script: BuildScript, cache: Path) -> Path:
    """The onedir executable for the current inputs, built into ``cache`` unless a build of them is there."""
    import fcntl  # POSIX: the caller builds without the cache on Windows

    cache.mkdir(parents=True, exist_ok=True)
    key = build_key()
    done = cache / key
    lock = os.open(cache / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        exe = Path(build_script.executable_path("onedir", done))
        if exe.is_file():
            return exe
        for stale in cache.iterdir():
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{key}.building-", dir=cache))
        try:
            build_script.build("onedir", staging / "dist", staging / "work")
            (staging / "dist").rename(done)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return exe
    finally:
        os.close(lock)
