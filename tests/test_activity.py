"""What the desk counts as work under way, so that numpy's import (which holds the interpreter lock) waits for a
quiet moment: searches and every request but a ping (a client firing every tool at once was stalled by it)."""

from __future__ import annotations

import importlib
import threading
import time
from typing import Any

import pytest

from incident_desk import server as server_module
from incident_desk.app import DeskApp
from incident_desk.core import activity
from incident_desk.core.activity import Activity
from incident_desk.core.search import engine
from incident_desk.server import build_server
from tests.helpers import AppFactory, connect


def test_work_under_way_is_counted_until_its_last_piece_ends_even_by_an_error() -> None:
    work = Activity()
    assert work.quiet_for() == float("inf"), "nothing ran yet"
    with work.busy():
        with work.busy():
            assert work.quiet_for() == 0
        assert work.quiet_for() == 0, "one piece is still under way"
    assert 0 < work.quiet_for() < 5
    with pytest.raises(RuntimeError), work.busy():
        raise RuntimeError("the request failed")
    assert 0 < work.quiet_for() < 5


def test_waiting_for_quiet_lasts_until_the_work_has_been_over_that_long() -> None:
    work = Activity()
    ended = threading.Event()

    def hold() -> None:
        with work.busy():
            time.sleep(0.3)
        ended.set()

    with work.busy():
        holder = threading.Thread(target=hold)
        holder.start()
    work.wait_until_quiet(0.2, every=0.01)
    assert ended.is_set(), "waited out the work under way"
    assert work.quiet_for() >= 0.2
    holder.join()


def test_a_wait_for_quiet_ends_unloaded_once_the_process_is_exiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader is not a daemon thread, so the desk's exit waits for it: once the main thread has finished it
    gives up on numpy instead of holding the exit until the client's requests have gone quiet."""
    work = Activity()
    exiting = threading.Event()
    threading.Timer(0.2, exiting.set).start()
    with work.busy():
        began = time.monotonic()
        assert work.wait_until_quiet(5.0, every=0.01, unless=exiting.is_set) is False
        assert time.monotonic() - began < 2.0
    assert work.wait_until_quiet(0.0, unless=exiting.is_set) is False, "quiet, but exiting: still not loaded"
    assert Activity().wait_until_quiet(0.0) is True
    imported: list[str] = []
    monkeypatch.setattr(importlib, "import_module", imported.append)
    monkeypatch.setattr(threading, "main_thread", lambda: threading.Thread())  # one that is not alive
    assert engine.load_numpy_when_quiet(quiet_seconds=0.0) is False and imported == []


def test_numpy_is_imported_only_after_the_requests_under_way_have_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = Activity()
    monkeypatch.setattr(engine, "ACTIVITY", fresh)
    imported: list[tuple[str, float]] = []
    monkeypatch.setattr(importlib, "import_module", lambda name: imported.append((name, time.monotonic())))
    loader = threading.Thread(target=engine.load_numpy_when_quiet, kwargs={"quiet_seconds": 0.2, "every": 0.01})
    with fresh.busy():
        loader.start()
        time.sleep(0.4)
        assert imported == [], "imported while a request was under way"
    ended = time.monotonic()
    loader.join(5)
    ((name, at),) = imported
    assert name == "numpy" and at - ended >= 0.2


@pytest.mark.anyio
async def test_a_served_request_is_work_under_way_and_a_ping_is_not(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    assert vars(server_module)["ACTIVITY"] is activity.ACTIVITY is vars(engine)["ACTIVITY"], "counted in one place"
    # This desk's requests alone: the process-wide count also holds other desks' searches (a search stack loader
    # left by an earlier test of this worker).
    counted = Activity()
    monkeypatch.setattr(server_module, "ACTIVITY", counted)
    seen: list[float] = []
    original = DeskApp.listing

    async def listing(self: DeskApp, *args: Any, **kwargs: Any) -> Any:
        seen.append(counted.quiet_for())
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(DeskApp, "listing", listing)
    async with connect(build_server(make_app(), defer_features=True), era) as client:
        assert not (await client.call_tool("list_incidents", {})).is_error
        assert seen and all(quiet == 0 for quiet in seen), "the call was under way while it listed"
        after_call = counted.quiet_for()
        assert 0 < after_call < 5, "the call ended"
        if era == "legacy":  # 2026-07-28 has no ping
            await client.send_ping()
            assert counted.quiet_for() > after_call, "a ping does not count as work"


def test_the_search_stack_loads_only_once_the_requests_under_way_are_answered(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first call that came before the loader loads what it needs itself; loading beside it only takes the
    interpreter lock from it (a first whole-file search took 20 ms longer), so the loader waits for it."""
    counted = Activity()
    monkeypatch.setattr(server_module, "ACTIVITY", counted)
    loaded: list[float] = []
    app = make_app()

    def load_search_stack(self: DeskApp) -> None:
        if self is app:  # not a loader an earlier test's desk left running
            loaded.append(counted.quiet_for())

    monkeypatch.setattr(DeskApp, "load_search_stack", load_search_stack)
    loader = server_module.LoadSearchStackAfterHandshake(build_server(app), app)
    thread = threading.Thread(target=loader._load)
    with counted.busy():
        thread.start()
        time.sleep(0.3)
        assert loaded == [], "the search stack loaded while a request was under way"
    thread.join(5)
    assert len(loaded) == 1 and loaded[0] > 0
