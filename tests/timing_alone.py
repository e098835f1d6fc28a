"""Tests that bound a latency run alone: while a ``timing`` test's body runs, no other test of the run runs.

A parallel run (``-n auto``) keeps both cores of the CI machine busy, and the desks, neighbours and builds its tests
start want CPU too. A ping bounded at 0.5 s then measures the machine, not the desk: CI at 5b8ad6f saw one of
1.34 s beside a frozen build, where the same test alone stays under 0.1 s. So every test holds a lock shared with
the run's other tests, and a ``timing`` test's body holds it alone: it waits for the test each other worker is in
to end, and they wait for it. Its set-up and tear-down (a desk started, a neighbour that drips) share the machine
like any test's. A turnstile taken on the way in keeps a waiting ``timing`` test ahead of tests arriving after it,
and the body starts once what earlier tests wrote is on the disk.

One folder of lock files per run, made by the controller and named to its workers; a run without workers has
nothing beside it and takes no lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_FOLDER_KEY = "incident_desk_timing_locks"
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


@contextmanager
def _held(item: pytest.Item, *, alone: bool) -> Iterator[None]:
    share = item.config.stash.get(_SHARE, None)
    if share is None:
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
