"""The desk's own log never holds it up: a client that pipes the desk's stderr and never reads it fills the pipe,
and the desk then drops log lines (and later says how many) rather than wait on a write with its event loop."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, child_env

fcntl = pytest.importorskip("fcntl", reason="a pipe nobody reads, POSIX")

pytestmark = [pytest.mark.timing, pytest.mark.skipif(sys.platform == "win32", reason="a pipe nobody reads, POSIX")]

# A client that cannot sample: each summary logs the step it skipped (some 200 bytes), so this many fill the pipe
# several times over: Linux's pipe is made 16 KiB (F_SETPIPE_SZ), elsewhere it stays at its usual 64 KiB.
PIPE_BYTES = 16 * 1024
CALLS = 400 if hasattr(fcntl, "F_SETPIPE_SZ") else 1500


def _send(process: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def _answer(process: subprocess.Popen[bytes], within: float) -> dict[str, object]:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], within)
    assert ready, f"no answer within {within} s"
    answer: dict[str, object] = json.loads(process.stdout.readline())
    return answer


def _summarize(process: subprocess.Popen[bytes], number: int) -> None:
    call = {"name": "summarize_incident", "arguments": {"incidentId": "INC-1043"}}
    _send(process, {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": call})
    assert _answer(process, 10)["id"] == number


@pytest.mark.subprocess
def test_a_client_that_never_reads_stderr_cannot_hold_the_desk(tmp_path: Path) -> None:
    env = child_env(tmp_path / "audit.sqlite3", INCIDENT_DESK_LOG_LEVEL="info", INCIDENT_DESK_LOG_FORMAT="json")
    with subprocess.Popen(
        [sys.executable, "-m", "incident_desk"],
        cwd=str(ROOT),
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # read only at the end
    ) as process:
        assert process.stderr is not None
        if hasattr(fcntl, "F_SETPIPE_SZ"):
            fcntl.fcntl(process.stderr.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        try:
            _send(
                process,
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"},
                    },
                },
            )
            assert "result" in _answer(process, 30)
            _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            slowest = 0.0
            for number in range(1, CALLS + 1):
                began = time.perf_counter()
                _summarize(process, number)
                slowest = max(slowest, time.perf_counter() - began)
            # Now someone reads: the next line the desk logs says how many went before it.
            drained: list[bytes] = []
            reader = threading.Thread(target=lambda: drained.append(process.stderr.read()))  # type: ignore[union-attr]
            reader.start()
            time.sleep(0.5)
            _summarize(process, CALLS + 1)
        finally:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(10)
        reader.join(10)
    log = b"".join(drained).decode()
    assert slowest < 1.0, f"a call took {slowest:.2f} s"
    assert "log lines dropped while nothing read stderr" in log, (len(log), log[-600:])
    assert log.count('"summary step skipped"') < CALLS, "lines were dropped, not held"
