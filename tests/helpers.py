"""Helpers shared by the tests: paths, eras, a client connected to an in-process server, result text."""

from __future__ import annotations

import gc
import itertools
import os
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer
from pydantic import TypeAdapter

from incident_desk.app import DeskApp

ROOT = Path(__file__).resolve().parent.parent
ERAS = ["legacy", "2026-07-28"]
SAMPLE_1043_LOG = (
    "11:02:44 search-api WARN index segment merge running\n11:02:51 search-api INFO p99 latency 840ms (SLO 500ms)\n"
)
# What investigate_incident finds in INC-1043, as the summary's provider and raw steps and the postmortem add it.
SAMPLE_1043_FINDINGS = (
    "Findings of investigate_incident (ranked, no model):\n"
    "INC-1043 search-api: search-api p99 latency above SLO during segment merge\n"
    "evidence from the whole log (108 bytes, 2 lines); no baseline (no line before 10:52Z), so no template is new\n"
    "1. [runbook 0.40] runbook section 'p99 latency above SLO (500 ms)' (matches: index, latency, merge, running, "
    "segment) (runbook runbook://search-api; line 5; section p99 latency above SLO (500 ms))\n"
    "2. [log_pattern 0.35] warn x1: search-api WARN index segment merge running (lines 1-1)\n"
    "3. [runbook 0.20] runbook section 'search-api runbook' (matches: latency) (runbook runbook://search-api; line 1; "
    "section search-api runbook)\n"
    "4. [log_pattern 0.15] line x1: search-api INFO <*> latency <*> (SLO <*>) (lines 2-2)"
)

AppFactory = Callable[..., DeskApp]
T = TypeVar("T")


def free_port() -> int:
    """A loopback port nobody listens on right now (a server started on it may still lose a race: retry)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Tests of everything but the act limits restart a service again and again: the limits are off for them, here and in
# conftest, and tests/test_act_limits.py sets its own.
LIMITS_OFF = '{"per_person_per_hour": 0, "restarts_per_service_per_hour": 0, "cooldown_seconds": 0}'


def child_env(audit_db: Path, **extra: str) -> dict[str, str]:
    """The environment of a desk started as a child process: none of the developer's settings or keychain."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    env.update(INCIDENT_DESK_AUDIT_DB=str(audit_db), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    env.update(INCIDENT_DESK_ACT_LIMITS=LIMITS_OFF)
    env.update(extra)
    return env


def journal_steps(audit_db: Path) -> list[tuple[str, str]]:
    """Each decision in the SQLite journal a desk process wrote at ``audit_db``, oldest first: (outcome, approver)."""
    with closing(sqlite3.connect(audit_db)) as db:
        return [(str(o), str(a)) for o, a in db.execute("SELECT outcome, approver FROM decisions ORDER BY id")]


@asynccontextmanager
async def connect(server: MCPServer, mode: str, **callbacks: Any) -> AsyncIterator[Client]:
    async with Client(server, mode=mode, **callbacks) as client:
        yield client


def answer_schemas(server: MCPServer) -> dict[str, dict[str, Any]]:
    """Each tool's whole answer schema, as its answer model gives it (``tools/list`` publishes a lean one, or none
    for a text answer: protocol/tool_schemas.py). The SDK keeps the model on the registered tool."""
    return {
        tool.name: TypeAdapter(tool.fn_metadata.output_model).json_schema()
        for tool in server._tool_manager.list_tools()
        if tool.fn_metadata.output_model is not None
    }


def text_of(result: Any) -> str:
    """The single text block of a tool result or a resource read."""
    if hasattr(result, "contents"):
        (content,) = result.contents
        return str(content.text)
    (content,) = result.content
    return str(content.text)


def synthetic_incidents(root: Path, count: int) -> Path:
    """A data directory of ``count`` minimal open incidents (INC-0 ...), each with a one-line log."""
    for number in range(count):
        entry = root / "incidents" / f"INC-{number}"
        entry.mkdir(parents=True)
        (entry / "incident.toml").write_text(
            'title="t"\nservice="svc"\nseverity="SEV3"\nstatus="open"\nopened=2026-01-01T00:00:00Z\n'
        )
        (entry / "log.txt").write_text("line\n")
    return root


@asynccontextmanager
async def pinging(
    client: Client, *, asks: Sequence[Callable[[], Awaitable[object]]] = (), every: float = 0.02
) -> AsyncIterator[list[float]]:
    """Ping every ``every`` seconds while the body runs (or make the ``asks`` in turn); yields each answer's
    latency. The test process's own garbage collection is held off meanwhile: its pauses are not the desk's."""
    latencies: list[float] = []
    turns = itertools.cycle(asks or (client.send_ping,))

    async def probe() -> None:
        for ask in turns:
            began = time.perf_counter()
            await ask()
            latencies.append(time.perf_counter() - began)
            await anyio.sleep(every)

    gc.disable()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(probe)
            yield latencies
            group.cancel_scope.cancel()
    finally:
        gc.enable()


async def until_logged(
    capfd: Any, event: str, attempt: Callable[[], Awaitable[T]], *, tries: int, pause: float = 0.0
) -> T:
    """``attempt`` again until a desk whose stderr ``capfd`` captures logs ``event`` (helpers that start with a
    first call and take part in a later one, say); fails, with the log's end, after ``tries``."""
    for _ in range(tries):
        answer = await attempt()
        if event in capfd.readouterr().err:
            return answer
        await anyio.sleep(pause)
    raise AssertionError(f"never logged {event!r}: " + capfd.readouterr().err[-2000:])
