"""The restart executor: real commands without a shell, bounded, killable; simulate executes nothing."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from incident_desk.core.acts import executor
from incident_desk.core.acts.actions import CommandAction, SimulateAction
from incident_desk.core.acts.executor import OUTPUT_LIMIT_BYTES, SERVICE_ENV_VAR, ExecutionResult, run_restart

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _script(tmp_path: Path, body: str, name: str = "restart.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def _command(script: Path, *args: str, timeout: float = 10.0, cwd: Path | None = None) -> CommandAction:
    return CommandAction(argv=[sys.executable, str(script), *args], timeout_seconds=timeout, cwd=cwd)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (killed, not yet reaped by an absent init) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _gone_soon(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


async def test_simulate_executes_nothing_and_says_so() -> None:
    calls: list[tuple[float, str]] = []

    async def progress(elapsed: float, message: str) -> None:
        calls.append((elapsed, message))

    result = await run_restart("checkout-api", SimulateAction(), on_progress=progress)
    assert result.executed is False
    assert result.exit_status is None
    assert "simulated: nothing was executed" in result.output
    assert result.error is None
    assert not result.timed_out
    assert not result.succeeded
    assert calls and "simulated" in calls[-1][1]


async def test_command_runs_without_shell_with_service_env_cwd_and_closed_stdin(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import os, sys
        print("service", os.environ["DESK_RESTART_SERVICE"])
        print("cwd", os.getcwd())
        print("stdin", repr(sys.stdin.read()))
        print("argv", sys.argv[1:])
        print("to stderr", file=sys.stderr)
        """,
    )
    work = tmp_path / "work"
    work.mkdir()
    # Put readable data on our own stdin: the command must not inherit it.
    read_end, write_end = os.pipe()
    os.write(write_end, b"inherited stdin")
    os.close(write_end)
    saved_stdin = os.dup(0)
    os.dup2(read_end, 0)
    try:
        result = await run_restart("checkout-api", _command(script, "a b", "$HOME;", cwd=work))
    finally:
        os.dup2(saved_stdin, 0)
        os.close(saved_stdin)
        os.close(read_end)
    assert result.succeeded, result
    assert result.executed and result.exit_status == 0 and result.error is None
    assert "service checkout-api" in result.output
    assert f"cwd {work.resolve()}" in result.output
    assert "stdin ''" in result.output
    assert "argv ['a b', '$HOME;']" in result.output  # no shell: no splitting, no expansion
    assert "to stderr" in result.output
    assert result.duration_seconds > 0
    assert SERVICE_ENV_VAR not in os.environ


async def test_nonzero_exit_is_not_success(tmp_path: Path) -> None:
    script = _script(tmp_path, "import sys\nprint('port busy')\nsys.exit(3)\n")
    result = await run_restart("db", _command(script))
    assert result.executed
    assert result.exit_status == 3
    assert not result.succeeded
    assert not result.timed_out
    assert "port busy" in result.output


async def test_timeout_kills_the_command_and_what_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    script = _script(
        tmp_path,
        f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        with open({str(pid_file)!r}, "w") as f:
            f.write(f"{{os.getpid()}} {{child.pid}}")
        print("sleeping", flush=True)
        time.sleep(30)
        """,
    )
    started = time.monotonic()
    result = await run_restart("db", _command(script, timeout=0.5))
    assert time.monotonic() - started < 5
    assert result.timed_out
    assert result.executed
    assert not result.succeeded
    assert result.error is not None and "timed out" in result.error
    assert "sleeping" in result.output
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2
    for pid in pids:
        assert _gone_soon(pid), f"process {pid} survived the timeout"


async def test_cancelling_the_caller_kills_the_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = _script(
        tmp_path,
        f"""
        import os, time
        with open({str(pid_file)!r}, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(30)
        """,
    )
    started = time.monotonic()
    with anyio.move_on_after(1.0) as scope:
        await run_restart("db", _command(script, timeout=60))
    assert scope.cancelled_caught
    assert time.monotonic() - started < 5, "cancellation waited for the command instead of killing it"
    pid = int(pid_file.read_text())
    assert _gone_soon(pid), "the command outlived its cancelled caller"


@pytest.mark.parametrize("program", ["no-such-restart-program-xyz", "/nonexistent/dir/restart"])
async def test_missing_program_is_an_error_result(program: str) -> None:
    result = await run_restart("db", CommandAction(argv=[program]))
    assert not result.executed
    assert result.exit_status is None
    assert not result.succeeded
    assert result.error is not None
    assert program in result.error
    assert "not found" in result.error


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX exec bit")
async def test_non_executable_program_is_an_error_result(tmp_path: Path) -> None:
    script = _script(tmp_path, "print('hi')\n")
    script.chmod(0o644)
    result = await run_restart("db", CommandAction(argv=[str(script)]))
    assert not result.executed
    assert result.error is not None and str(script) in result.error


async def test_missing_working_directory_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    result = await run_restart("db", CommandAction(argv=[sys.executable, "-V"], cwd=missing))
    assert not result.executed
    assert result.error is not None and str(missing) in result.error


@pytest.mark.timing
async def test_progress_reports_start_ticks_and_end(tmp_path: Path) -> None:
    script = _script(tmp_path, "import time\ntime.sleep(0.6)\n")
    calls: list[tuple[float, str]] = []

    async def progress(elapsed: float, message: str) -> None:
        calls.append((elapsed, message))

    result = await run_restart("db", _command(script), on_progress=progress, progress_interval=0.1)
    assert result.succeeded
    assert len(calls) >= 4  # start, several ticks, end
    assert calls[0][0] < 0.1
    assert "running" in calls[0][1]
    assert any("still running" in message for _, message in calls[1:-1])
    assert "exit status 0" in calls[-1][1]
    elapsed = [e for e, _ in calls]
    assert elapsed == sorted(elapsed)


async def test_failing_progress_callback_does_not_abort_the_restart(tmp_path: Path) -> None:
    script = _script(tmp_path, "import time\ntime.sleep(0.3)\nprint('done')\n")
    calls = 0

    async def progress(elapsed: float, message: str) -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("client went away")

    result = await run_restart("db", _command(script), on_progress=progress, progress_interval=0.05)
    assert result.succeeded
    assert "done" in result.output
    assert calls == 1


async def test_huge_output_is_bounded_to_its_tail(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import sys
        block = b"x" * (1024 * 1024)
        for _ in range(20):
            sys.stdout.buffer.write(block)
        sys.stdout.buffer.write(b"\\nTHE END\\n")
        """,
    )
    result = await run_restart("db", _command(script))
    assert result.succeeded
    assert result.output.endswith("THE END\n")
    assert "earlier bytes of output dropped" in result.output
    tail = result.output.split("\n", 1)[1]
    assert len(tail.encode()) <= OUTPUT_LIMIT_BYTES
    assert len(tail.encode()) > OUTPUT_LIMIT_BYTES - 100
    assert len(result.output) < OUTPUT_LIMIT_BYTES + 200


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
async def test_background_process_holding_output_does_not_hang_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor, "DRAIN_GRACE_SECONDS", 0.3)
    script = _script(
        tmp_path,
        """
        import subprocess, sys
        daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"])
        print("daemon", daemon.pid, flush=True)
        """,
    )
    started = time.monotonic()
    result = await run_restart("db", _command(script, timeout=10))
    daemon_pid = int(result.output.split()[1])
    try:
        assert time.monotonic() - started < 5
        assert result.succeeded
        assert not result.timed_out
        assert _alive(daemon_pid), "a restart that exited normally must leave what it started running"
    finally:
        os.kill(daemon_pid, signal.SIGKILL)


def test_succeeded_needs_execution_exit_zero_and_no_timeout() -> None:
    def make(executed: bool, status: int | None, timed_out: bool) -> ExecutionResult:
        return ExecutionResult(executed, status, "", timed_out, 0.0, None)

    assert make(True, 0, False).succeeded
    assert not make(False, 0, False).succeeded
    assert not make(True, 1, False).succeeded
    assert not make(True, 0, True).succeeded
    assert not make(True, None, False).succeeded


async def test_progress_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="progress_interval"):
        await run_restart("db", SimulateAction(), progress_interval=0)
