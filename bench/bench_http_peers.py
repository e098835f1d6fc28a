"""/healthz cost against the number of incidents, and an authenticated ping while pollers hammer /healthz.

Two HTTP desks on loopback in the same run, one with 10 incidents and one with 5,000; ratios, not absolute times:
/healthz median at 5,000 over the median at 10 (flat is 1), and the ping median with 16 concurrent /healthz
pollers over the ping median with none. Run: .venv/bin/python bench/bench_http_peers.py [calls]
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789abcdef"
POLLERS = 16
HANDSHAKE = "2025-11-25"


def _data_dir(parent: Path, count: int) -> Path:
    root = parent / f"desk-{count}"
    for number in range(count):
        entry = root / "incidents" / f"INC-{number}"
        entry.mkdir(parents=True)
        (entry / "incident.toml").write_text(
            'title="t"\nservice="svc"\nseverity="SEV3"\nstatus="open"\nopened=2026-01-01T00:00:00Z\n'
        )
        (entry / "log.txt").write_text("line\n")
    return root


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _desk(root: Path, scratch: Path) -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    env.update(
        INCIDENT_DESK_AUDIT_DB=str(scratch / f"audit-{port}.sqlite3"),
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        INCIDENT_DESK_HTTP_TOKEN=TOKEN,
        INCIDENT_DESK_LOG_LEVEL="warning",
    )
    command = [sys.executable, "-m", "incident_desk", "--transport", "http", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--data-dir", str(root)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("desk did not start")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def _median_ms(http: httpx2.Client, calls: int, method: str, url: str, **kwargs: object) -> float:
    timings = []
    for _ in range(calls):
        start = time.perf_counter()
        http.request(method, url, **kwargs).raise_for_status()  # type: ignore[arg-type]
        timings.append(time.perf_counter() - start)
    return statistics.median(timings) * 1000


def _ping_ms(base: str, calls: int) -> float:
    """Median of an authenticated MCP ping in one 2025-11-25 session."""
    auth = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    with httpx2.Client(headers=auth, timeout=60) as http:
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}},
        }
        opened = http.post(f"{base}/mcp", json=initialize)
        headers = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": HANDSHAKE}
        http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        return _median_ms(http, calls, "POST", f"{base}/mcp", json=ping, headers=headers)


def main(calls: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="desk-bench-http-"))
    small, large = _data_dir(scratch, 10), _data_dir(scratch, 5000)
    with _desk(small, scratch) as small_url, _desk(large, scratch) as large_url, httpx2.Client(timeout=60) as http:
        healthz_small = _median_ms(http, calls, "GET", f"{small_url}/healthz")
        healthz_large = _median_ms(http, calls, "GET", f"{large_url}/healthz")
        ping_quiet = _ping_ms(large_url, calls)
        stop = threading.Event()

        def poll() -> None:
            with httpx2.Client(timeout=60) as poller:
                while not stop.is_set():
                    poller.get(f"{large_url}/healthz")

        pollers = [threading.Thread(target=poll) for _ in range(POLLERS)]
        for thread in pollers:
            thread.start()
        try:
            ping_polled = _ping_ms(large_url, calls)
        finally:
            stop.set()
            for thread in pollers:
                thread.join()
    print(f"{'metric':<52} {'baseline':>10} {'measured':>10} {'ratio':>7}")
    rows = [
        ("/healthz median ms, 5,000 vs 10 incidents", healthz_small, healthz_large),
        (f"ping median ms, {POLLERS} /healthz pollers vs none", ping_quiet, ping_polled),
    ]
    for name, baseline, measured in rows:
        print(f"{name:<52} {baseline:>10.2f} {measured:>10.2f} {measured / baseline:>7.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
