"""Tests that bound a latency run alone: while a ``timing`` test's body runs, no other test of the run runs.

A parallel run (``-n auto``) keeps both cores of the CI machine busy, and the desks, neighbours and builds its tests
start want CPU too. A ping bounded at 0.5 s then measures the machine, not the desk: CI at 5b8ad6f saw one of
1.34 s beside a frozen build, where the same test alone stays under 0.1 s. So every test holds a lock shared with
the run's other tests, and a ``timing`` test's body holds it alone: it waits for the test each other worker is in
to end, and they wait for it. Its set-up and tear-down (a desk started, a neighbour that drips) share the machine
like any test's. A turnstile taken on the way in keeps a waiting ``timing`` test ahead of tests arriving after it,
and the body starts once what earlier tests wrote is on the disk.

One folder of lock files per run, made by the controller and named to its workers; a run without workers has
nothing of its own beside it and takes no lock. Such a run (the lanes' serial timing step) still starts each
timing body once what earlier tests wrote is on the disk, and, before its first test, waits (at most
``SETTLE_SECONDS``) for what an earlier step of the lane left running in this checkout's environment (xdist
workers winding down, helper processes, desks, mypy), and says in its log what it waited for and the machine's
load: a timing failure then shows whether the run or the machine had company.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_FOLDER_KEY = "incident_desk_timing_locks"
SETTLE_SECONDS = 30.0
_SHARE = pytest.StashKey["_MachineShare"]()
_FOLDER = pytest.StashKey[Path]()


class _MachineShare:
    """Two lock files: the room (shared by tests, held alone by a timing test's body) and its turnstile."""

    def __init__(self, folder: Path) -> None:
        self._turnstile = os.open(folder / "turnstile", os.O_RDWR | os.O_CREAT, 0o600)
        self._room = os.open(folder / "room", os.O_RDWR | os.O_CREAT, 0o600)

    @contextmanager
    def holding(self, *, alone: bool) -> Iterator[None]:
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        if alone:
            # What earlier tests wrote (generated logs of hundreds of MiB) goes to the disk now, not in the body:
            # the kernel's writeback under way stalls unrelated processes (a desk idle in select() once woke 0.4 s
            # late while 8 GB was being written beside it).
            os.sync()
        try:
            yield
        finally:
            fcntl.flock(self._room, fcntl.LOCK_UN)


def pytest_configure(config: pytest.Config) -> None:
    worker_input: dict[str, Any] | None = getattr(config, "workerinput", None)
    if worker_input is None:
        if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
            config.stash[_FOLDER] = Path(tempfile.mkdtemp(prefix="incident-desk-timing-"))
    elif _FOLDER_KEY in worker_input:
        config.stash[_SHARE] = _MachineShare(Path(worker_input[_FOLDER_KEY]))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's hook, in the controller: each worker is told where the run's lock files are."""
    folder = node.config.stash.get(_FOLDER, None)
    if folder is not None:
        node.workerinput[_FOLDER_KEY] = str(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[1])


def left_running(interpreter: str | None = None) -> list[str]:
    """Processes of this checkout's environment (their command line names ``interpreter``, by default this
    environment's ``bin/``; ``$TIMING_SETTLE_COMMAND`` names another) other than this one and its ancestors, as
    ``pid command``: what an earlier step of the lane left running. Empty where there is no /proc."""
    proc = Path("/proc")
    if not (proc / "self").is_dir():
        return []
    ours = set()
    pid = os.getpid()
    try:
        while pid > 1:
            ours.add(pid)
            pid = _parent(pid)
    except OSError:
        pass
    if interpreter is None:
        interpreter = os.environ.get("TIMING_SETTLE_COMMAND") or f"{sys.prefix}{os.sep}bin{os.sep}"
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in ours:
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if interpreter in command:
            found.append(f"{entry.name} {command[:120]}")
    return found


def _settle(config: pytest.Config) -> None:
    """Wait for what an earlier step left running, then write the machine's load and any process still there."""
    began = time.monotonic()
    while (still := left_running()) and time.monotonic() - began < SETTLE_SECONDS:
        time.sleep(0.2)
    waited = time.monotonic() - began
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    line = f"timing tests start after {waited:.1f} s, load average {load} on {os.cpu_count()} cores"
    line += "; still running: " + "; ".join(still) if still else "; nothing of an earlier step still running"
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


def pytest_collection_finish(session: pytest.Session) -> None:
    """In a run without workers that holds timing tests, let the machine settle before the first test."""
    config = session.config
    if hasattr(config, "workerinput") or config.getoption("numprocesses", None):
        return
    if any(_timing(item) for item in session.items):
        _settle(config)


@contextmanager
def _held(item: pytest.Item, *, alone: bool) -> Iterator[None]:
    share = item.config.stash.get(_SHARE, None)
    if share is None:
        if alone:
            os.sync()  # as below: the writeback of earlier tests' files does not stall the body
        yield
        return
    with share.holding(alone=alone):
        yield


def _timing(item: pytest.Item) -> bool:
    return item.get_closest_marker("timing") is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _held(item, alone=False):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _held(item, alone=_timing(item)):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with _held(item, alone=False):
        return (yield)
