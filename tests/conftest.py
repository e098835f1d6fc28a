"""Fixtures: an isolated environment for every test, a server built per test, fakes on demand."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from incident_desk.app import DeskApp, build_app
from incident_desk.server import build_server
from incident_desk.settings import load_settings
from tests.fakes import FakeProvider, MemoryKeyring, running_fake_provider, using_keyring
from tests.helpers import ERAS, AppFactory


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
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_app() -> AppFactory:
    def factory(**overrides: Any) -> DeskApp:
        return build_app(load_settings(overrides))

    return factory


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


# Modules whose tests share a module-scoped fixture that is slow to make (a PyInstaller build, a PostgreSQL cluster,
# Alertmanager, Prometheus, a warmed uv cache, a built timeline page): under pytest-xdist each runs on one worker,
# so the fixture is made once. A module missing here still passes, it only makes its fixture once per worker.
SHARED_FIXTURE_MODULES = frozenset(
    {
        "test_act_approvals",
        "test_frozen",
        "test_memory",
        "test_metrics",
        "test_redact_corpus",
        "test_team_activity",
        "test_team_desk",
        "test_team_locks",
        "test_team_nginx",
        "test_timeline_browser",
        "test_uvx",
    }
)


def _start_rank(item: pytest.Item) -> int:
    """Longest first: the frozen build (minutes) starts at once, then the other slow tests, then the rest."""
    if item.get_closest_marker("frozen"):
        return 0
    if item.get_closest_marker("slow") or item.path.stem in SHARED_FIXTURE_MODULES:
        return 1
    return 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order and group the tests for parallel runs (``-n auto``; --dist loadgroup in pyproject.toml)."""
    for item in items:
        if item.path.stem in SHARED_FIXTURE_MODULES:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    items.sort(key=_start_rank)
