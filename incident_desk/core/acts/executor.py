"""What "restart" does: run the service's configured command, or simulate and say so.

Commands run through :mod:`incident_desk.core.neighbours.runner` (argv, no shell, a total deadline, bounded output,
the whole process group killed on a timeout or a cancelled call, an allowlisted environment without any
``INCIDENT_DESK_*`` variable). The one variable the desk adds is ``DESK_RESTART_SERVICE``, the service being
restarted: named outside the desk's own prefix so that no child ever holds an ``INCIDENT_DESK_*`` name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from incident_desk.core.acts.actions import CommandAction, SimulateAction
from incident_desk.core.neighbours import runner

SERVICE_ENV_VAR = "DESK_RESTART_SERVICE"
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


def child_environment(service: str, action: CommandAction) -> dict[str, str]:
    """What a restart command is given: the runner's allowlist, the action's ``pass_env``, and the service's name."""
    return runner.child_environment(action.pass_env, {SERVICE_ENV_VAR: service})


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


async def _run_command(
    service: str, action: CommandAction, progress: _Progress, progress_interval: float
) -> ExecutionResult:
    program = action.argv[0]
    await progress.report(f"restarting {service}: running {program}")
    tail = runner.TailOutput(OUTPUT_LIMIT_BYTES)
    async with anyio.create_task_group() as group:
        if progress.enabled:
            group.start_soon(_tick, service, progress, progress_interval)
        run = await runner.run_async(
            action.argv,
            tail,
            timeout=action.timeout_seconds,
            env=child_environment(service, action),
            cwd=action.cwd,
            drain_grace=DRAIN_GRACE_SECONDS,
        )
        group.cancel_scope.cancel()
    if not run.launched:
        await progress.report(run.launch_error or f"cannot run {program!r}")
        return ExecutionResult(
            executed=False,
            exit_status=None,
            output="",
            timed_out=False,
            duration_seconds=progress.elapsed(),
            error=run.launch_error,
        )
    if run.timed_out:
        error: str | None = f"timed out after {action.timeout_seconds:g}s; the command was killed"
        message = f"{service}: {error}"
    else:
        error = None
        message = f"{service}: command finished with exit status {run.exit_status}"
    await progress.report(message)
    return ExecutionResult(
        executed=True,
        exit_status=run.exit_status,
        output=tail.text(),
        timed_out=run.timed_out,
        duration_seconds=progress.elapsed(),
        error=error,
    )


async def _tick(service: str, progress: _Progress, interval: float) -> None:
    while progress.enabled:
        await anyio.sleep(interval)
        await progress.report(f"{service}: restart command still running ({progress.elapsed():.0f}s)")
