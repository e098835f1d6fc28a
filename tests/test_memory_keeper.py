"""The memory keeper's worker and its history pass end when the desk stops them, whatever they were waiting on.

A served desk stops its keeper as it exits; a worker waiting for more work, or a history pass waiting for the
worker, must not hold that exit up (the worker once waited out its idle wait; the pass waited for ever on
incidents the stopped worker left queued).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, BinaryIO

import pytest

from incident_desk import memory_keeper
from incident_desk.memory_keeper import MemoryKeeper
from tests.helpers import AppFactory


def _keeper(make_app: AppFactory) -> tuple[MemoryKeeper, list[Any]]:
    app = make_app()
    assert app.memory is not None
    incidents = list(app.sources.listing().incidents.values())
    assert len(incidents) >= 2, "one incident to be remembering and one to leave queued"
    return app.memory, incidents


def test_an_idle_worker_ends_as_soon_as_the_keeper_stops(make_app: AppFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_keeper, "IDLE_SECONDS", 60.0)
    keeper, incidents = _keeper(make_app)
    keeper.offer(incidents[:1])
    assert keeper.wait_idle(10)
    assert keeper.stop(timeout=5), "the worker waited out its idle wait (60 s) before it saw the stop"
    assert keeper.pending == 0


def test_the_history_pass_ends_when_the_keeper_stops_with_incidents_still_queued(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_keeper, "BATCH", 1)
    keeper, _incidents = _keeper(make_app)
    reading, release = threading.Event(), threading.Event()
    real_read = keeper._read_log

    def slow_read(incident_id: str, read: Callable[[BinaryIO], bytes]) -> bytes:
        reading.set()
        release.wait(10)
        return real_read(incident_id, read)

    monkeypatch.setattr(keeper, "_read_log", slow_read)
    keeper.learn()
    assert reading.wait(10), "the history pass offered nothing"
    assert not keeper.stop(timeout=0)  # the worker is inside its first incident
    release.set()
    (learning,) = [thread for thread in threading.enumerate() if thread.name == "incident-memory-learn"]
    learning.join(5)
    assert not learning.is_alive(), "the history pass waits for incidents the stopped worker will not remember"
    assert keeper.pending > 0 and not keeper.learnt(0)
