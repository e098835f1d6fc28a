"""Shared fixtures: a server built per test, and clients opened inside each test, in either protocol era."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from incident_desk.server import DeskApp, build_app, build_server
from incident_desk.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
ERAS = ["legacy", "2026-07-28"]
SAMPLE_1043_LOG = (
    "11:02:44 search-api WARN index segment merge running\n11:02:51 search-api INFO p99 latency 840ms (SLO 500ms)\n"
)


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


def child_env(audit_db: Path, **extra: str) -> dict[str, str]:
    """The environment of a desk started as a child process: none of the developer's settings or keychain."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    env.update(INCIDENT_DESK_AUDIT_DB=str(audit_db), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    env.update(extra)
    return env


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


AppFactory = Callable[..., DeskApp]


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


@asynccontextmanager
async def connect(server: MCPServer, mode: str, **callbacks: Any) -> AsyncIterator[Client]:
    async with Client(server, mode=mode, **callbacks) as client:  # type: ignore[arg-type]
        yield client


def text_of(result: Any) -> str:
    """The single text block of a tool result or a resource read."""
    if hasattr(result, "contents"):
        (content,) = result.contents
        return str(content.text)
    (content,) = result.content
    return str(content.text)


@pytest.fixture
def fake_provider() -> Iterator[Any]:
    """A model provider on loopback (tests/fakes.py): set what it answers, read what it was sent."""
    from tests.fakes import running_fake_provider

    with running_fake_provider() as provider:
        yield provider


@pytest.fixture
def memory_keyring(_isolated_environment: None) -> Iterator[Any]:
    """An in-memory keychain installed over the null backend that _isolated_environment selects."""
    from tests.fakes import MemoryKeyring, using_keyring

    with using_keyring(MemoryKeyring()) as backend:
        yield backend
