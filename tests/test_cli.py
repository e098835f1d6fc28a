"""The command line beyond serving: `config`, `token`, and the settings precedence it builds on."""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from incident_desk.cli.main import main
from incident_desk.cli.parser import SUBCOMMANDS, build_parser
from incident_desk.client_configs import CLIENT_NAMES, detect_launcher, render_snippet
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import Settings, load_settings
from tests.fakes import MemoryKeyring
from tests.helpers import child_env
from tests.test_client_configs import EXPECTED, entry_of, parse


def test_config_prints_the_snippet_with_this_machines_absolute_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "claude-desktop"]) == 0
    entry = json.loads(capsys.readouterr().out)["mcpServers"]["incident-desk"]
    command = Path(entry["command"])
    assert command.is_absolute() and command.exists()
    assert command.name in ("incident-desk", Path(sys.executable).name)


def test_config_uvx_form_names_the_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "cursor", "--uvx", str(tmp_path)]) == 0
    entry = json.loads(capsys.readouterr().out)["mcpServers"]["incident-desk"]
    assert entry["command"].endswith("uvx")
    assert entry["args"] == ["--offline", "--from", str(tmp_path), "incident-desk"]


def test_config_write_merges_and_keeps_other_servers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "mcp.json"
    target.write_text(json.dumps({"mcpServers": {"other": {"command": "other-server"}}, "theme": "dark"}))
    assert main(["config", "cursor", "--write", "--path", str(target)]) == 0
    merged = json.loads(target.read_text())
    assert merged["theme"] == "dark"
    assert merged["mcpServers"]["other"] == {"command": "other-server"}
    assert "incident-desk" in merged["mcpServers"]
    assert list(tmp_path.glob("mcp.json.bak-*")), "a backup is written before the merge"
    assert "backup" in capsys.readouterr().err


def test_config_write_leaves_a_broken_file_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "mcp.json"
    target.write_bytes(b'{"mcpServers": {"other": ')
    assert main(["config", "cursor", "--write", "--path", str(target)]) == 1
    assert target.read_bytes() == b'{"mcpServers": {"other": '
    err = capsys.readouterr().err
    assert str(target) in err


def test_config_refuses_an_empty_uvx_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "codex", "--uvx", ""]) == 1
    assert "uvx source is empty" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------
# config carries the user's own desk into the entry


def make_desk(root: Path, incident_id: str = "INC-7") -> Path:
    entry = root / "incidents" / incident_id
    entry.mkdir(parents=True)
    entry.joinpath("incident.toml").write_text(
        'title = "queue backlog"\nservice = "billing"\nseverity = "SEV3"\nstatus = "open"\n'
        "opened = 2026-02-01T09:00:00Z\n"
    )
    entry.joinpath("log.txt").write_text("09:00:01 billing WARN backlog 1200\n")
    (root / "runbooks").mkdir()
    return root


def env_of(client: str, entry: dict[str, Any]) -> dict[str, str]:
    return dict(entry.get("envs" if client == "goose" else "env") or {})


SECRET_VALUES = {
    "INCIDENT_DESK_PROVIDER_API_KEY": "sk-test-never-in-a-file",
    "INCIDENT_DESK_HTTP_TOKEN": "http-token-never-in-a-file",
    "INCIDENT_DESK_SEALING_KEY": "sealing-key-never-in-a-file",
}


@pytest.fixture
def users_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's working directory with a desk and a config file, provider settings and secrets in the environment."""
    make_desk(tmp_path / "desk")
    (tmp_path / "desk.toml").write_text('log_level = "debug"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INCIDENT_DESK_AUDIT_DB")
    monkeypatch.delenv("INCIDENT_DESK_ACT_LIMITS")  # the tests' own "off", no setting of this user's
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER", "openai")
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_MODEL", "llama3.1")
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("INCIDENT_DESK_TRANSPORT", "http")  # how this shell serves, not how a client starts it
    for name, value in SECRET_VALUES.items():
        monkeypatch.setenv(name, value)
    return Path.cwd()


def expected_env(cwd: Path) -> dict[str, str]:
    return {
        "INCIDENT_DESK_DATA_DIR": str(cwd / "desk"),
        "INCIDENT_DESK_CONFIG": str(cwd / "desk.toml"),
        "INCIDENT_DESK_AUDIT_DB": str(cwd / "journal" / "audit.sqlite3"),
        "INCIDENT_DESK_PROVIDER": "openai",
        "INCIDENT_DESK_PROVIDER_MODEL": "llama3.1",
        "INCIDENT_DESK_PROVIDER_BASE_URL": "http://127.0.0.1:11434/v1",
    }


FLAGS = ["--data-dir", "desk", "--config", "desk.toml", "--audit-db", "journal/audit.sqlite3"]


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_config_prints_an_entry_for_the_users_own_desk(
    client: str, users_shell: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", client, *FLAGS]) == 0
    out, err = capsys.readouterr()
    fmt = EXPECTED[client][0]
    assert env_of(client, entry_of(client, parse(fmt, out))) == expected_env(users_shell)
    # stdout is the snippet alone, so it can be piped into a file; every remark is on stderr.
    assert out == render_snippet(client, detect_launcher(), env=dict(sorted(expected_env(users_shell).items())))
    assert f"the client will see the desk in {users_shell / 'desk'}, configured by {users_shell / 'desk.toml'}" in err
    for value in SECRET_VALUES.values():
        assert value not in out + err
    for name in SECRET_VALUES:
        assert (
            f"left out of the entry: {name}: a secret; the desk the client starts reads it from the OS keychain" in err
        )
    assert "left out of the entry: INCIDENT_DESK_TRANSPORT: the client starts its desk over stdio" in err


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_config_write_carries_the_environment_and_says_which_desk(
    client: str, users_shell: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INCIDENT_DESK_DATA_DIR", "desk")  # relative, as typed in the shell
    monkeypatch.setenv("INCIDENT_DESK_CONFIG", "desk.toml")
    monkeypatch.setenv("INCIDENT_DESK_AUDIT_DB", "journal/audit.sqlite3")
    fmt = EXPECTED[client][0]
    target = users_shell / "client" / f"settings.{fmt}"
    assert main(["config", client, "--write", "--path", str(target)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    text = target.read_text(encoding="utf-8")
    assert env_of(client, entry_of(client, parse(fmt, text))) == expected_env(users_shell)
    assert f"incident-desk added to {target}" in err
    assert f"the client will see the desk in {users_shell / 'desk'}, configured by {users_shell / 'desk.toml'}" in err
    for value in SECRET_VALUES.values():
        assert value not in text + err


@pytest.mark.parametrize("client", ["claude-code", "codex", "goose", "continue", "vscode"])
def test_config_write_twice_says_already_up_to_date_and_touches_nothing(
    client: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / f"settings.{EXPECTED[client][0]}"
    assert main(["config", client, "--write", "--path", str(target)]) == 0
    capsys.readouterr()
    before = (target.read_bytes(), target.stat().st_mtime_ns)
    assert main(["config", client, "--write", "--path", str(target)]) == 0
    err = capsys.readouterr().err
    assert f"incident-desk in {target} is already up to date; nothing written" in err
    assert "updated" not in err and "added" not in err
    assert (target.read_bytes(), target.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name], "no backup of an unchanged file"


@pytest.mark.parametrize("client", ["claude-code", "codex", "goose", "continue", "vscode"])
def test_config_name_lets_a_stdio_and_an_http_entry_live_side_by_side(
    client: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fmt, where, command_field, url_field = EXPECTED[client]
    target = tmp_path / f"settings.{fmt}"
    url = "http://127.0.0.1:8765/mcp"
    assert main(["config", client, "--write", "--path", str(target)]) == 0
    assert main(["config", client, "--write", "--path", str(target), "--http-url", url, "--name", "desk-http"]) == 0
    err = capsys.readouterr().err
    assert f"desk-http added to {target}" in err
    doc = parse(fmt, target.read_text(encoding="utf-8"))
    entries = {item["name"]: item for item in doc[where[:-2]]} if where.endswith("[]") else doc[where]
    assert set(entries) == {"incident-desk", "desk-http"}
    assert command_field in entries["incident-desk"]
    assert url_field is not None and entries["desk-http"][url_field] == url
    if client == "goose":
        assert entries["desk-http"]["name"] == "desk-http"


def test_config_name_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "cursor", "--name", "my desk"]) == 1
    assert "entry name 'my desk' is not valid" in capsys.readouterr().err


def test_config_without_settings_says_the_client_sees_the_sample_desk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "cursor", "--write", "--path", str(tmp_path / "mcp.json")]) == 0
    assert "the client will see the bundled sample desk" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "config_text", "problem"),
    [
        (["--data-dir", "no-such-desk"], None, "invalid setting data_dir"),
        (["--config", "missing.toml"], None, "missing.toml does not exist"),
        (["--config", "desk.toml"], 'data_dir = "desk"\n', "invalid setting data_dir in config file"),
        (["--config", "desk.toml"], 'provider = "anthropic"\n', "provider_model is required"),
    ],
)
def test_config_validates_what_it_carries_before_writing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    config_text: str | None,
    problem: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    make_desk(tmp_path / "desk")
    if config_text is not None:
        (tmp_path / "desk.toml").write_text(config_text)
    target = tmp_path / "client" / "mcp.json"
    assert main(["config", "cursor", "--write", "--path", str(target), *args]) == 2
    assert problem in capsys.readouterr().err
    assert not target.parent.exists(), "nothing is written"


def test_config_file_that_serves_http_still_gives_the_client_a_stdio_desk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "desk.toml").write_text('transport = "http"\nport = 9000\n')
    assert main(["config", "codex", "--config", "desk.toml"]) == 0
    entry = entry_of("codex", parse("toml", capsys.readouterr().out))
    assert entry["env"]["INCIDENT_DESK_TRANSPORT"] == "stdio"


@pytest.mark.anyio
@pytest.mark.subprocess
async def test_the_written_entry_starts_the_users_desk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the client will do: start the entry's command with its env, over stdio, from a directory of its own."""
    monkeypatch.chdir(tmp_path)
    make_desk(tmp_path / "desk")
    target = tmp_path / "claude_desktop_config.json"
    assert main(["config", "claude-desktop", "--write", "--path", str(target), "--data-dir", "desk"]) == 0
    entry = json.loads(target.read_text())["mcpServers"]["incident-desk"]
    env = child_env(tmp_path / "unused.sqlite3") | entry["env"]
    elsewhere = tmp_path / "client-cwd"
    elsewhere.mkdir()
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd=str(elsewhere))
    async with Client(params, mode="legacy") as client:
        listing = await client.call_tool("list_incidents", {})
    assert [incident["id"] for incident in listing.structured_content["incidents"]] == ["INC-7"]


# ---------------------------------------------------------------------------------------------------------------
# config for an HTTP desk: a token header only when a token is in use


def http_entry(client: str, out: str) -> dict[str, Any]:
    return entry_of(client, parse(EXPECTED[client][0], out))


def test_config_http_loopback_sends_no_token_header(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "claude-code", "--http-url", "http://127.0.0.1:8765/mcp"]) == 0
    out, err = capsys.readouterr()
    assert http_entry("claude-code", out) == {"type": "http", "url": "http://127.0.0.1:8765/mcp"}
    assert "the client will see the desk serving http://127.0.0.1:8765/mcp" in err
    assert "add --token" in err


@pytest.mark.parametrize(
    ("args", "header"),
    [
        (["--http-url", "http://127.0.0.1:8765/mcp", "--token"], "Bearer ${INCIDENT_DESK_HTTP_TOKEN}"),
        (["--http-url", "https://desk.example.com/mcp"], "Bearer ${INCIDENT_DESK_HTTP_TOKEN}"),
        (["--http-url", "http://[::1]:8765/mcp"], None),
        (["--http-url", "http://localhost:8765/mcp"], None),
    ],
)
def test_config_http_token_header_when_a_token_is_in_use(
    capsys: pytest.CaptureFixture[str], args: list[str], header: str | None
) -> None:
    assert main(["config", "gemini-cli", *args]) == 0
    entry = http_entry("gemini-cli", capsys.readouterr().out)
    assert entry.get("headers") == ({"Authorization": header} if header else None)


@pytest.mark.parametrize("client", ["zed", "cline", "goose", "lm-studio"])
def test_config_http_token_refused_for_a_client_that_cannot_read_one(
    client: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "settings"
    assert main(["config", client, "--write", "--path", str(target), "--http-url", "https://desk.example/mcp"]) == 1
    assert "cannot read a bearer token" in capsys.readouterr().err
    assert not target.exists()


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--token"], "--token goes with --http-url"),
        (["--http-url", "http://127.0.0.1:8765/mcp", "--data-dir", "."], "settings flags (--data-dir)"),
    ],
)
def test_config_refuses_flags_that_do_not_fit(
    capsys: pytest.CaptureFixture[str], args: list[str], problem: str
) -> None:
    assert main(["config", "cursor", *args]) == 1
    captured = capsys.readouterr()
    assert problem in captured.err and captured.out == ""


@pytest.mark.parametrize(("kind", "name"), [("http", "http-token"), ("sealing", "sealing-key")])
def test_token_create_stores_a_random_secret_and_shows_it_once(
    memory_keyring: MemoryKeyring, capsys: pytest.CaptureFixture[str], kind: str, name: str
) -> None:
    assert main(["token", "create", "--kind", kind]) == 0
    printed = capsys.readouterr().out.strip()
    stored = memory_keyring.store[("incident-desk", name)]
    assert printed == stored and len(stored) >= 40
    assert main(["token", "create", "--kind", kind]) == 0
    assert memory_keyring.store[("incident-desk", name)] != stored, "each create makes a new secret"
    capsys.readouterr()
    assert main(["token", "show", "--kind", kind]) == 0
    shown = capsys.readouterr().out.strip()
    assert memory_keyring.store[("incident-desk", name)] not in shown
    assert main(["token", "delete", "--kind", kind]) == 0
    assert ("incident-desk", name) not in memory_keyring.store


def test_settings_precedence_flag_over_env_over_file_over_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "desk.toml"
    config.write_text('port = 9001\nhost = "127.0.0.2"\nlog_level = "debug"\n[services.api]\nargv = ["true"]\n')
    monkeypatch.setenv("INCIDENT_DESK_HOST", "127.0.0.3")
    monkeypatch.setenv("INCIDENT_DESK_LOG_LEVEL", "error")
    settings = load_settings({"log_level": "warning"}, config)
    assert settings.log_level == "warning"  # flag beats env and file
    assert settings.host == "127.0.0.3"  # env beats file
    assert settings.port == 9001  # file beats default
    assert settings.stateless is False  # default
    assert settings.services["api"].kind == "command"


def test_secrets_are_refused_in_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "desk.toml"
    config.write_text('http_token = "abc"\nprovider_api_key = "sk-123"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({}, config)
    assert "http_token, provider_api_key" in str(caught.value)
    assert "sk-123" not in str(caught.value) and "abc" not in str(caught.value)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("port = 'eighty'\n", "invalid setting port"),
        ("[services.api]\nkind = 'command'\nargv = []\n", "invalid setting services.api.argv"),
        ("colour = 'blue'\n", "invalid setting colour"),
        ("port = [\n", "is not valid TOML"),
    ],
)
def test_bad_config_values_name_the_setting(tmp_path: Path, content: str, expected: str) -> None:
    config = tmp_path / "desk.toml"
    config.write_text(content)
    with pytest.raises(SettingsError, match=expected.replace(".", r"\.")):
        load_settings({}, config)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            'data_dri = "/tmp"\n',
            "invalid setting data_dri (config file {config}): not a setting of this desk (did you mean data_dir?)",
        ),
        (
            '[services.api]\nkind = "comand"\n',
            "invalid setting services.api.kind (config file {config}): kind 'comand' is not one of command, simulate "
            "(did you mean command?)",
        ),
        (
            '[services.api]\nargvv = ["true"]\n',
            "invalid setting services.api.argvv (config file {config}): not a setting of this desk "
            "(did you mean argv?)",
        ),
        (
            '[services.web.logs]\nkind = "files"\npaths = ["rel/*.log"]\n',
            "invalid setting services.web.logs (config file {config}): log path 'rel/*.log' is relative: give an "
            "absolute glob",
        ),
    ],
)
def test_config_errors_speak_the_users_key_names(tmp_path: Path, content: str, expected: str) -> None:
    """No tag names, no _action_kind(), no service_logs or INCIDENT_DESK_SERVICE_LOGS the user never wrote."""
    config = tmp_path / "desk.toml"
    config.write_text(content)
    with pytest.raises(SettingsError) as caught:
        load_settings({}, config)
    message = str(caught.value)
    assert message == expected.format(config=config)
    for jargon in ("_action_kind", "Input tag", "service_logs", "INCIDENT_DESK_SERVICE", "Value error"):
        assert jargon not in message


def test_a_bad_variable_is_named_as_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INCIDENT_DESK_LOG_LEVEL", "loud")
    with pytest.raises(SettingsError) as caught:
        load_settings({})
    assert str(caught.value).startswith("invalid setting log_level (INCIDENT_DESK_LOG_LEVEL): ")


def test_unknown_desk_variables_are_warned_about_with_a_suggestion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INCIDENT_DESK_DATADIR", str(tmp_path))
    monkeypatch.setenv("INCIDENT_DESK_SOURCE_PROD", "a source's secret: known")
    monkeypatch.setenv("INCIDENT_DESK_SERVICES__API__KIND", "simulate")
    monkeypatch.setenv("INCIDENT_DESK_CONFIG", "")
    assert main(["audit"]) == 0
    err = capsys.readouterr().err
    assert (
        "incident-desk: warning: INCIDENT_DESK_DATADIR is not a setting of this desk and is ignored; did you mean "
        "INCIDENT_DESK_DATA_DIR?" in err
    )
    assert err.count("warning:") == 1, err


def test_a_served_desk_logs_unknown_desk_variables(tmp_path: Path) -> None:
    env = child_env(tmp_path / "audit.sqlite3", INCIDENT_DESK_DATADIR=str(tmp_path))
    completed = subprocess.run(
        [sys.executable, "-m", "incident_desk"], input="", capture_output=True, text=True, env=env, timeout=60
    )
    assert completed.stdout == ""
    assert "INCIDENT_DESK_DATADIR is not a setting of this desk" in completed.stderr
    assert "did you mean INCIDENT_DESK_DATA_DIR?" in completed.stderr


def test_a_secret_value_never_appears_in_a_settings_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INCIDENT_DESK_PORT", "sk-ant-secret-looking-value")
    with pytest.raises(SettingsError) as caught:
        load_settings({})
    assert "sk-ant-secret-looking-value" not in str(caught.value)


@pytest.mark.parametrize(
    "arguments",
    [
        ["serve", "--transport", "http", "--port", "9000", "--no-redact"],
        ["audit", "--limit", "5"],
        ["tools", "--read-only", "--desk-name", "team-a"],
        ["actions", "payments-api", "--desk-name", "team-a"],
        ["locks", "break", "payments-api", "--reason", "r2 frozen"],
        ["limits", "--desk-name", "team-a"],
        ["limits", "--desk-name", "team-a", "reset", "payments-api", "--reason", "hotfix"],
        ["key", "show", "--kind", "audit-db"],
        ["token", "create"],
        ["config", "zed", "--data-dir", "/srv/desk"],
        ["doctor", "--log-level", "debug"],
        ["demo", "--era", "2026-07-28"],
        ["timeline", "INC-1042", "--html", "/tmp/page.html"],
        ["handoff", "--hours", "6", "--data-dir", "/srv/desk"],
    ],
)
def test_the_parser_built_for_one_subcommand_reads_it_as_the_whole_parser_does(arguments: list[str]) -> None:
    """A served desk builds only the serve parser (the others import what serving never needs)."""
    all_of_them = {
        "serve",
        "audit",
        "tools",
        "actions",
        "locks",
        "limits",
        "key",
        "token",
        "config",
        "doctor",
        "demo",
        "timeline",
        "handoff",
    }
    assert set(SUBCOMMANDS) == all_of_them  # all of them here
    assert build_parser(arguments[0]).parse_args(arguments) == build_parser().parse_args(arguments)


def test_the_command_line_leaves_the_collector_as_it_found_it() -> None:
    gc.disable()
    try:
        with pytest.raises(SystemExit):
            main(["--version"])
        assert not gc.isenabled()
    finally:
        gc.enable()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_top_level_help_shows_the_serving_flags_the_readme_uses_without_serve(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--transport", "--host", "--port", "--stateless", "--no-redact", "--data-dir", "--audit-db"):
        assert flag in out, flag
    assert "`incident-desk [flags]` is `incident-desk serve [flags]`" in " ".join(out.split())


def test_every_subcommand_and_flag_has_help_text() -> None:
    parser = build_parser()
    subcommands = _subparsers(parser)
    assert set(subcommands) == set(SUBCOMMANDS)
    choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))._choices_actions
    assert {c.dest for c in choices if c.help} == set(SUBCOMMANDS)
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            assert action.help, action.option_strings
    for name, sub in subcommands.items():
        assert sub.description, f"{name} has no description"
        for action in sub._actions:
            assert action.help and action.help != argparse.SUPPRESS, f"{name} {action.option_strings or action.dest}"


@pytest.mark.parametrize("command", ["key", "token"])
def test_key_and_token_offer_no_flag_they_ignore(command: str) -> None:
    options = {option for action in _subparsers(build_parser())[command]._actions for option in action.option_strings}
    assert not options & {"--data-dir", "--audit-db", "--log-level", "--log-format"}
    assert "--config" in options, "the config file may name the keychain service"
    with pytest.raises(SystemExit):
        build_parser(command).parse_args([command, "show", "--data-dir", "/srv/desk"])


def test_a_gemini_entry_says_it_shadows_the_extensions_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gemini CLI lets a settings.json server win over an extension's server of the same name: say so."""
    target = tmp_path / "settings.json"
    assert main(["config", "gemini-cli", "--write", "--path", str(target)]) == 0
    assert "takes precedence over the incident-desk Gemini extension's server" in capsys.readouterr().err
    assert main(["config", "gemini-cli", "--write", "--path", str(target), "--name", "desk-local"]) == 0
    assert "takes precedence" not in capsys.readouterr().err
    assert set(json.loads(target.read_text(encoding="utf-8"))["mcpServers"]) == {"incident-desk", "desk-local"}


def test_config_for_an_oauth_desk_names_its_issuer_and_sends_no_token(capsys: pytest.CaptureFixture[str]) -> None:
    """A desk that publishes Protected Resource Metadata signs people in itself: no static token hint."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    asked: list[str] = []

    class Metadata(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            found = self.path == "/.well-known/oauth-protected-resource/mcp"
            body = json.dumps({"resource": "x", "authorization_servers": ["https://id.example/\nrealms/sre"]})
            self.send_response(200 if found else 404)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode() if found else b"{}")

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    try:
        assert main(["config", "gemini-cli", "--http-url", url, "--token"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    captured = capsys.readouterr()
    assert asked == ["/.well-known/oauth-protected-resource/mcp"]
    assert "signs people in with OAuth at https://id.example/" in captured.err
    assert "realms/sre\n" not in captured.err, "the issuer is untrusted text, shown as one line"
    assert "--token is not used" in captured.err and "add --token" not in captured.err
    assert "headers" not in http_entry("gemini-cli", captured.out)


@pytest.mark.parametrize("empty", ["", "   ", "${user_config.data_dir}"])
def test_an_empty_variable_leaves_the_config_files_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty: str
) -> None:
    """A plugin or a bundle passes ``INCIDENT_DESK_X=""`` for a field left empty: that is no value, not a blank one."""
    data = tmp_path / "desk-data"
    data.mkdir()
    journal = tmp_path / "journal.sqlite3"
    config = tmp_path / "desk.toml"
    config.write_text(f'data_dir = "{data}"\naudit_db = "{journal}"\nport = 9001\nlog_level = "debug"\n')
    for name in ("DATA_DIR", "AUDIT_DB", "PORT", "LOG_LEVEL"):
        monkeypatch.setenv(f"INCIDENT_DESK_{name}", empty)
    settings = load_settings({}, config)
    assert settings.data_dir == data
    assert settings.audit_db == journal
    assert settings.port == 9001
    assert settings.log_level == "debug"


def test_an_empty_variable_without_a_config_file_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INCIDENT_DESK_DATA_DIR", "")
    monkeypatch.setenv("INCIDENT_DESK_PORT", "")
    settings = load_settings({})
    assert settings.data_dir is None
    assert settings.port == Settings.model_fields["port"].default
