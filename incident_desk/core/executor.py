"""What "restart" does: run the service's configured command, or simulate and say so.

Commands run as an argv list without a shell, with stdin closed, a timeout and bounded output capture. On
POSIX the command gets its own session, so a timeout or a cancelled tool call kills everything it started
(the whole process group), never leaving an orphan behind.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from incident_desk.core.actions import CommandAction, SimulateAction
from incident_desk.core.credentials import ENV_PREFIX, SECRET_SETTINGS

SERVICE_ENV_VAR = "INCIDENT_DESK_SERVICE"
# The desk's own secrets are never handed to a restart command: its output is shown to the client. Settings read
# environment names in any case (incident_desk_http_token is the token too), so names are compared upper-cased.
WITHHELD_ENV_VARS = frozenset(ENV_PREFIX + name.upper() for name in SECRET_SETTINGS)
OUTPUT_LIMIT_BYTES = 64 * 1024
# After the command exits, how long to keep reading output that is still in flight. A background process the
# command left holding its stdout would otherwise keep the restart "running" forever.
DRAIN_GRACE_SECONDS = 2.0
SIMULATED_OUTPUT = "simulated: nothing was executed"

ProgressCallback = Callable[[float, str], Awaitable[None]]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecutionResult:
    """The outcome of one restart. ``exit_status`` is negative when a POSIX signal ended the command."""

    executed: bool
    exit_status: int | None
    output: str
    timed_out: bool
    duration_seconds: float
    error: str | None

    @property
    def succeeded(self) -> bool:
        return self.executed and self.exit_status == 0 and not self.timed_out


def _child_environment(service: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name.upper() not in WITHHELD_ENV_VARS}
    env[SERVICE_ENV_VAR] = service
    return env


async def run_restart(
    service: str,
    action: CommandAction | SimulateAction,
    *,
    on_progress: ProgressCallback | None = None,
    progress_interval: float = 1.0,
) -> ExecutionResult:
    """Carry out the restart of ``service`` as configured; launch failures are results, not exceptions."""
    if progress_interval <= 0:
        raise ValueError(f"progress_interval must be positive, got {progress_interval}")
    progress = _Progress(on_progress)
    if isinstance(action, SimulateAction):
        await progress.report(f"simulating the restart of {service}")
        await progress.report(SIMULATED_OUTPUT)
        return ExecutionResult(
            executed=False,
            exit_status=None,
            output=f"{SIMULATED_OUTPUT} (the restart of {service} is configured as simulate)",
            timed_out=False,
            duration_seconds=progress.elapsed(),
            error=None,
        )
    return await _run_command(service, action, progress, progress_interval)


class _Progress:
    """Best-effort progress: a failing callback (say, a gone client) must not abort a half-done restart."""

    def __init__(self, callback: ProgressCallback | None) -> None:
        self._callback = callback
        self._started = time.monotonic()

    @property
    def enabled(self) -> bool:
        return self._callback is not None

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    async def report(self, message: str) -> None:
        if self._callback is None:
            return
        try:
            await self._callback(self.elapsed(), message)
        except Exception:
            logger.warning("restart progress report failed; continuing without progress", exc_info=True)
            self._callback = None


class _Tail:
    """Keeps only the last ``limit`` bytes, so memory stays flat however much the command prints."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._dropped = 0

    def add(self, chunk: bytes) -> None:
        self._buffer += chunk
        excess = len(self._buffer) - self._limit
        if excess > 0:
            del self._buffer[:excess]
            self._dropped += excess

    def text(self) -> str:
        data = bytes(self._buffer)
        if not self._dropped:
            return data.decode("utf-8", errors="replace")
        # Truncation may have cut a UTF-8 sequence in half; skip its orphaned continuation bytes.
        skip = 0
        while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
            skip += 1
        marker = f"[... {self._dropped + skip} earlier bytes of output dropped ...]\n"
        return marker + data[skip:].decode("utf-8", errors="replace")


async def _run_command(
    service: str, action: CommandAction, progress: _Progress, progress_interval: float
) -> ExecutionResult:
    program = action.argv[0]
    await progress.report(f"restarting {service}: running {program}")
    try:
        process = await anyio.open_process(
            action.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=action.cwd,
            env=_child_environment(service),
            start_new_session=sys.platform != "win32",
        )
    except OSError as exc:
        launch_error = _launch_error(program, action.cwd, exc)
        await progress.report(launch_error)
        return ExecutionResult(
            executed=False,
            exit_status=None,
            output="",
            timed_out=False,
            duration_seconds=progress.elapsed(),
            error=launch_error,
        )

    tail = _Tail(OUTPUT_LIMIT_BYTES)
    timed_out = False
    try:
        stdout = process.stdout
        if stdout is None:
            raise RuntimeError("the command's stdout pipe is missing")
        drained = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, stdout, tail, drained)
            if progress.enabled:
                tg.start_soon(_tick, service, progress, progress_interval)
            with anyio.move_on_after(action.timeout_seconds):
                await _exited(process)
            if process.returncode is None:
                timed_out = True
                await _kill(process)
            with anyio.move_on_after(DRAIN_GRACE_SECONDS):
                await drained.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                await _kill(process)
            await process.aclose()

    exit_status = process.returncode
    if timed_out:
        error: str | None = f"timed out after {action.timeout_seconds:g}s; the command was killed"
        message = f"{service}: {error}"
    else:
        error = None
        message = f"{service}: command finished with exit status {exit_status}"
    await progress.report(message)
    return ExecutionResult(
        executed=True,
        exit_status=exit_status,
        output=tail.text(),
        timed_out=timed_out,
        duration_seconds=progress.elapsed(),
        error=error,
    )


def _launch_error(program: str, cwd: Path | None, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    if cwd is not None and exc.filename is not None and os.fsdecode(exc.filename) == os.fsdecode(cwd):
        return f"cannot run {program!r}: working directory {cwd} is unusable: {reason}"
    if isinstance(exc, FileNotFoundError):
        return f"cannot run {program!r}: program not found"
    if isinstance(exc, PermissionError):
        return f"cannot run {program!r}: not executable ({reason})"
    return f"cannot run {program!r}: {reason}"


async def _drain(stream: ByteReceiveStream, tail: _Tail, drained: anyio.Event) -> None:
    try:
        async for chunk in stream:
            tail.add(chunk)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        drained.set()


async def _tick(service: str, progress: _Progress, interval: float) -> None:
    while progress.enabled:
        await anyio.sleep(interval)
        await progress.report(f"{service}: restart command still running ({progress.elapsed():.0f}s)")


async def _exited(process: Process) -> None:
    """Wait for the command itself to exit.

    Polls ``returncode`` rather than awaiting ``process.wait()``: asyncio's wait(), and anyio's on asyncio
    before anyio#1174 was fixed, also waits for the output pipe to close, which a background process the
    command started may hold open forever.
    """
    delay = 0.005
    while process.returncode is None:
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.1)


async def _kill(process: Process) -> None:
    """Kill the command and, on POSIX, everything in its session's process group, then reap it."""
    if sys.platform != "win32":
        # The group id is the command's pid (start_new_session); it cannot be reused while unreaped.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        else:
            # The group kill reached the command itself. Do not also call process.kill(): Popen polls (waitpid)
            # before signalling and can reap the command behind asyncio's watcher, which then logs "Unknown
            # child process" and reports exit status 255 instead of the signal.
            await _exited(process)
            return
    with suppress(ProcessLookupError):
        process.kill()
    await _exited(process)
