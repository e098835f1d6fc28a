"""A desk that dies mid-command takes the command and what it started with it (Linux, util-linux's setpriv).

Without this a killed replica's restart command ran on as an orphan while the database, seeing the replica's
connection close, handed its restart lock to another replica.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from incident_desk.core.neighbours import runner

pytestmark = pytest.mark.skipif(not runner._guard_prefix(), reason="no parent-death signal here (Linux + setpriv)")

ROOT = Path(__file__).resolve().parents[1]

DESK_STAND_IN = """
import sys
from incident_desk.core.neighbours import runner
command = ["sh", "-c", "sleep 300 & echo $! > gc.pid; echo $$ > c.pid; sleep 300"]
runner.run(command, runner.TailOutput(1024), timeout=600, env={"PATH": "/usr/bin:/bin"})
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_for(path: Path) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(encoding="utf-8").strip():
            return int(path.read_text(encoding="utf-8"))
        time.sleep(0.02)
    raise AssertionError(f"{path.name} never written")


@pytest.mark.subprocess
def test_a_killed_desk_takes_its_command_and_what_the_command_started(tmp_path: Path) -> None:
    desk = subprocess.Popen(
        [sys.executable, "-c", DESK_STAND_IN], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    try:
        command, grandchild = _wait_for(tmp_path / "c.pid"), _wait_for(tmp_path / "gc.pid")
        assert _alive(command) and _alive(grandchild)
        desk.send_signal(signal.SIGKILL)
        desk.wait()
        deadline = time.monotonic() + 5
        while (_alive(command) or _alive(grandchild)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(command) and not _alive(grandchild)
    finally:
        desk.kill()
        for name in ("c.pid", "gc.pid"):
            if (tmp_path / name).exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int((tmp_path / name).read_text(encoding="utf-8")), signal.SIGKILL)


def test_a_guarded_command_keeps_its_argv_exit_status_and_output() -> None:
    tricky = "a b; echo injected $HOME 'q'"
    output = runner.TailOutput(4096)
    result = runner.run(
        [sys.executable, "-c", "import sys; print(sys.argv[1:]); sys.exit(3)", tricky, ""],
        output,
        timeout=30,
        env={"PATH": os.environ["PATH"]},
    )
    assert result.exit_status == 3
    assert repr([tricky, ""]) in output.text()


def test_a_program_that_cannot_be_found_is_named_by_the_runner_not_a_shell() -> None:
    assert runner.guarded(["no-such-program-here"], {"PATH": "/usr/bin:/bin"}, None) == ["no-such-program-here"]
    result = runner.run(["no-such-program-here"], runner.TailOutput(64), timeout=5, env={"PATH": "/usr/bin:/bin"})
    assert not result.launched and result.launch_error == "cannot run 'no-such-program-here': program not found"
