"""The executor behind an approved restart: real commands, their exit status, output and progress.

Failing, missing and timed-out commands are failures; a killed command reports the real signal; a second
restart of a running service is refused; output is redacted and the desk's secrets are not passed on.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from incident_desk.settings.model import load_settings
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import (
    SERVICE,
    Restarts,
    approve,
    desk,
    outcomes,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
    rows,
)

pytestmark = pytest.mark.anyio


async def test_a_failing_command_is_reported_as_a_failure(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    app, server = desk(make_app, services=restarts.services(exit_code=3))
    async with connect(server, era, elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert result.is_error is True
    text = text_of(result)
    assert text.startswith("RESTART FAILED payments-api under CHG-2291 -- the restart command exited with status 3\n")
    assert "restarting payments-api" in text and "exit 3" in text  # the command's own output, for the operator
    structured = result.structured_content
    assert structured is not None
    assert (structured["outcome"], structured["exit_status"]) == ("failed", 3)
    assert (structured["executed"], structured["restarted"]) == (True, False)
    assert restarts.executions() == [SERVICE]
    approved, failed = rows(app.journal)
    assert (approved.outcome, failed.outcome, failed.exit_status, failed.ticket) == (
        "approved",
        "failed",
        3,
        "CHG-2291",
    )
    assert "exited with status 3" in failed.detail


@pytest.mark.parametrize("problem", ["missing-program", "command-timeout"])
async def test_a_command_that_cannot_finish_is_a_failure(
    make_app: AppFactory, restarts: Restarts, tmp_path: Path, problem: str
) -> None:
    if problem == "missing-program":
        action: dict[str, Any] = {"kind": "command", "argv": [str(tmp_path / "no-such-restart")]}
        why = f"cannot run '{tmp_path / 'no-such-restart'}': program not found"
    else:
        action = restarts.action(sleep=20) | {"timeout_seconds": 0.3}
        why = "timed out after 0.3s; the command was killed"
    app, server = desk(make_app, services={SERVICE: action})
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert result.is_error is True
    assert text_of(result).split("\n")[0] == f"RESTART FAILED payments-api under CHG-2291 -- the restart command {why}"
    assert result.structured_content is not None
    assert result.structured_content["restarted"] is False
    assert result.structured_content["executed"] is (problem == "command-timeout")
    approved, failed = rows(app.journal)
    assert (approved.outcome, failed.outcome) == ("approved", "failed")
    assert failed.exit_status == (None if problem == "missing-program" else -signal.SIGKILL)
    assert failed.detail.startswith(why)


async def test_a_successful_command_journals_its_exit_status_and_output(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services())
    async with connect(server, era, elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    structured = result.structured_content
    assert structured is not None
    assert structured["output"] == "restarting payments-api\nexit 0\n"
    _, executed = rows(app.journal)
    assert (executed.outcome, executed.exit_status) == ("executed", 0)
    assert executed.detail == "restarting payments-api\nexit 0\n"


async def test_progress_is_reported_while_the_command_runs(make_app: AppFactory, restarts: Restarts, era: str) -> None:
    _, server = desk(make_app, services=restarts.services(sleep=1.5))
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with connect(server, era, elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE}, progress_callback=on_progress)
    assert text_of(result).startswith("RESTARTED payments-api under CHG-2291\n")
    messages = [m or "" for _, _, m in updates]
    assert messages[0] == f"restarting payments-api: running {sys.executable}"
    assert any(m.startswith("payments-api: restart command still running") for m in messages[1:-1]), messages
    assert messages[-1] == "payments-api: command finished with exit status 0"
    progress = [p for p, _, _ in updates]
    assert progress == sorted(progress) and progress[-1] >= 1.5


def test_restart_script_counts_runs(tmp_path: Path, restarts: Restarts) -> None:
    """The counting script itself works, so an empty count above means nothing ran."""
    argv = restarts.action(exit_code=3)["argv"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 3
    assert restarts.executions() == ["?"]
    assert done.stdout == "restarting None\nexit 3\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see the zombie")
async def test_a_killed_command_reports_the_signal_not_a_made_up_status(
    restarts: Restarts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killing must not reap the command behind asyncio's child watcher, or the real exit status is lost.

    Popen.kill() polls (waitpid) before it signals. Called after the group kill, it could reap the dead command
    first; asyncio's watcher then logs "Unknown child process" and reports 255. The race is widened here: the
    command is left a zombie before anything else runs, and the watcher is made slow to collect it.
    """
    from incident_desk.core.acts import executor
    from incident_desk.core.acts.actions import CommandAction

    real_killpg, real_waitpid = os.killpg, os.waitpid

    def zombie(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True

    def killpg_and_let_it_die(pgid: int, sig: int) -> None:
        real_killpg(pgid, sig)
        deadline = time.monotonic() + 5
        while not zombie(pgid) and time.monotonic() < deadline:
            time.sleep(0.01)

    def slow_blocking_waitpid(pid: int, options: int) -> tuple[int, int]:
        if options == 0:  # the watcher thread's blocking wait, never the event loop's
            while not zombie(pid):
                time.sleep(0.01)
            time.sleep(0.3)
        return real_waitpid(pid, options)

    monkeypatch.setattr(os, "killpg", killpg_and_let_it_die)
    monkeypatch.setattr(os, "waitpid", slow_blocking_waitpid)
    action = CommandAction.model_validate(restarts.action(sleep=20) | {"timeout_seconds": 0.3})
    result = await executor.run_restart(SERVICE, action)
    assert result.timed_out
    assert result.exit_status == -signal.SIGKILL


async def test_a_second_restart_of_a_running_service_is_refused(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services(sleep=1.5))
    results: list[Any] = []
    async with connect(server, era, elicitation_callback=approve()) as client:

        async def call(ticket_delay: float) -> None:
            await anyio.sleep(ticket_delay)
            results.append(await client.call_tool("restart_service", {"service": SERVICE}))

        async with anyio.create_task_group() as group:
            group.start_soon(call, 0.0)
            group.start_soon(call, 0.5)
    texts = sorted(text_of(result) for result in results)
    # The refusal names who holds the service (this process, for the approver) and since when.
    assert re.fullmatch(
        r"NOT RESTARTED -- a restart of payments-api is already running "
        r"\(held by \S+ pid \d+ for \S+ since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\)",
        texts[0],
    ), texts[0]
    assert texts[1].startswith("RESTARTED payments-api under CHG-2291")
    assert restarts.executions() == [SERVICE]
    assert sorted(outcomes(app.journal)) == ["approved", "executed", "refused_busy"]


async def test_command_output_is_redacted_and_the_desks_secrets_are_withheld(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "leaky.py"
    script.write_text(
        "import os\n"
        "print('db password=hunter2secret')\n"
        "print('token seen:', os.environ.get('INCIDENT_DESK_HTTP_TOKEN', 'none'))\n"
        "print('key seen:', os.environ.get('INCIDENT_DESK_PROVIDER_API_KEY', 'none'))\n"
    )
    monkeypatch.setenv("INCIDENT_DESK_HTTP_TOKEN", "tok-0123456789abcdef0123")
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_API_KEY", "sk-ant-0123456789abcdefghij")
    app, server = desk(make_app, services={SERVICE: {"argv": [sys.executable, str(script)]}})
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    shown = json.dumps(result.model_dump(mode="json")) + json.dumps([d.detail for d in rows(app.journal)])
    assert "hunter2secret" not in shown
    assert "tok-0123456789abcdef0123" not in shown and "sk-ant-0123456789abcdefghij" not in shown
    assert "token seen: none" in result.structured_content["output"]
    assert "key seen: none" in result.structured_content["output"]


@pytest.mark.parametrize(
    "name",
    [
        "incident_desk_http_token",
        "Incident_Desk_Sealing_Key",
        "INCIDENT_DESK_provider_api_key",
        "INCIDENT_DESK_HTTP_TOKEN",
    ],
)
async def test_the_desks_secrets_are_withheld_whatever_the_case_of_their_names(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Settings accept a secret's variable in any case, so the child must lose it in any case too."""
    secret = "case-SECRET-0123456789abcdef"
    monkeypatch.setenv(name, secret)
    setting = name.lower().removeprefix("incident_desk_")
    assert getattr(load_settings(), setting).get_secret_value() == secret  # the desk does take it as its secret
    script = tmp_path / "env_dump.py"
    # Hex, so neither redaction nor a newline in some value can hide a name or a value from the check.
    script.write_text("import os\nfor k, v in os.environ.items():\n    print(k.encode().hex(), v.encode().hex())\n")
    _, server = desk(make_app, services={SERVICE: {"argv": [sys.executable, str(script)]}}, redact_secrets=False)
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert not result.is_error, text_of(result)
    seen = dict(
        (bytes.fromhex(k).decode(), bytes.fromhex(v).decode())
        for k, v in (line.split(" ") for line in result.structured_content["output"].splitlines())
    )
    assert seen["DESK_RESTART_SERVICE"] == SERVICE
    assert name not in seen and secret not in seen.values()
