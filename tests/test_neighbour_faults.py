"""No neighbour freezes the desk: against an Alertmanager that drips a byte a second, one that accepts
and never answers, and one that sends a 200 MB body, every tool, resource, prompt and completion is fired at
once, over stdio and over HTTP, while the client pings; every ping answers within 0.5 s, ``initialize`` never
waits on the source, the calls end by the source's deadline, and the listing names the source's fault.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import PromptReference, ResourceTemplateReference

from tests.faulty_neighbour import FaultyNeighbour, faulty_neighbour
from tests.helpers import ROOT, child_env, pinging, text_of
from tests.http_desk import run_desk

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.timing]

DEADLINE = 2.0  # the source's deadline in these desks
PING_WITHIN = 0.5
INITIALIZE_WITHIN = 1.0
# Calls start this far apart: about 60 of them over 1.2 s, each waiting up to the source's deadline.
STAGGER = 0.02
ALERT_ID = "prod-0123456789abcdef"  # an id the faulty source would serve: asking for it waits on the source
FAULT_TEXT = {
    "drip": f"alertmanager 'prod' at {{url}} did not answer within {DEADLINE:g}s",
    "hang": f"alertmanager 'prod' at {{url}} did not answer within {DEADLINE:g}s",
    "huge": "alertmanager 'prod' at {url} answered too large a body: it sent more than 8388608 bytes",
}
TOOL_CALLS: dict[str, list[dict[str, Any]]] = {
    "list_incidents": [{}, {"status": "all"}],
    "read_incident_log": [{"incidentId": "INC-1"}, {"incidentId": ALERT_ID}],
    "search_incident_log": [{"incidentId": "INC-1", "pattern": "disk"}, {"incidentId": ALERT_ID, "pattern": "x"}],
    "get_runbook": [{"service": "db"}],
    "get_audit_log": [{}],
    "summarize_incident": [{"incidentId": "INC-1"}, {"incidentId": ALERT_ID}],
    "restart_service": [{"service": "db"}],
    "list_service_actions": [{"service": "db"}],
    "run_service_action": [{"service": "db", "action": "flush"}],
    "show_incident_timeline": [{"incidentId": "INC-1"}, {"incidentId": ALERT_ID}],
    "query_incident_metrics": [{"incidentId": "INC-1"}],
    "acknowledge_incident": [{"incidentId": "INC-1"}, {"incidentId": ALERT_ID}],
    "add_incident_note": [{"incidentId": "INC-1", "text": "n"}, {"incidentId": ALERT_ID, "text": "n"}],
    "get_incident_activity": [{"incidentId": "INC-1"}, {"incidentId": ALERT_ID}],
    "resolve_incident": [{"incidentId": "INC-1", "resolution": "r"}, {"incidentId": ALERT_ID, "resolution": "r"}],
    "silence_incident": [{"incidentId": ALERT_ID, "minutes": 5, "reason": "r"}],
    "unsilence_incident": [{"incidentId": ALERT_ID}],
    "find_similar_incidents": [{"incidentId": "INC-1"}, {"incidentId": ALERT_ID}],
    "save_postmortem": [{"incidentId": "INC-1", "markdown": "m"}, {"incidentId": ALERT_ID, "markdown": "m"}],
    "get_shift_handoff": [{}],
    "investigate_incident": [{"incidentId": "INC-1"}, {"incidentId": ALERT_ID}],
}
RESOURCE_TEMPLATES = {
    "incident://{id}/activity": ["incident://INC-1/activity", f"incident://{ALERT_ID}/activity"],
    "incident://{id}/log": ["incident://INC-1/log", f"incident://{ALERT_ID}/log"],
    "runbook://{service}": ["runbook://db"],
    "postmortem://{id}": ["postmortem://INC-1", f"postmortem://{ALERT_ID}"],
}


@pytest.fixture(params=["drip", "hang", "huge"])
def neighbour(request: pytest.FixtureRequest) -> Iterator[FaultyNeighbour]:
    with faulty_neighbour(request.param) as running:
        yield running


def desk_config(tmp_path: Path, source_url: str | None) -> Path:
    """A folder desk (INC-1 on db, with its runbook) and, when given, an Alertmanager source at ``source_url``."""
    root = tmp_path / "desk"
    incident = root / "incidents" / "INC-1"
    incident.mkdir(parents=True, exist_ok=True)
    (incident / "incident.toml").write_text(
        'title = "Disk full"\nservice = "db"\nseverity = "high"\nstatus = "open"\nopened = 2026-11-30T10:00:00Z\n'
    )
    (incident / "log.txt").write_text("2026-11-30T10:00:00Z db ERROR disk 100%\n")
    (root / "runbooks").mkdir(exist_ok=True)
    (root / "runbooks" / "db.md").write_text("# db\nFree space.\n")
    config = tmp_path / ("desk.toml" if source_url else "plain.toml")
    source = (
        f'\n[[incident_sources]]\nkind = "alertmanager"\nname = "prod"\nurl = "{source_url}"\n'
        f"timeout_seconds = {DEADLINE}\ncache_seconds = 0\n"
        # The service's Prometheus is the same misbehaving neighbour.
        f'\n[services.db.metrics]\nprometheus = "{source_url}"\nqueries = {{ up = "up" }}\n'
        f"timeout_seconds = {DEADLINE}\n"
        if source_url
        else ""
    )
    config.write_text(f'data_dir = "{root}"\n\n[[incident_sources]]\nkind = "folder"\n{source}')
    return config


async def _outcome(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except Exception as exc:  # a protocol error is an answer too (e.g. -32602 for an unknown incident)
        return exc


async def listed_resources(client: Client) -> list[str]:
    """The resources the desk lists, after checking its tools, templates and prompts are the ones fired here, and
    a first folder log read: the features and the log reader are loaded, as in a desk that has served a request."""
    tools = {tool.name for tool in (await client.list_tools()).tools}
    assert tools == set(TOOL_CALLS), "a tool was added or removed: give it calls here"
    resources = [str(resource.uri) for resource in (await client.list_resources()).resources]
    templates = {template.uri_template for template in (await client.list_resource_templates()).resource_templates}
    assert templates == set(RESOURCE_TEMPLATES)
    prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
    assert prompts == {"postmortem", "handoff"}
    await client.call_tool("read_incident_log", {"incidentId": "INC-1"})
    return resources


async def fire_everything(client: Client, resources: list[str]) -> dict[str, list[Any]]:
    """Every tool, resource, template, prompt and completion at once; their answers (or errors)."""
    calls: dict[str, list[Callable[[], Awaitable[Any]]]] = {}
    for name, argument_sets in TOOL_CALLS.items():
        calls[name] = [partial(client.call_tool, name, arguments) for arguments in argument_sets]
    for uri in resources + [uri for uris in RESOURCE_TEMPLATES.values() for uri in uris]:
        calls[uri] = [partial(client.read_resource, uri)]
    calls["postmortem"] = [
        partial(client.get_prompt, "postmortem", {"incidentId": incident_id}) for incident_id in ("INC-1", ALERT_ID)
    ]
    calls["handoff"] = [partial(client.get_prompt, "handoff", {})]
    calls["complete"] = [
        lambda: client.complete(
            PromptReference(type="ref/prompt", name="postmortem"), {"name": "incidentId", "value": "I"}
        ),
        lambda: client.complete(
            ResourceTemplateReference(type="ref/resource", uri="runbook://{service}"), {"name": "service", "value": ""}
        ),
    ]
    answers: dict[str, list[Any]] = {name: [None] * len(made) for name, made in calls.items()}

    async def one(name: str, index: int, call: Callable[[], Awaitable[Any]]) -> None:
        answers[name][index] = await _outcome(call())

    async with anyio.create_task_group() as group:
        for name, made in calls.items():
            for index, call in enumerate(made):
                group.start_soon(one, name, index, call)
                # Started one after another, not in one burst: the pings measure waiting on the source, not the
                # cost of parsing two dozen requests that arrive in the same millisecond.
                await anyio.sleep(STAGGER)
    return answers


async def exercise(client: Client, neighbour: FaultyNeighbour) -> tuple[dict[str, list[Any]], list[float], float]:
    resources = await listed_resources(client)
    async with pinging(client) as latencies:
        await anyio.sleep(0.1)  # pinging before the calls start
        began = time.perf_counter()
        answers = await fire_everything(client, resources)
        took = time.perf_counter() - began
        await anyio.sleep(0.1)
    return answers, latencies, took


def assert_served_around_the_fault(
    answers: dict[str, list[Any]], latencies: list[float], took: float, neighbour: FaultyNeighbour
) -> None:
    assert len(latencies) >= 10, "the pings did not run"
    assert max(latencies) < PING_WITHIN, f"{neighbour.fault}: slowest ping {max(latencies):.2f}s"
    assert took < 4 * DEADLINE, f"{neighbour.fault}: the calls took {took:.1f}s for a {DEADLINE}s deadline"
    assert neighbour.requests >= 1, "the desk never asked the source"
    listed = answers["list_incidents"][0]
    assert [entry["id"] for entry in listed.structured_content["incidents"]] == ["INC-1"]
    (skipped,) = listed.structured_content["skipped"]
    assert skipped["entry"] == "source prod"
    assert FAULT_TEXT[neighbour.fault].format(url=neighbour.url) in skipped["reason"], skipped
    assert text_of(answers["incident://index"][0]) == "INC-1"
    folder_timeline, alert_timeline = answers["show_incident_timeline"]
    assert not folder_timeline.is_error and text_of(folder_timeline).startswith("INC-1 db: Disk full")
    assert alert_timeline.is_error and f"Incident {ALERT_ID} cannot be served: its source is down" in text_of(
        alert_timeline
    )
    (metrics,) = answers["query_incident_metrics"]
    prometheus_fault = FAULT_TEXT[neighbour.fault].replace("alertmanager 'prod'", "prometheus for db")
    assert metrics.is_error and text_of(metrics).startswith(prometheus_fault.format(url=neighbour.url)), text_of(
        metrics
    )
    assert "unavailable: prometheus for db" in text_of(folder_timeline)
    assert not answers["read_incident_log"][0].is_error and "disk 100%" in text_of(answers["read_incident_log"][0])
    assert text_of(answers["get_runbook"][0]).startswith("# db")
    folder_ack, alert_ack = answers["acknowledge_incident"]
    assert text_of(folder_ack).startswith("ACKNOWLEDGED INC-1 by ")
    assert alert_ack.is_error and "its source is down" in text_of(alert_ack)
    assert "INC-1" in answers["complete"][0].completion.values
    (handoff,) = answers["get_shift_handoff"]
    incident_lines = [line for line in text_of(handoff).split("\n") if line.startswith("- INC-1 [")]
    assert not handoff.is_error and incident_lines and "] db: Disk full" in incident_lines[0]
    assert f"- source prod: {FAULT_TEXT[neighbour.fault].format(url=neighbour.url)}" in text_of(handoff)
    for name, outcomes in answers.items():
        for outcome in outcomes:
            assert outcome is not None, name


def _initialize_line() -> bytes:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    return (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}) + "\n").encode()


def spawn_to_initialized(config: Path, tmp_path: Path) -> tuple[float, float]:
    """Seconds from starting a stdio desk to its initialize answer, and from its start-up line to that answer (the
    client sends initialize once the desk says it is starting, so the second figure is the request alone)."""
    env = child_env(tmp_path / "audit.sqlite3", INCIDENT_DESK_LOG_LEVEL="info")
    began = time.perf_counter()
    with subprocess.Popen(
        [sys.executable, "-m", "incident_desk", "--config", str(config)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        try:
            assert process.stdin is not None and process.stdout is not None and process.stderr is not None
            while b"incident-desk starting" not in (line := process.stderr.readline()):
                assert line, "the desk ended before it said it was starting"
            asked = time.perf_counter()
            process.stdin.write(_initialize_line())
            process.stdin.flush()
            answer = json.loads(process.stdout.readline())
            answered = time.perf_counter()
        finally:
            process.kill()
    assert "result" in answer, answer
    return answered - began, answered - asked


async def test_over_stdio_the_desk_answers_around_a_faulty_source(neighbour: FaultyNeighbour, tmp_path: Path) -> None:
    plain, _ = spawn_to_initialized(desk_config(tmp_path, None), tmp_path)
    config = desk_config(tmp_path, neighbour.url)
    with_source, request = spawn_to_initialized(config, tmp_path)
    assert with_source - plain < INITIALIZE_WITHIN, (
        f"{neighbour.fault}: initialize came {with_source:.2f}s after the start, {plain:.2f}s without the source"
    )
    assert request < INITIALIZE_WITHIN, f"{neighbour.fault}: initialize itself took {request:.2f}s"
    env = child_env(tmp_path / "audit.sqlite3", INCIDENT_DESK_LOG_LEVEL="warning")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "incident_desk", "--config", str(config)], cwd=str(ROOT), env=env
    )
    async with Client(params, mode="legacy") as client:
        answers, latencies, took = await exercise(client, neighbour)
    assert_served_around_the_fault(answers, latencies, took, neighbour)


@asynccontextmanager
async def http_client(url: str, http: httpx2.AsyncClient) -> AsyncIterator[Client]:
    async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        yield client


def peak_memory_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.http
async def test_over_http_the_desk_answers_around_a_faulty_source(neighbour: FaultyNeighbour, tmp_path: Path) -> None:
    with run_desk(tmp_path, "--config", str(desk_config(tmp_path, neighbour.url))) as desk:
        initialized: list[float] = []

        async def initialize_meanwhile() -> None:
            await anyio.sleep(0.3)  # the other calls are waiting on the source by now
            began = time.perf_counter()
            async with http_client(desk.url, late_http) as late:
                initialized.append(time.perf_counter() - began)
                await late.send_ping()

        # Both made before the pings: making one loads the CA bundle, which holds this test's own loop.
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            httpx2.AsyncClient(timeout=30) as late_http,
            http_client(desk.url, http) as client,
            anyio.create_task_group() as group,
        ):
            group.start_soon(initialize_meanwhile)
            answers, latencies, took = await exercise(client, neighbour)
        peak = peak_memory_bytes(desk.process.pid)
    assert_served_around_the_fault(answers, latencies, took, neighbour)
    assert initialized and initialized[0] < INITIALIZE_WITHIN, f"initialize took {initialized}"
    if neighbour.fault == "huge":
        # At main the desk read all 200 MB (293 MB resident); now at most the 8 MiB cap.
        assert peak < 150 * 1024 * 1024, f"peak resident memory {peak / 2**20:.0f} MiB"
        # Each answer got out at most the cap and what the sockets' buffers hold: the desk stopped reading there.
        assert max(neighbour.answers_sent) < 8 * 1024 * 1024 + 32 * 1024 * 1024, neighbour.answers_sent
