"""/healthz cost against the number of incidents, and an authenticated ping while pollers hammer /healthz.

Two HTTP desks on loopback in the same run, one with 10 incidents and one with 5,000; ratios, not absolute times:
/healthz median at 5,000 over the median at 10 (flat is 1), and the ping median with 16 concurrent /healthz
pollers over the ping median with none. Run: .venv/bin/python bench/bench_http_peers.py [calls]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import synthetic_incidents  # noqa: E402 -- the tests' desk helpers, on the path set above
from tests.http_desk import run_desk  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
POLLERS = 16
HANDSHAKE = "2025-11-25"


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
    env = {"INCIDENT_DESK_HTTP_TOKEN": TOKEN, "INCIDENT_DESK_LOG_LEVEL": "warning"}
    small, large = (
        synthetic_incidents(scratch / "small" / "desk", 10),
        synthetic_incidents(scratch / "large" / "desk", 5000),
    )
    with (
        run_desk(small.parent, "--data-dir", str(small), name="small", **env) as small_desk,
        run_desk(large.parent, "--data-dir", str(large), name="large", **env) as large_desk,
        httpx2.Client(timeout=60) as http,
    ):
        small_url, large_url = (f"http://127.0.0.1:{desk.port}" for desk in (small_desk, large_desk))
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
