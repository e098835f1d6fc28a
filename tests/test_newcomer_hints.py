"""What a newcomer sees when starting the desk by hand: on a terminal, one line saying it waits
for an MCP client on stdin; a loopback HTTP desk says nothing of a keychain it does not need."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, child_env
from tests.http_desk import run_desk

pytestmark = pytest.mark.subprocess

HINT = "waiting for an MCP client on stdin"


def _started_on(stdin: int, tmp_path: Path) -> str:
    """Start the desk with ``stdin``, wait for it to log that it started, then stop it; its stderr."""
    errors = tmp_path / "stderr.log"
    with (
        errors.open("wb") as err,
        subprocess.Popen(
            [sys.executable, "-m", "incident_desk", "--log-format", "console"],
            cwd=ROOT,
            env=child_env(tmp_path / "audit.sqlite3"),
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=err,
        ) as process,
    ):
        try:
            deadline = time.monotonic() + 30
            while "incident-desk starting" not in errors.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)
        finally:
            process.terminate()
            process.wait(timeout=30)
    return errors.read_text()


def test_on_a_terminal_the_desk_says_once_that_it_waits_for_a_client(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    try:
        stderr = _started_on(follower, tmp_path)
    finally:
        os.close(leader)
        os.close(follower)
    assert "incident-desk starting" in stderr
    assert stderr.count(HINT) == 1, stderr
    assert "incident-desk config" in stderr and "Ctrl-D" in stderr


def test_a_client_on_a_pipe_is_not_told(tmp_path: Path) -> None:
    stderr = _started_on(subprocess.PIPE, tmp_path)
    assert "incident-desk starting" in stderr
    assert HINT not in stderr


def test_a_loopback_http_desk_logs_no_keychain_failure_it_does_not_need(tmp_path: Path) -> None:
    with run_desk(tmp_path, PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring") as desk:
        logged = desk.stderr()
    assert "serving Streamable HTTP" in logged
    assert "keychain" not in logged.lower(), logged
    assert "sealing key lookup failed" not in logged


def test_a_stateless_desk_still_warns_that_replicas_need_the_shared_sealing_key(tmp_path: Path) -> None:
    with run_desk(tmp_path, "--stateless", PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring") as desk:
        logged = desk.stderr()
    assert "sealing key lookup failed; using a process-local key" in logged
