"""A real Prometheus (Debian's ``prometheus``) on a loopback port chosen at run time, serving history written
beforehand by ``promtool tsdb create-blocks-from openmetrics``."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.helpers import free_port

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None, reason="prometheus (with promtool) is not installed"
)


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    basic_auth: tuple[str, str] | None = None

    def query_range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """The API answered directly, for comparison with what the desk returns."""
        response = httpx2.get(
            self.url + "/api/v1/query_range",
            params={"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
            timeout=10,
            auth=self.basic_auth,
        )
        assert response.status_code == 200, response.text
        result: list[dict[str, Any]] = response.json()["data"]["result"]
        return result

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@dataclass(frozen=True)
class Sample:
    metric: str
    labels: Mapping[str, str]
    at: datetime
    value: float


def openmetrics(samples: list[Sample], types: Mapping[str, str]) -> str:
    """OpenMetrics text: each metric's samples together (as promtool wants), oldest first, ending ``# EOF``."""
    lines: list[str] = []
    for metric in sorted({s.metric for s in samples}):
        lines.append(f"# TYPE {metric} {types.get(metric, 'gauge')}")
        for sample in sorted((s for s in samples if s.metric == metric), key=lambda s: s.at):
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            lines.append(f"{metric}{{{labels}}} {sample.value:g} {sample.at.timestamp():.0f}")
    return "\n".join([*lines, "# EOF", ""])


@contextmanager
def running_prometheus(tmp_path: Path, history: str, basic_auth: tuple[str, str] | None = None) -> Iterator[Prometheus]:
    """Prometheus serving ``history`` (OpenMetrics text) from blocks promtool wrote, behind basic auth when given;
    stopped at the end."""
    assert PROMETHEUS is not None and PROMTOOL is not None
    extra: list[str] = []
    if basic_auth is not None:
        from tests.alertmanager import bcrypt_hash

        web = tmp_path / "prometheus-web.yml"
        web.write_text(f"basic_auth_users:\n  {basic_auth[0]}: '{bcrypt_hash(basic_auth[1])}'\n", encoding="utf-8")
        extra.append(f"--web.config.file={web}")
    data = tmp_path / "prometheus-history.om"
    data.write_text(history, encoding="utf-8")
    storage = tmp_path / "prometheus-data"
    storage.mkdir()
    made = subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(data), str(storage)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr.decode(errors="replace")
    for _attempt in range(3):
        port = free_port()
        process = subprocess.Popen(
            [
                PROMETHEUS,
                "--config.file=/dev/null",
                f"--storage.tsdb.path={storage}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=10y",
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server = Prometheus(f"http://127.0.0.1:{port}", process, basic_auth)
        if _ready(server):
            break
        server.stop()
    else:
        raise RuntimeError("prometheus did not start")
    try:
        yield server
    finally:
        server.stop()


def _ready(server: Prometheus) -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            if httpx2.get(server.url + "/-/ready", timeout=1, auth=server.basic_auth).status_code == 200:
                return True
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    return False


@contextmanager
def canned_prometheus(values: list[tuple[float, str]]) -> Iterator[str]:
    """A loopback stand-in answering every range query with one series of ``values``, for checks of the result's
    shape where no real Prometheus is needed (the real one is in test_metrics)."""
    body = json.dumps(
        {
            "status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {"job": "payments-api"}, "values": values}]},
        }
    ).encode()

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
