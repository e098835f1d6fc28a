"""The desk as a real subprocess over stdio: what a desktop client launches."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import IO

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from incident_desk.features.prompts import SAVE_SENTENCE
from tests.helpers import (
    ROOT,
    SAMPLE_1043_FINDINGS,
    SAMPLE_1043_LOG,
    child_env,
    synthetic_incidents,
    text_of,
    until_logged,
)

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return child_env(tmp_path / "audit.sqlite3", **extra)


def server_params(tmp_path: Path, *args: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "incident_desk", *args], cwd=str(ROOT), env=_env(tmp_path, **env)
    )


@pytest.mark.smoke
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_transcripts_over_stdio(tmp_path: Path, mode: str) -> None:
    async with Client(server_params(tmp_path), mode=mode) as client:
        index = text_of(await client.read_resource("incident://index"))
        log = text_of(await client.read_resource("incident://INC-1043/log"))
        prompt = await client.get_prompt("postmortem", {"incidentId": "INC-1043", "audience": "the on-call manager"})
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        summary = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
        restart = await client.call_tool("restart_service", {"service": "payments-api"})
        with pytest.raises(MCPError) as missing:
            await client.read_resource("incident://INC-9999/log")
        with pytest.raises(MCPError) as missing_prompt:
            await client.get_prompt("postmortem", {"incidentId": "INC-9999"})
    assert index == "INC-1042\nINC-1043"
    assert log == SAMPLE_1043_LOG
    prompt_content = prompt.messages[0].content
    assert isinstance(prompt_content, TextContent)
    saving = "\n\n" + SAVE_SENTENCE.format(id="INC-1043")
    findings = "\n\n" + SAMPLE_1043_FINDINGS
    assert prompt_content.text.endswith("Use only the log below.\n\n" + SAMPLE_1043_LOG + findings + saving)
    assert "summarize_incident" in tools and "restart_service" in tools
    # A client with neither capability gets transcript 06.
    assert text_of(summary) == (
        "SAMPLING_UNAVAILABLE -- client has no model to lend. Raw log:\n"
        + SAMPLE_1043_LOG
        + "\n"
        + SAMPLE_1043_FINDINGS
    )
    assert text_of(restart) == (
        "ELICITATION_UNAVAILABLE -- refusing to restart payments-api without an approval channel"
    )
    assert (missing.value.code, missing.value.message) == (-32602, "No such incident: INC-9999")
    assert missing_prompt.value.message == "No such incident: INC-9999"


def _spawn(tmp_path: Path, stderr: IO[str], *args: str) -> subprocess.Popen[str]:
    """The desk as a client launches it, driven by hand through its pipes; its stderr to ``stderr``."""
    return subprocess.Popen(
        [sys.executable, "-m", "incident_desk", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        cwd=ROOT,
        env=_env(tmp_path),
    )


def _rpc(message_id: int, method: str, params: dict[str, object] | None = None) -> str:
    payload: dict[str, object] = {"jsonrpc": "2.0", "id": message_id, "method": method}
    if params is not None:
        payload["params"] = params
    return json.dumps(payload)


@pytest.mark.smoke
def test_every_byte_on_stdout_is_json_rpc(tmp_path: Path) -> None:
    """Drive the server by hand and read all of stdout: each line must be one JSON-RPC message, nothing else."""
    initialize = _rpc(
        1,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "purity", "version": "1"}},
    )
    lines = [
        initialize,
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        _rpc(2, "tools/list"),
        _rpc(3, "resources/read", {"uri": "incident://INC-1042/log"}),
        _rpc(4, "resources/read", {"uri": "incident://INC-9999/log"}),
        _rpc(5, "tools/call", {"name": "summarize_incident", "arguments": {"incidentId": "INC-1042"}}),
        _rpc(6, "tools/call", {"name": "restart_service", "arguments": {"service": "payments-api"}}),
        _rpc(7, "tools/call", {"name": "list_incidents", "arguments": {}}),
        _rpc(8, "prompts/get", {"name": "postmortem", "arguments": {"incidentId": "INC-9999"}}),
    ]
    stderr_path = tmp_path / "stderr.log"
    stderr_file = stderr_path.open("w")
    process = _spawn(tmp_path, stderr_file, "--log-level", "debug")
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("\n".join(lines) + "\n")
    process.stdin.flush()
    out_lines: list[str] = []
    answered: set[int] = set()
    deadline = time.monotonic() + 60
    while answered != {1, 2, 3, 4, 5, 6, 7, 8} and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        out_lines.append(line)
        message = json.loads(line)
        if message.get("id") is not None:
            answered.add(message["id"])
    process.stdin.close()  # the client goes away: the server must exit cleanly, adding nothing to stdout
    rest = process.stdout.read()
    process.stdout.close()
    returncode = process.wait(timeout=30)
    stderr_file.close()
    stderr = stderr_path.read_text()
    assert returncode == 0, stderr
    out_lines += rest.splitlines(keepends=True)
    assert answered == {1, 2, 3, 4, 5, 6, 7, 8}, (out_lines, stderr)
    for line in out_lines:
        assert line.endswith("\n")
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0", line
        assert "result" in message or "error" in message or "method" in message, line
    # The desk did log (to stderr): debug logging is on, and it must not have leaked into stdout.
    assert "incident-desk starting" in stderr


def test_the_data_directory_is_first_read_after_the_initialize_answer(tmp_path: Path) -> None:
    """Reading it masks every title and so loads the redaction rules: the handshake's answer does not wait for it,
    the first request after the handshake does (a first call then finds it read; docs/performance.md)."""
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("w") as stderr_file:
        process = _spawn(tmp_path, stderr_file)
    assert process.stdin is not None and process.stdout is not None
    try:
        hello: dict[str, object] = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "order", "version": "1"},
        }
        process.stdin.write(_rpc(1, "initialize", hello) + "\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1
        time.sleep(0.2)  # the loader would start here if it were the one to read the directory
        at_handshake = stderr_path.read_text()
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        process.stdin.write(_rpc(2, "tools/list") + "\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 2
        at_listing = stderr_path.read_text()
    finally:
        process.stdin.close()
        process.wait(timeout=30)
        process.stdout.close()
    assert "incident-desk starting" in at_handshake
    assert "data directory read" not in at_handshake
    read = next(json.loads(line) for line in at_listing.splitlines() if "data directory read" in line)
    assert (read["incidents"], read["skipped_entries"]) == (2, 0)


def test_version_and_help_go_to_stdout_and_exit_zero(tmp_path: Path) -> None:
    version = subprocess.run(
        [sys.executable, "-m", "incident_desk", "--version"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        check=False,
    )
    helped = subprocess.run(
        [sys.executable, "-m", "incident_desk", "--help"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        check=False,
    )
    assert version.returncode == 0 and version.stdout.startswith("incident-desk 0.")
    assert helped.returncode == 0 and "serve" in helped.stdout and "doctor" in helped.stdout


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--port", "99999"], {"INCIDENT_DESK_TRANSPORT": "http"}, "invalid setting port"),
        ([], {"INCIDENT_DESK_SAMPLING_TIMEOUT_SECONDS": "soon"}, "invalid setting sampling_timeout_seconds"),
        ([], {"INCIDENT_DESK_PROVIDER": "openai"}, "provider_model is required"),
        (["--config", "/nonexistent/desk.toml"], {}, "config file /nonexistent/desk.toml does not exist"),
        (["--data-dir", "/nonexistent/desk"], {}, "invalid setting data_dir"),
        (["--audit-db", "/proc/no/audit.sqlite3"], {}, "invalid setting audit_db"),
        ([], {"INCIDENT_DESK_SERVICES": '{"pay api": {"kind": "simulate"}}'}, "invalid service name(s) 'pay api'"),
    ],
)
def test_bad_settings_stop_the_start_with_a_message_naming_them(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "incident_desk", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path, **env),
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert completed.returncode == 2
    assert expected in completed.stderr
    assert completed.stdout == ""


def _one_search_then_gone(tmp_path: Path, index: int) -> subprocess.Popen[str]:
    """A desk asked one search right after its handshake, by a client that closes stdin as soon as it answers."""
    lines = [
        _rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "brief"}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        _rpc(2, "tools/list"),
        _rpc(
            3, "tools/call", {"name": "search_incident_log", "arguments": {"incidentId": "INC-1042", "pattern": "ERR"}}
        ),
    ]
    with (tmp_path / f"stderr-{index}.log").open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "incident_desk"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=ROOT,
            env=_env(tmp_path / f"desk-{index}"),
        )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("\n".join(lines) + "\n")
    process.stdin.flush()
    for line in process.stdout:  # until the search's answer, or the desk's end
        if '"id":3' in line.replace(" ", ""):
            break
    process.stdin.close()
    return process


def test_a_client_that_asks_once_and_leaves_sees_the_desk_exit_cleanly(tmp_path: Path) -> None:
    """The search stack's loader is still compiling RE2 when such a client goes: the desk waits for it instead of
    aborting in the interpreter's finalization (24 of 60 such desks exited with SIGABRT when it was a daemon
    thread). Two desks at a time, ten in all."""
    codes = []
    for pair in range(5):
        desks = [_one_search_then_gone(tmp_path, 2 * pair + i) for i in range(2)]
        for desk in desks:
            codes.append(desk.wait(timeout=30))
            assert desk.stdout is not None
            desk.stdout.close()
    stderr = "".join(path.read_text() for path in sorted(tmp_path.glob("stderr-*.log")))
    assert codes == [0] * 10, stderr
    assert "terminate called" not in stderr


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_search_stack_loads_while_the_client_starts(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], mode: str
) -> None:
    """After the handshake answer, before any call: the first search then costs what the others do."""
    params = server_params(tmp_path, INCIDENT_DESK_LOG_LEVEL="debug")
    async with Client(params, mode=mode) as client:
        await until_logged(capfd, "search stack loaded", partial(anyio.sleep, 0.05), tries=400)
        assert "search_incident_log" not in capfd.readouterr().err, "no call asked for it"
        found = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": "WARN"})
    assert text_of(found).startswith("1: 11:02:44 search-api WARN")


async def test_a_plugins_empty_data_dir_serves_the_config_files_desk(tmp_path: Path) -> None:
    """The Claude plugin and the .mcpb pass ``INCIDENT_DESK_DATA_DIR=""`` for a field the user left empty."""
    data = synthetic_incidents(tmp_path / "desk-data", 1)
    config = tmp_path / "desk.toml"
    config.write_text(f'data_dir = "{data}"\n')
    params = server_params(tmp_path, INCIDENT_DESK_DATA_DIR="", INCIDENT_DESK_CONFIG=str(config))
    async with Client(params) as client:
        listed = text_of(await client.call_tool("list_incidents", {}))
    assert "INC-0" in listed
    assert "INC-1043" not in listed, "the sample desk answered in place of the configured one"
