"""Ctrl-C and SIGTERM stop the desk within a second, over stdio with stdin still open and over HTTP with open
sessions. (The frozen executables get the same checks in test_frozen.py.)"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, child_env, free_port
from tests.signals import stop_http_desk, stop_stdio_desk

pytestmark = [
    pytest.mark.subprocess,
    pytest.mark.timing,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

STOP_WITHIN_SECONDS = 1.0
SIGNALS = [signal.SIGINT, signal.SIGTERM]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_stdio_desk_stops_on_a_signal_while_stdin_is_open(tmp_path: Path, signum: signal.Signals) -> None:
    env = child_env(tmp_path / "audit.sqlite3")
    took, status = stop_stdio_desk([sys.executable, "-m", "incident_desk"], env, ROOT, signum)
    assert took < STOP_WITHIN_SECONDS, f"still running {took:.2f}s after {signum.name}"
    assert status == 128 + signum


@pytest.mark.http
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_http_desk_stops_on_a_signal_with_sessions_open(tmp_path: Path, signum: signal.Signals) -> None:
    port = free_port()
    env = child_env(tmp_path / "audit.sqlite3")
    command = [sys.executable, "-m", "incident_desk", "--transport", "http", "--port", str(port)]
    took, status = stop_http_desk(command, port, env, ROOT, signum)
    assert took < STOP_WITHIN_SECONDS, f"still running {took:.2f}s after {signum.name}"
    assert status in (128 + signum, -signum), status  # uvicorn re-raises the signal once it has shut down
