"""The command line beyond serving: `config`, `token`, and the settings precedence it builds on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from incident_desk.cli import main
from incident_desk.settings import SettingsError, load_settings
from tests.fakes import MemoryKeyring


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
        ("[services.api]\nkind = 'command'\nargv = []\n", "invalid setting services.api.command.argv"),
        ("colour = 'blue'\n", "invalid setting colour"),
        ("port = [\n", "is not valid TOML"),
    ],
)
def test_bad_config_values_name_the_setting(tmp_path: Path, content: str, expected: str) -> None:
    config = tmp_path / "desk.toml"
    config.write_text(content)
    with pytest.raises(SettingsError, match=expected.replace(".", r"\.")):
        load_settings({}, config)


def test_a_secret_value_never_appears_in_a_settings_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INCIDENT_DESK_PORT", "sk-ant-secret-looking-value")
    with pytest.raises(SettingsError) as caught:
        load_settings({})
    assert "sk-ant-secret-looking-value" not in str(caught.value)
