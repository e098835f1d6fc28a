"""The desk's own telemetry: /metrics behind the token, scraped by a real Prometheus; the slow-call log line."""

from __future__ import annotations

import http.server
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult

from incident_desk.assembly import build_app
from incident_desk.server import build_server
from incident_desk.settings.model import load_settings
from tests.asgi_desk import InProcessDesk, in_process_desk, open_session_in_process
from tests.helpers import ROOT, free_port
from tests.http_desk import HANDSHAKE, MCP_HEADERS, TOKEN, desk_env, open_session, run_desk

pytestmark = [pytest.mark.anyio, pytest.mark.http]

PROMETHEUS = shutil.which("prometheus")
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def parse_exposition(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text exposition, keyed by name and label set."""
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        matched = SAMPLE.match(line)
        assert matched, f"not a sample line: {line!r}"
        labels = frozenset(re.findall(r'([a-z_]+)="([^"]*)"', matched["labels"] or ""))
        samples[(matched["name"], labels)] = float(matched["value"])
    return samples


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def _approve(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-7001"})


@asynccontextmanager
async def _client(url: str, desk: InProcessDesk | None = None) -> AsyncIterator[Client]:
    """A client holding the token, over loopback or through ``desk``'s transport when it runs in process."""
    async with (
        desk.http(headers=AUTH) if desk else httpx2.AsyncClient(headers=AUTH, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=_approve) as client,
    ):
        yield client


async def _some_calls(url: str, listings: int, desk: InProcessDesk | None = None) -> int:
    """Make known calls; the bytes the search says it scanned."""
    async with _client(url, desk) as client:
        for _ in range(listings):
            assert not (await client.call_tool("list_incidents", {"status": "all"})).is_error
        found = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": "timeout"})
        assert not found.is_error
        assert found.structured_content is not None
        scanned: int = found.structured_content["scanned_bytes"]
        assert (await client.call_tool("read_incident_log", {"incidentId": "INC-404"})).is_error
        restart = await client.call_tool("restart_service", {"service": "payments-api"})
        assert not restart.is_error
    return scanned


async def test_metrics_count_the_desks_own_calls_behind_its_token() -> None:
    async with in_process_desk(token=TOKEN) as desk, desk.http() as http:
        assert (await http.get("/metrics")).status_code == 401
        scanned = await _some_calls(desk.url, listings=3, desk=desk)
        scraped = await http.get("/metrics", headers=AUTH)
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = parse_exposition(scraped.text)
    assert all(name.startswith("incident_desk_") for name, _ in samples)
    listed = sample(samples, "incident_desk_requests_total", method="tools/call", tool="list_incidents", outcome="ok")
    assert listed == 3
    missing = sample(
        samples, "incident_desk_requests_total", method="tools/call", tool="read_incident_log", outcome="tool_error"
    )
    assert missing == 1
    assert (sample(samples, "incident_desk_requests_total", method="initialize", tool="", outcome="ok") or 0) >= 1
    count = sample(samples, "incident_desk_request_duration_seconds_count", method="tools/call", tool="list_incidents")
    everything = sample(
        samples, "incident_desk_request_duration_seconds_bucket", method="tools/call", tool="list_incidents", le="+Inf"
    )
    assert count == everything == 3
    assert scanned > 0
    assert sample(samples, "incident_desk_scan_bytes_total", tool="search_incident_log") == scanned
    approvals = {dict(labels)["outcome"]: value for (name, labels), value in samples.items() if "approvals" in name}
    assert sum(approvals.values()) == 1
    assert set(approvals) <= {"executed", "simulated"}, approvals
    assert sample(samples, "incident_desk_source_up", source="folder") == 1
    assert TOKEN not in scraped.text


async def test_metrics_can_be_turned_off() -> None:
    async with in_process_desk(metrics=False) as desk, desk.http() as http:
        assert (await http.get("/metrics")).status_code == 404


async def test_a_call_slower_than_the_threshold_is_logged_with_its_tool(tmp_path: Path) -> None:
    with run_desk(tmp_path, INCIDENT_DESK_SLOW_CALL_SECONDS="0.000001") as desk:
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            Client(streamable_http_client(desk.url, http_client=http), mode="legacy") as client,
        ):
            await client.call_tool("list_incidents", {"status": "all"})
        time.sleep(0.2)
        events = [json.loads(line) for line in desk.stderr().splitlines() if line.startswith("{")]
    slow = [event for event in events if event.get("event") == "slow call" and event.get("tool") == "list_incidents"]
    assert slow, desk.stderr()
    assert slow[0]["seconds"] >= 0
    assert slow[0]["request_id"]


def test_a_stdio_desk_left_as_it_is_installs_no_telemetry() -> None:
    stdio = build_server(build_app(load_settings({})))
    assert not any(type(layer).__name__ == "CallTelemetry" for layer in stdio.middleware)
    asked = build_server(build_app(load_settings({"slow_call_seconds": 2.0})))
    layers = [layer for layer in asked.middleware if type(layer).__name__ == "CallTelemetry"]
    assert len(layers) == 1
    assert getattr(layers[0], "metrics", "absent") is None  # the slow-call log only: no series kept over stdio


@contextmanager
def running_prometheus(tmp_path: Path, target: str) -> Iterator[str]:
    """Debian's Prometheus scraping ``target`` every second with the desk's bearer token."""
    assert PROMETHEUS is not None
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: desk\n"
        f"    authorization:\n      type: Bearer\n      credentials: {TOKEN}\n"
        f"    static_configs:\n      - targets: ['{target}']\n",
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx2.get(url + "/-/ready", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("prometheus did not start")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _query(url: str, promql: str) -> list[dict[str, Any]]:
    answer = httpx2.get(url + "/api/v1/query", params={"query": promql}, timeout=5).json()
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian package prometheus)")
async def test_a_real_prometheus_scrapes_the_desk_and_answers_about_its_calls(tmp_path: Path) -> None:
    with run_desk(tmp_path, INCIDENT_DESK_HTTP_TOKEN=TOKEN) as desk:
        await _some_calls(desk.url, listings=4)
        with running_prometheus(tmp_path, f"127.0.0.1:{desk.port}") as prometheus:
            deadline = time.monotonic() + 60
            listed: list[dict[str, Any]] = []
            while time.monotonic() < deadline:
                listed = _query(prometheus, 'sum(incident_desk_requests_total{tool="list_incidents"})')
                if listed:
                    break
                time.sleep(0.5)
            up = _query(prometheus, 'up{job="desk"}')
            source = _query(prometheus, 'incident_desk_source_up{source="folder"}')
            quantile = _query(
                prometheus,
                "histogram_quantile(0.5, sum by (le) "
                '(incident_desk_request_duration_seconds_bucket{method="tools/call"}))',
            )
    assert listed, "Prometheus never answered about the desk's list_incidents calls"
    assert float(listed[0]["value"][1]) == 4
    assert up and up[0]["value"][1] == "1"
    assert source and source[0]["value"][1] == "1"
    assert quantile and float(quantile[0]["value"][1]) > 0


class _Collector:
    """A stand-in OTLP/HTTP collector on loopback: keeps every span exported to it."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        spans: list[Any] = []
        self.spans = spans

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.mark.slow
async def test_traces_continue_the_callers_traceparent_and_reach_an_otlp_collector(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the [otel] extra is not installed")
    collector = _Collector()
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    try:
        with run_desk(tmp_path, INCIDENT_DESK_OTLP_ENDPOINT=collector.url, OTEL_BSP_SCHEDULE_DELAY="200") as desk:
            with httpx2.Client(timeout=30) as client:
                session = open_session(client, desk.url).headers["mcp-session-id"]
                headers = {**MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": HANDSHAKE}
                call = {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "tools/call",
                    "params": {
                        "name": "list_incidents",
                        "arguments": {"status": "all"},
                        "_meta": {"traceparent": f"00-{trace_id}-{parent_id}-01"},
                    },
                }
                assert client.post(desk.url, json=call, headers=headers).status_code == 200
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not any(span.trace_id.hex() == trace_id for span in collector.spans):
                time.sleep(0.2)
    finally:
        collector.server.shutdown()
        collector.server.server_close()
    ours = [span for span in collector.spans if span.trace_id.hex() == trace_id]
    assert ours, f"no span of the caller's trace reached the collector: {[span.name for span in collector.spans]}"
    assert ours[0].parent_span_id.hex() == parent_id
    assert ours[0].name == "tools/call list_incidents"


def test_an_otlp_endpoint_without_the_extra_is_a_clear_refusal(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "sys.modules['opentelemetry.sdk'] = None\n"  # as if the [otel] extra were not installed
        "from incident_desk.cli.main import main\n"
        "sys.exit(main(['--transport', 'http', '--port', '1']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=desk_env(tmp_path, INCIDENT_DESK_OTLP_ENDPOINT="http://127.0.0.1:9/v1/traces"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "install incident-desk[otel]" in done.stderr
    assert done.stdout == ""


async def test_an_outside_source_that_did_not_answer_is_down_in_the_metrics() -> None:
    closed = free_port()  # nothing listens here
    sources = [
        {"kind": "folder"},
        {"kind": "alertmanager", "name": "prod", "url": f"http://127.0.0.1:{closed}", "timeout_seconds": 2},
    ]
    async with in_process_desk(incident_sources=sources) as desk, desk.http() as http:
        before = parse_exposition((await http.get("/metrics")).text)
        async with Client(streamable_http_client(desk.url, http_client=desk.http()), mode="legacy") as client:
            await client.call_tool("list_incidents", {"status": "all"})
        after = parse_exposition((await http.get("/metrics")).text)
    assert sample(before, "incident_desk_source_up", source="prod") is None, "never looked at: not guessed"
    assert sample(after, "incident_desk_source_up", source="prod") == 0
    assert sample(after, "incident_desk_source_up", source="folder") == 1


async def test_made_up_methods_and_tool_names_do_not_become_series() -> None:
    async with in_process_desk() as desk, desk.http() as http:
        session = (await open_session_in_process(http, desk.url)).headers["mcp-session-id"]
        headers = {**MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": HANDSHAKE}
        for number in range(20):
            junk = {"jsonrpc": "2.0", "id": 100 + number, "method": f"made/up-{number}", "params": {}}
            await http.post(desk.url, json=junk, headers=headers)
            call = {"name": f"no_such_tool_{number}", "arguments": {}}
            await http.post(
                desk.url, json={"jsonrpc": "2.0", "id": 200 + number, "method": "tools/call", "params": call}
            )
            await http.post(
                desk.url,
                json={"jsonrpc": "2.0", "id": 300 + number, "method": "tools/call", "params": call},
                headers=headers,
            )
        scraped = (await http.get("/metrics")).text
    assert "made/up" not in scraped
    assert "no_such_tool" not in scraped
    samples = parse_exposition(scraped)
    others = {dict(labels)["method"] for name, labels in samples if name == "incident_desk_requests_total"}
    assert "other" in others
    called = [
        value
        for (name, labels), value in samples.items()
        if name == "incident_desk_requests_total" and dict(labels).get("tool") == "other"
    ]
    assert sum(called) == 20
