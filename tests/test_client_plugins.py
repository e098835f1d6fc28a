"""The Claude Code plugin and the Gemini CLI extension at the repository root, checked by the real CLIs from npm."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from incident_desk import __version__
from tests.helpers import ROOT
from tests.npm_tools import CLAUDE_CODE, GEMINI_CLI, npm_tool

pytestmark = [pytest.mark.slow]

PLUGIN = ROOT / ".claude-plugin" / "plugin.json"
SKILL = ROOT / "skills" / "incident-triage" / "SKILL.md"
EXTENSION = ROOT / "gemini-extension.json"


def _plugin_copy(tmp_path: Path, manifest: dict[str, object]) -> Path:
    """The plugin's files in a scratch directory, with ``manifest`` as its plugin.json."""
    copy = tmp_path / "plugin"
    (copy / ".claude-plugin").mkdir(parents=True)
    (copy / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest), encoding="utf-8")
    shutil.copytree(ROOT / "skills", copy / "skills")
    return copy


def _claude(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    claude = npm_tool(CLAUDE_CODE, "claude")
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/local/bin:/usr/bin:/bin", "DISABLE_AUTOUPDATER": "1"}
    return subprocess.run([str(claude), *args], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)


def test_the_plugin_and_extension_carry_the_packages_version_and_the_desk() -> None:
    plugin = json.loads(PLUGIN.read_text(encoding="utf-8"))
    extension = json.loads(EXTENSION.read_text(encoding="utf-8"))
    assert plugin["version"] == extension["version"] == __version__
    for manifest, root in ((plugin, "${CLAUDE_PLUGIN_ROOT}"), (extension, "${extensionPath}")):
        server = manifest["mcpServers"]["incident-desk"]
        # Offline like every other uvx entry: a client that drops the shell's certificate settings still starts it.
        assert [server["command"], *server["args"]] == ["uvx", "--offline", "--from", root, "incident-desk"]
    assert (ROOT / extension["contextFileName"]).is_file()
    front = SKILL.read_text(encoding="utf-8").split("---")[1]
    assert "name: incident-triage" in front
    for tool in ("list_incidents", "read_incident_log", "search_incident_log", "get_runbook", "restart_service"):
        assert tool in SKILL.read_text(encoding="utf-8")


def test_claude_plugin_validate_accepts_the_plugin_and_refuses_a_broken_one(tmp_path: Path) -> None:
    accepted = _claude(tmp_path, "plugin", "validate", "--strict", str(ROOT))
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "Validation passed" in accepted.stdout + accepted.stderr
    broken = json.loads(PLUGIN.read_text(encoding="utf-8"))
    broken["name"] = "Incident Desk!"
    refused = _claude(tmp_path, "plugin", "validate", "--strict", str(_plugin_copy(tmp_path, broken)))
    assert refused.returncode != 0, refused.stdout + refused.stderr


def _gemini(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    gemini = npm_tool(GEMINI_CLI, "gemini")
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "NO_COLOR": "1"}
    return subprocess.run([str(gemini), *args], capture_output=True, text=True, timeout=180, env=env, cwd=home)


def test_the_gemini_cli_loads_the_extension_with_its_server_context_and_skill(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    validated = _gemini(home, "extensions", "validate", str(ROOT))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    linked = _gemini(home, "extensions", "link", str(ROOT), "--consent")
    assert linked.returncode == 0, linked.stdout + linked.stderr
    listed = _gemini(home, "extensions", "list")
    shown = listed.stdout + listed.stderr
    assert listed.returncode == 0, shown
    assert f"incident-desk ({__version__})" in shown
    assert str(ROOT / "GEMINI.md") in shown
    assert "MCP servers:\n  incident-desk" in shown
    assert "incident-triage:" in shown


def test_the_gemini_cli_refuses_an_extension_without_a_name(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    broken = tmp_path / "extension"
    broken.mkdir()
    manifest = json.loads(EXTENSION.read_text(encoding="utf-8"))
    del manifest["name"]
    (broken / "gemini-extension.json").write_text(json.dumps(manifest), encoding="utf-8")
    refused = _gemini(home, "extensions", "validate", str(broken))
    assert refused.returncode != 0 or "successfully validated" not in refused.stdout + refused.stderr
