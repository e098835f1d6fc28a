"""One secrets policy for every command the desk runs: an allowlisted environment, never any INCIDENT_DESK_*.

A restart command is run as `env` through the real MCP restart flow (approval and all); what it printed is read in
the client's result and in the journal, for a restart that succeeds and for one that fails. A log command is run as
`env` through the desk's log sources.
"""

from __future__ import annotations

import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from incident_desk.core.incidents import DataFolder
from incident_desk.core.neighbours import runner
from incident_desk.core.sources import IncidentSources
from incident_desk.server import build_server
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import load_settings
from tests.alertmanager import alert, needs_alertmanager, running_alertmanager
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import SERVICE, approve, desk, rows

pytestmark = pytest.mark.anyio

ENV = shutil.which("env")
SH = shutil.which("sh")
SOURCE_PASSWORD = "am-Source-Password-0123456789"
TOKEN = "tok-Http-Token-0123456789abcdef"
needs_env = pytest.mark.skipif(ENV is None or SH is None, reason="needs env(1) and sh(1)")


@pytest.fixture
def desk_secrets_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an operator's desk holds: a source password, a token, a setting in odd case; and unrelated variables."""
    monkeypatch.setenv("INCIDENT_DESK_SOURCE_PROD", SOURCE_PASSWORD)
    monkeypatch.setenv("incident_desk_http_token", TOKEN)
    monkeypatch.setenv("INCIDENT_DESK_LOG_LEVEL", "info")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-not-for-children")
    monkeypatch.setenv("KUBECONFIG", "/etc/kube/config")
    monkeypatch.setenv("LC_TIME", "C.UTF-8")


def environment_of(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


def assert_no_desk_variables(output: str, *, service: str | None) -> None:
    seen = environment_of(output)
    desk_names = sorted(name for name in seen if name.upper().startswith("INCIDENT_DESK_"))
    assert desk_names == [], desk_names
    # The one name the desk sets itself for a restart command: which service it restarts (not inherited).
    assert seen.get("DESK_RESTART_SERVICE") == service
    assert SOURCE_PASSWORD not in output and TOKEN not in output
    assert "aws-not-for-children" not in output and "AWS_SECRET_ACCESS_KEY" not in seen  # not on the allowlist
    assert seen.get("LC_TIME") == "C.UTF-8" and "PATH" in seen  # the allowlist itself is passed


@needs_env
@pytest.mark.usefixtures("desk_secrets_in_environment")
async def test_a_restart_command_sees_no_desk_variable_in_its_result_or_the_journal(make_app: AppFactory) -> None:
    app, server = desk(make_app, services={SERVICE: {"argv": [ENV]}}, redact_secrets=False)
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert not result.is_error, text_of(result)
    output = result.structured_content["output"]
    assert_no_desk_variables(output, service=SERVICE)
    approved, executed = rows(app.journal)
    assert (approved.outcome, executed.outcome) == ("approved", "executed")
    assert executed.detail == output  # the whole output is journalled, so what is absent there is absent
    assert "KUBECONFIG" not in environment_of(output)


@needs_env
@pytest.mark.usefixtures("desk_secrets_in_environment")
async def test_a_failing_restart_shows_no_desk_variable(make_app: AppFactory) -> None:
    assert SH is not None
    app, server = desk(make_app, services={SERVICE: {"argv": [SH, "-c", "env; exit 3"]}}, redact_secrets=False)
    async with connect(server, "2026-07-28", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert result.is_error
    text = text_of(result)
    assert text.startswith("RESTART FAILED payments-api under CHG-2291 -- the restart command exited with status 3")
    assert_no_desk_variables(text.split("\n", 1)[1], service=SERVICE)
    assert_no_desk_variables(result.structured_content["output"], service=SERVICE)
    _, failed = rows(app.journal)
    assert failed.outcome == "failed"
    assert_no_desk_variables(failed.detail, service=SERVICE)


@needs_env
@pytest.mark.usefixtures("desk_secrets_in_environment")
async def test_pass_env_hands_a_declared_variable_to_the_restart_command(make_app: AppFactory) -> None:
    _, server = desk(make_app, services={SERVICE: {"argv": [ENV], "pass_env": ["KUBECONFIG"]}}, redact_secrets=False)
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    seen = environment_of(result.structured_content["output"])
    assert seen["KUBECONFIG"] == "/etc/kube/config"
    assert_no_desk_variables(result.structured_content["output"], service=SERVICE)


@needs_env
@pytest.mark.usefixtures("desk_secrets_in_environment")
def test_a_log_command_sees_no_desk_variable(tmp_path: Path) -> None:
    settings = load_settings({"services": {"api": {"logs": {"kind": "command", "argv": [ENV]}}}})
    sources = IncidentSources(DataFolder(tmp_path), [], settings.service_logs)
    with sources.service_log("prod-abc", "api", datetime(2026, 11, 30, tzinfo=UTC)) as handle:
        output = handle.read().decode()
    assert_no_desk_variables(output, service=None)


@pytest.mark.parametrize(
    ("where", "name"),
    [("restart", "INCIDENT_DESK_SOURCE_PROD"), ("restart", "incident_desk_http_token"), ("logs", "BAD-NAME")],
)
def test_pass_env_refuses_the_desks_own_variables_and_bad_names(where: str, name: str) -> None:
    table: dict[str, Any] = {"argv": ["true"], "pass_env": [name]}
    config = {"logs": {"kind": "command", **table}} if where == "logs" else table
    with pytest.raises(SettingsError, match=r"pass_env entry"):
        load_settings({"services": {"api": config}})


def test_the_environment_is_an_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INCIDENT_DESK_DATA_DIR", "/srv/desk")
    monkeypatch.setenv("Incident_Desk_Sealing_Key", "sealed")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    monkeypatch.setenv("SYSTEMD_COLORS", "0")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    env = runner.child_environment(["PYTHONPATH"], {"EXTRA": "1"})
    assert not [name for name in env if name.upper().startswith("INCIDENT_DESK_")]
    assert env["XDG_RUNTIME_DIR"] == "/run/user/1000" and env["SYSTEMD_COLORS"] == "0"
    assert env["PYTHONPATH"] == "/somewhere" and env["EXTRA"] == "1"
    assert "PYTHONPATH" not in runner.child_environment()
    assert set(runner.child_environment()) <= {
        name for name in env if name in runner.ALLOWED_ENV or name.startswith(runner.ALLOWED_ENV_PREFIXES)
    }


@pytest.mark.timing
async def test_the_loop_stays_free_while_a_restart_command_floods_its_output(
    make_app: AppFactory, tmp_path: Path
) -> None:
    """The runner reads the command in a worker thread: pings answer while 200 MB of output pour through it."""
    script = tmp_path / "flood.py"
    script.write_text(
        "import sys\nblock = b'y' * (1024 * 1024)\nfor _ in range(200):\n    sys.stdout.buffer.write(block)\n"
    )
    _, server = desk(make_app, services={SERVICE: {"argv": [sys.executable, str(script)], "timeout_seconds": 120}})
    pings: list[float] = []
    async with connect(server, "legacy", elicitation_callback=approve()) as client:
        done = anyio.Event()

        async def restart() -> None:
            result = await client.call_tool("restart_service", {"service": SERVICE})
            assert not result.is_error, text_of(result)
            done.set()

        async with anyio.create_task_group() as group:
            group.start_soon(restart)
            while not done.is_set():
                started = time.monotonic()
                await client.send_ping()
                pings.append(time.monotonic() - started)
                await anyio.sleep(0.02)
    assert len(pings) >= 5 and max(pings) < 0.5, (len(pings), max(pings))


@needs_env
@needs_alertmanager
@pytest.mark.usefixtures("desk_secrets_in_environment")
async def test_the_source_password_reaches_neither_a_log_command_nor_a_restart_over_mcp(
    make_app: AppFactory, tmp_path: Path
) -> None:
    """The issue's case end to end: a real Alertmanager behind basic auth, its password in INCIDENT_DESK_SOURCE_PROD;
    the alert's log comes from a command log and its service restarts with a command, both `env`."""
    with running_alertmanager(tmp_path, basic_auth=("desk", SOURCE_PASSWORD)) as manager:
        manager.post(alert("HighLatency", starts=datetime.now(UTC), service=SERVICE, severity="critical"))
        source = {"kind": "alertmanager", "name": "prod", "url": manager.url, "auth": "basic", "username": "desk"}
        app = make_app(
            incident_sources=[source],
            services={SERVICE: {"argv": [ENV], "logs": {"kind": "command", "argv": [ENV]}}},
            redact_secrets=False,
        )
        async with connect(build_server(app), "legacy", elicitation_callback=approve()) as client:
            (alert_id,) = text_of(await client.read_resource("incident://index")).splitlines()
            log = text_of(await client.read_resource(f"incident://{alert_id}/log"))
            restart = await client.call_tool("restart_service", {"service": SERVICE})
    assert_no_desk_variables(log, service=None)
    assert not restart.is_error, text_of(restart)
    assert_no_desk_variables(restart.structured_content["output"], service=SERVICE)
    assert_no_desk_variables(rows(app.journal)[-1].detail, service=SERVICE)
