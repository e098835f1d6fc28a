"""Fixtures: an isolated environment for every test, a server built per test, fakes on demand."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from incident_desk.app import DeskApp
from incident_desk.assembly import build_app
from incident_desk.core.helper_pool import HELPERS
from incident_desk.server import build_server
from incident_desk.settings.model import load_settings
from tests.fakes import FakeProvider, MemoryKeyring, running_fake_provider, using_keyring
from tests.helpers import ERAS, LIMITS_OFF, AppFactory
from tests.sdk_metadata_cache import SDK_METADATA

pytest_plugins = ["tests.timing_alone", "tests.shared_services"]


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` runs two workers more than the cores (or PYTEST_XDIST_AUTO_NUM_WORKERS, as xdist reads it): the
    tests wait much of their time (a session's grace, an idle timeout, a watched lock, a neighbour's deadline),
    and the extra workers fill the cores they leave. On 2 cores the full lane's parallel step took 6 min 28 s
    with 3 workers and 6 min 4 s with 4, the fast lane's in-process step 2 min 29 s and 2 min 9 s
    (docs/development.md)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    return len(os.sched_getaffinity(0)) + 2


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's own settings, keychain or data dir, or writes to them."""
    for name in list(os.environ):
        if name.startswith("INCIDENT_DESK_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("INCIDENT_DESK_AUDIT_DB", str(tmp_path / "audit" / "audit.sqlite3"))
    monkeypatch.setenv("INCIDENT_DESK_ACT_LIMITS", LIMITS_OFF)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_app() -> Iterator[AppFactory]:
    """Desks built for one test; their memory keepers stop with it, as a served desk's stop when it exits, so
    that remembering 20,000 incidents offered by one test does not hold the interpreter lock in the next."""
    built: list[DeskApp] = []

    def factory(**overrides: Any) -> DeskApp:
        app = build_app(load_settings(overrides))
        built.append(app)
        return app

    yield factory
    for app in built:
        if app.memory is not None:
            app.memory.stop(timeout=0)  # what is queued is skipped; an idle worker is woken and ends


@pytest.fixture
def make_server(make_app: AppFactory) -> Callable[..., MCPServer]:
    def factory(**overrides: Any) -> MCPServer:
        return build_server(make_app(**overrides))

    return factory


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A model provider on loopback (tests/fakes.py): set what it answers, read what it was sent."""
    with running_fake_provider() as provider:
        yield provider


@pytest.fixture
def memory_keyring(_isolated_environment: None) -> Iterator[MemoryKeyring]:
    """An in-memory keychain installed over the null backend that _isolated_environment selects."""
    with using_keyring(MemoryKeyring()) as backend:
        yield backend


def _start_rank(item: pytest.Item, timed_modules: set[str]) -> int:
    """Longest first: the frozen build (minutes) starts at once, then the modules with slow tests, then the rest,
    and last the modules holding a timing test (each timing body waits for the test the other worker is in: at the
    end of a run those are short, or timing tests too)."""
    if item.get_closest_marker("frozen"):
        return 0
    if item.nodeid.partition("::")[0] in timed_modules:
        return 3
    if item.get_closest_marker("slow"):
        return 1
    return 2


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Parallel runs (``-n auto``) hand out whole modules (--dist loadscope: a module's shared fixture, such as the
    frozen build or a PostgreSQL cluster, is made once) in the order of their first test here, longest first
    (--no-loadscope-reorder keeps it)."""
    timed_modules = {item.nodeid.partition("::")[0] for item in items if item.get_closest_marker("timing")}
    items.sort(key=lambda item: _start_rank(item, timed_modules))


@pytest.fixture(autouse=True)
def _sdk_metadata_cache(request: pytest.FixtureRequest) -> None:
    """The SDK's per-tool metadata made once per signature (tests/sdk_metadata_cache.py), except in timing tests."""
    SDK_METADATA.enabled = request.node.get_closest_marker("timing") is None


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the imports and the collection made lives as long as the worker: frozen, as a served desk freezes
    its start-up (transport.py), so a full collection does not walk it. Unfrozen, a full collection walked some
    230,000 objects for 0.1 s (0.3 s under load), and a timing test's loop or ping could wait on it."""
    gc.freeze()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The helper processes a big in-process search or timeline started end with the session (each worker's,
    in a parallel run), rather than idle for minutes or at the interpreter's exit: nothing of this step is left
    beside the next one (tests/timing_alone.py waits for such leftovers before serial timing tests)."""
    HELPERS.end_all()
