"""Runbook actions (issue 39, DESIGN section 4c) through a real client in both eras: a `flush` action with choices
runs a script the test wrote only after a ticked, ticketed approval; wrong actions and parameters, and a client
without elicitation, are refused with nothing run; a preview's output is in the question; limits and the lock are
shared with restart_service; a `rollback` switches which version a real supervisord serves."""

from __future__ import annotations

import html
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from incident_desk.core.outcomes import Outcome
from tests.approval_page_helpers import LinkFollower
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import (
    APPROVER,
    SERVICE,
    Operator,
    Restarts,
    approve,
    desk,
    outcomes,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
    rows,
)
from tests.service_action_helpers import Flush, flush_fixture  # noqa: F401 -- the `flush` fixture

pytestmark = pytest.mark.anyio


async def test_an_approved_flush_runs_once_and_is_journalled(make_app: AppFactory, flush: Flush, era: str) -> None:
    app, server = desk(make_app, services=flush.services())
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        listed = await client.call_tool("list_service_actions", {"service": SERVICE})
        result = await client.call_tool(
            "run_service_action",
            {"service": SERVICE, "action": "flush", "parameters": {"cache": "sessions"}, "reason": "stale carts"},
        )
    assert "- flush: Flush one of the service's caches (approval: in-band)" in text_of(listed)
    assert "  - cache: one of sessions, prices -- which cache" in text_of(listed)
    text = text_of(result)
    assert result.is_error is not True, text
    assert text.splitlines()[0] == f"RAN flush on {SERVICE} under CHG-2291"
    assert "command exited 0" in text and f"flushed sessions of {SERVICE}" in text
    assert flush.runs() == [f"{SERVICE} sessions"]
    (asked,) = operator.asked
    argv = [sys.executable, str(flush.script), str(flush.ran), SERVICE, "sessions", "0.0"]
    assert asked.message.splitlines() == [
        f"Run flush on {SERVICE}? Flush one of the service's caches",
        f"Will run: {argv}",
        "Requested because: stale carts",
    ]
    assert result.structured_content is not None and result.structured_content["ran"] is True
    assert outcomes(app.journal) == ["approved", "executed"]
    assert [d.detail.split(":")[0].split("\n")[0] for d in rows(app.journal)] == ["action flush"] * 2
    assert {(d.approver, d.ticket) for d in rows(app.journal)} == {(APPROVER, "CHG-2291")}


async def test_a_declined_flush_runs_nothing(make_app: AppFactory, flush: Flush, era: str) -> None:
    app, server = desk(make_app, services=flush.services())
    async with connect(server, era, elicitation_callback=Operator("decline")) as client:
        result = await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "flush", "parameters": {"cache": "prices"}}
        )
    assert text_of(result) == "NOT RUN -- operator declined"
    assert flush.runs() == []
    assert outcomes(app.journal) == ["declined"]


REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    "bad-choice": (
        {"action": "flush", "parameters": {"cache": "everything; rm -rf /"}},
        "NOT RUN -- parameter cache must be one of sessions, prices",
    ),
    "missing": ({"action": "flush"}, "NOT RUN -- parameter cache is required (one of sessions, prices)"),
    "extra": (
        {"action": "flush", "parameters": {"cache": "prices", "force": "yes"}},
        "NOT RUN -- no parameter force (it takes: cache)",
    ),
    "unknown-action": ({"action": "drop-tables"}, f"No action drop-tables for {SERVICE}; it has: flush"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_wrong_actions_and_parameters_are_refused_before_anyone_is_asked(
    make_app: AppFactory, flush: Flush, era: str, case: str
) -> None:
    arguments, expected = REFUSALS[case]
    app, server = desk(make_app, services=flush.services())
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        result = await client.call_tool("run_service_action", {"service": SERVICE, **arguments})
    assert result.is_error is True
    assert text_of(result) == expected
    assert "rm -rf" not in text_of(result)  # the value is never echoed
    assert operator.asked == [] and flush.runs() == []
    assert outcomes(app.journal) == []


async def test_an_unknown_service_is_refused(make_app: AppFactory, flush: Flush, era: str) -> None:
    _, server = desk(make_app, services=flush.services())
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        result = await client.call_tool("run_service_action", {"service": "nope-api", "action": "flush"})
    assert result.is_error is True and text_of(result).startswith("No such service: nope-api.")
    assert operator.asked == [] and flush.runs() == []


async def test_without_elicitation_nothing_runs(make_app: AppFactory, flush: Flush, era: str) -> None:
    app, server = desk(make_app, services=flush.services())
    async with connect(server, era) as client:
        result = await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "flush", "parameters": {"cache": "prices"}}
        )
    assert text_of(result) == (
        f"ELICITATION_UNAVAILABLE -- refusing to run flush on {SERVICE} without an approval channel"
    )
    assert flush.runs() == []
    assert outcomes(app.journal) == ["refused_no_channel"]


async def test_the_preview_output_is_in_the_question_masked(make_app: AppFactory, flush: Flush, era: str) -> None:
    _, server = desk(make_app, services=flush.services(preview=True))
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        result = await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "flush", "parameters": {"cache": "prices"}}
        )
    assert text_of(result).startswith(f"RAN flush on {SERVICE} under CHG-2291"), text_of(result)
    (asked,) = operator.asked
    lines = asked.message.splitlines()
    preview_argv = [sys.executable, str(flush.preview_script), "prices", SERVICE]
    assert lines[2] == f"Preview ({preview_argv}):"
    assert lines[3] == f"would flush 42 keys from prices of {SERVICE}"
    assert "sk_live_abcdefghijklmnopqrstuvwx" not in asked.message and lines[4].startswith("token=")
    assert flush.runs() == [f"{SERVICE} prices"]


async def test_out_of_band_the_page_shows_the_preview_and_approves(
    make_app: AppFactory, flush: Flush, era: str
) -> None:
    app, server = desk(make_app, services=flush.services(preview=True, approval="out-of-band"))
    person = LinkFollower()
    async with connect(server, era, elicitation_callback=person) as client:
        result = await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "flush", "parameters": {"cache": "sessions"}}
        )
    assert text_of(result).startswith(f"RAN flush on {SERVICE} under CHG-2291"), text_of(result)
    assert person.form_asks == []  # the client's own form never counts
    (seen,) = person.visits
    assert html.escape(f"would flush 42 keys from sessions of {SERVICE}") in seen.text
    assert flush.runs() == [f"{SERVICE} sessions"]
    assert outcomes(app.journal) == ["approval_requested", "page_opened", "approved", "executed"]


async def test_second_person_refuses_an_approver_nobody_signed_in(make_app: AppFactory, flush: Flush, era: str) -> None:
    """The action's own ``approval`` adds eyes: a second-person page refuses the OS user, and nothing runs."""
    app, server = desk(make_app, services=flush.services(approval="second-person"), approval_timeout_seconds=2)
    person = LinkFollower()
    async with connect(server, era, elicitation_callback=person) as client:
        result = await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "flush", "parameters": {"cache": "sessions"}}
        )
    assert text_of(result) == "NOT RUN -- no answer within 2s"
    (seen,) = person.visits
    assert "second-person approval needs a person signed in" in seen.text
    assert flush.runs() == []
    assert outcomes(app.journal) == ["approval_requested", "page_opened", "timed_out"]


async def test_a_service_limit_counts_restarts_and_actions_together(
    make_app: AppFactory, flush: Flush, restarts: Restarts, era: str
) -> None:
    limits = {"per_person_per_hour": 0, "restarts_per_service_per_hour": 1, "cooldown_seconds": 0}
    app, server = desk(make_app, services=flush.services(restarts), act_limits=limits)
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        first = await client.call_tool("restart_service", {"service": SERVICE})
        second = await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "flush", "parameters": {"cache": "prices"}}
        )
    assert text_of(first).startswith(f"RESTARTED {SERVICE} under CHG-2291")
    assert text_of(second).startswith(f"NOT RUN -- limit reached: restarts of {SERVICE} (1 of 1 in the last hour)")
    assert len(operator.asked) == 1 and flush.runs() == []
    assert outcomes(app.journal)[-1] == Outcome.REFUSED_LIMIT


async def test_an_action_waits_for_no_running_restart(
    make_app: AppFactory, flush: Flush, restarts: Restarts, era: str
) -> None:
    services = flush.services()
    services[SERVICE].update(restarts.action(sleep=3.0))
    app, server = desk(make_app, services=services)
    operator = approve()
    got: dict[str, Any] = {}

    async def restart() -> None:
        async with connect(server, era, elicitation_callback=approve()) as client:
            got["restart"] = await client.call_tool("restart_service", {"service": SERVICE})

    async with anyio.create_task_group() as group:
        group.start_soon(restart)
        with anyio.fail_after(20):
            while not restarts.executions():
                await anyio.sleep(0.05)
        async with connect(server, era, elicitation_callback=operator) as client:
            got["flush"] = await client.call_tool(
                "run_service_action", {"service": SERVICE, "action": "flush", "parameters": {"cache": "prices"}}
            )
    assert text_of(got["restart"]).startswith(f"RESTARTED {SERVICE}")
    assert got["flush"].is_error is True
    assert text_of(got["flush"]).startswith(f"NOT RUN -- a restart of {SERVICE} is already running (held by ")
    assert operator.asked == [] and flush.runs() == []
    busy = [d for d in rows(app.journal) if d.outcome == Outcome.REFUSED_BUSY]
    assert [d.detail.split(":")[0] for d in busy] == ["action flush"]


async def test_a_failing_action_says_its_exit_status(make_app: AppFactory, tmp_path: Path, era: str) -> None:
    action = {
        "description": "Fails",
        "argv": [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
    }
    app, server = desk(make_app, services={SERVICE: {"actions": {"fail": action}}})
    async with connect(server, era, elicitation_callback=approve()) as client:
        result = await client.call_tool("run_service_action", {"service": SERVICE, "action": "fail"})
    assert result.is_error is True
    assert text_of(result).splitlines()[0] == f"FAILED fail on {SERVICE} under CHG-2291: exit 3"
    assert "boom" in text_of(result)
    assert outcomes(app.journal) == ["approved", "failed"]


# A real process manager: Debian's supervisor runs two versions of a tiny HTTP service.

HTTP_SERVICE = """\
import http.server, sys
version, port = sys.argv[1], int(sys.argv[2])
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = version.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""

# The dry run prints each program's name and state, not supervisorctl's uptime: the approval is bound to the
# preview, and a 2026 retry works the preview out again, so a preview that changes by the second is refused.
ROLLBACK = """\
import subprocess, sys
conf, to = sys.argv[1], sys.argv[2]
others = [v for v in ("v1", "v2") if v != to]
if sys.argv[3:] == ["--dry-run"]:
    status = subprocess.run(["supervisorctl", "-c", conf, "status"], capture_output=True, text=True).stdout
    for line in status.splitlines():
        print(" ".join(line.split()[:2]))
    print(f"would stop {', '.join(others)} and start {to}")
    sys.exit(0)
subprocess.run(["supervisorctl", "-c", conf, "stop", *others], check=True)
subprocess.run(["supervisorctl", "-c", conf, "start", to], check=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _served(port: int) -> str | None:
    try:
        return httpx2.get(f"http://127.0.0.1:{port}/", timeout=2).text
    except httpx2.HTTPError:
        return None


@pytest.fixture(name="supervised")
def supervised_fixture(tmp_path: Path) -> Any:
    if shutil.which("supervisord") is None or shutil.which("supervisorctl") is None:
        pytest.skip("Debian's supervisor (supervisord, supervisorctl) is not installed: apt-get install supervisor")
    work = tmp_path / "sv"
    work.mkdir()
    (work / "service.py").write_text(HTTP_SERVICE, encoding="utf-8")
    port = _free_port()
    programs = "".join(
        f"[program:{v}]\ncommand={sys.executable} {work / 'service.py'} {v} {port}\n"
        f"autostart={'true' if v == 'v2' else 'false'}\nautorestart=false\nstartsecs=0\nstopwaitsecs=5\n"
        for v in ("v1", "v2")
    )
    conf = work / "supervisord.conf"
    conf.write_text(
        f"[unix_http_server]\nfile={work / 'sock'}\n[supervisord]\nlogfile={work / 'supervisord.log'}\n"
        f"pidfile={work / 'supervisord.pid'}\nchildlogdir={work}\nnodaemon=true\n"
        f"[rpcinterface:supervisor]\n"
        f"supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n"
        f"[supervisorctl]\nserverurl=unix://{work / 'sock'}\n{programs}",
        encoding="utf-8",
    )
    daemon = subprocess.Popen(["supervisord", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while _served(port) != "v2":
            assert daemon.poll() is None, (work / "supervisord.log").read_text(encoding="utf-8")
            assert time.monotonic() < deadline, "supervisord did not start v2"
            time.sleep(0.1)
        (work / "rollback.py").write_text(ROLLBACK, encoding="utf-8")
        yield conf, port
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)


async def test_rollback_under_supervisor_serves_the_earlier_version(
    make_app: AppFactory, supervised: tuple[Path, int], era: str
) -> None:
    conf, port = supervised
    rollback = {
        "description": "Roll back to an earlier release",
        "argv": [sys.executable, str(conf.parent / "rollback.py"), str(conf), "{version}"],
        "preview_argv": [sys.executable, str(conf.parent / "rollback.py"), str(conf), "{version}", "--dry-run"],
        "parameters": {"version": {"pattern": "^v[0-9]+$", "description": "release, e.g. v1"}},
        "timeout_seconds": 60,
        "pass_env": ["PATH"],
    }
    app, server = desk(make_app, services={SERVICE: {"actions": {"rollback": rollback}}})
    operator = approve()
    assert await anyio.to_thread.run_sync(_served, port) == "v2"
    async with connect(server, era, elicitation_callback=operator) as client:
        refused = await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "rollback", "parameters": {"version": "1"}}
        )
        assert text_of(refused) == "NOT RUN -- parameter version must match ^v[0-9]+$"
        assert await anyio.to_thread.run_sync(_served, port) == "v2"
        result = await client.call_tool(
            "run_service_action", {"service": SERVICE, "action": "rollback", "parameters": {"version": "v1"}}
        )
    assert text_of(result).startswith(f"RAN rollback on {SERVICE} under CHG-2291"), text_of(result)
    (asked,) = operator.asked
    assert asked.message.splitlines()[-3:] == ["v1 STOPPED", "v2 RUNNING", "would stop v2 and start v1"]
    deadline = time.monotonic() + 20
    while (served := await anyio.to_thread.run_sync(_served, port)) != "v1" and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert served == "v1"
    assert outcomes(app.journal) == ["approved", "executed"]


async def test_runbooks_end_with_the_service_s_actions(make_app: AppFactory, flush: Flush, era: str) -> None:
    _, server = desk(make_app, services=flush.services())
    _, plain = desk(make_app)
    async with connect(server, era) as client:
        tool = text_of(await client.call_tool("get_runbook", {"service": SERVICE}))
        resource = await client.read_resource(f"runbook://{SERVICE}")
    async with connect(plain, era) as client:
        without = text_of(await client.call_tool("get_runbook", {"service": SERVICE}))
    section = "\n## Actions on this desk\n"
    assert section not in without and tool.startswith(without.rstrip("\n"))
    assert tool.endswith(
        f"{section}\nRun one with run_service_action; each asks a human first.\n\n"
        "- `flush`: Flush one of the service's caches\n  - `cache`: one of sessions, prices -- which cache\n"
    )
    assert section in str(resource.contents[0].text)  # type: ignore[union-attr]


SETTINGS_ERRORS: dict[str, tuple[dict[str, Any], str, str]] = {
    "part-of-an-item": (
        {"argv": ["/opt/x", "--v={v}"], "parameters": {"v": {"pattern": "^v[0-9]+$"}}},
        "services.payments-api.actions.go",
        "argv item '--v={v}': a placeholder must be a whole item, like {service}",
    ),
    "unknown-placeholder": (
        {"argv": ["/opt/x", "{version}"]},
        "services.payments-api.actions.go",
        "argv item '{version}' names no parameter (it may name: service)",
    ),
    "two-types": (
        {"argv": ["/opt/x"], "parameters": {"v": {"pattern": "a", "choices": ["a"]}}},
        "services.payments-api.actions.go.parameters.v",
        "a parameter has exactly one of pattern, choices, or min/max",
    ),
}


@pytest.mark.parametrize("case", sorted(SETTINGS_ERRORS))
def test_bad_action_tables_are_refused_at_load_in_the_user_s_key_names(case: str) -> None:
    from incident_desk.settings.errors import SettingsError
    from incident_desk.settings.model import load_settings

    table, where, why = SETTINGS_ERRORS[case]
    with pytest.raises(SettingsError) as raised:
        load_settings({"services": {SERVICE: {"actions": {"go": {"description": "Go", **table}}}}})
    assert f"invalid setting {where} " in str(raised.value) and why in str(raised.value)


def test_the_actions_command_prints_what_a_configuration_offers(
    flush: Flush, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from incident_desk.cli import main as cli

    config = tmp_path / "desk.toml"
    config.write_text(
        f'[services.{SERVICE}.actions.flush]\ndescription = "Flush a cache"\nargv = ["/opt/flush", "{{cache}}"]\n'
        'parameters.cache = { choices = ["sessions", "prices"] }\napproval = "out-of-band"\n',
        encoding="utf-8",
    )
    assert cli.main(["actions", "--config", str(config)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{SERVICE}:",
        "  flush: Flush a cache (approval: out-of-band)",
        "    argv: ['/opt/flush', '{cache}']",
        "    cache: one of sessions, prices",
    ]
    assert cli.main(["actions", "--config", str(config), "search-api"]) == 1
    assert "search-api has no runbook actions" in capsys.readouterr().err
