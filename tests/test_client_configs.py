"""Client configs: the shipped files, the snippets, and merging into real-looking existing config files.

The expectations table below restates the reference's facts (wrapper key, field names) independently of
``incident_desk.client_configs``, so a wrong spelling in the module is caught rather than mirrored. Results are
read with parsers the module does not use: PyYAML, ``tomllib``, and ``json`` after this file strips comments.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tomllib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from incident_desk import client_configs as cc
from incident_desk.client_configs import (
    CLIENT_NAMES,
    DEFAULT_HTTP_URL,
    PLACEHOLDER_CHECKOUT,
    PLACEHOLDER_EXECUTABLE,
    ClientConfigError,
    Launcher,
    default_config_path,
    detect_launcher,
    registry,
    render_snippet,
    uvx_launcher,
    write_config,
)
from tests.helpers import ROOT, connect

CONFIG_DIR = ROOT / "client_configs"

# client -> (format, where the server map is, command field, url field)
EXPECTED: dict[str, tuple[str, str, str, str | None]] = {
    "claude-desktop": ("json", "mcpServers", "command", None),
    "claude-code": ("json", "mcpServers", "command", "url"),
    "cursor": ("json", "mcpServers", "command", "url"),
    "vscode": ("json", "servers", "command", "url"),
    "windsurf": ("json", "mcpServers", "command", "serverUrl"),
    "zed": ("json", "context_servers", "command", "url"),
    "cline": ("json", "mcpServers", "command", "url"),
    "continue": ("yaml", "mcpServers[]", "command", "url"),
    "goose": ("yaml", "extensions", "cmd", "uri"),
    "codex": ("toml", "mcp_servers", "command", "url"),
    "gemini-cli": ("json", "mcpServers", "command", "httpUrl"),
    "lm-studio": ("json", "mcpServers", "command", "url"),
}


def load_yaml(text: str) -> Any:
    return yaml.safe_load(text)


_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
_JSONC_COMMENT = re.compile(rf"({_JSON_STRING})|//[^\n]*|/\*.*?\*/", re.DOTALL)
_JSONC_TRAILING_COMMA = re.compile(rf"({_JSON_STRING})|,(?=\s*[}}\]])")


def load_jsonc(text: str) -> Any:
    """JSON with comments and trailing commas, as VS Code and Zed read it: strip both, keep strings whole."""
    without_comments = _JSONC_COMMENT.sub(lambda m: m.group(1) or "", text)
    return json.loads(_JSONC_TRAILING_COMMA.sub(lambda m: m.group(1) or "", without_comments))


def parse(fmt: str, text: str) -> Any:
    if fmt == "json":
        return json.loads(text)
    if fmt == "toml":
        return tomllib.loads(text)
    return load_yaml(text)


def entry_of(client: str, doc: Any) -> dict[str, Any]:
    _, where, _, _ = EXPECTED[client]
    if where.endswith("[]"):
        (entry,) = [item for item in doc[where[:-2]] if item.get("name") == "incident-desk"]
        return dict(entry)
    return dict(doc[where]["incident-desk"])


def example_paths() -> list[Path]:
    return sorted(p for p in CONFIG_DIR.rglob("*") if p.is_file() and p.name not in {"README.md", "manifest.json"})


def test_registry_names_the_twelve_clients() -> None:
    assert set(CLIENT_NAMES) == set(EXPECTED)
    assert len(CLIENT_NAMES) == 12


def test_shipped_files_are_exactly_what_the_generator_makes() -> None:
    shipped = {p.relative_to(CONFIG_DIR).as_posix(): p.read_text(encoding="utf-8") for p in example_paths()}
    generated = cc.example_files()
    assert sorted(shipped) == sorted(generated), "run write_examples(Path('client_configs')) to regenerate"
    for rel, text in generated.items():
        assert shipped[rel] == text, f"{rel} is stale: regenerate with write_examples"


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.relative_to(CONFIG_DIR).as_posix())
def test_every_shipped_file_parses_and_names_the_right_command(path: Path) -> None:
    client = path.parent.name
    fmt, _, command_field, url_field = EXPECTED[client]
    assert path.suffix == f".{fmt}"
    text = path.read_text(encoding="utf-8")
    entry = entry_of(client, parse(fmt, text))
    if ".http." in path.name:
        assert url_field is not None
        assert entry[url_field] == DEFAULT_HTTP_URL
        assert command_field not in entry
        # The shipped HTTP files are for the default loopback desk, which has no token: no header to warn about.
        assert "Authorization" not in text and "bearer_token_env_var" not in entry and "inputs" not in text
    elif ".uvx." in path.name:
        assert entry[command_field] == "uvx"
        assert entry["args"] == ["--offline", "--from", PLACEHOLDER_CHECKOUT, "incident-desk"]
    else:
        assert entry[command_field] == PLACEHOLDER_EXECUTABLE
        assert entry["args"] == []


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_each_client_ships_stdio_binary_uvx_and_http_forms(client: str) -> None:
    names = {p.name for p in (CONFIG_DIR / client).iterdir()}
    kinds = {"binary": False, "uvx": False, "http": False}
    for name in names:
        kinds["uvx" if ".uvx." in name else "http" if ".http." in name else "binary"] = True
    assert kinds["binary"]
    assert kinds["uvx"]
    assert kinds["http"] is (client != "claude-desktop")  # Claude Desktop takes remote servers in its UI


def test_readme_table_covers_every_client_and_is_current() -> None:
    readme = (CONFIG_DIR / "README.md").read_text(encoding="utf-8")
    assert cc.readme_table() in readme
    for client in CLIENT_NAMES:
        assert f"(`{client}`)" in readme


def test_readme_names_the_variable_gemini_cli_reads_to_trust_a_folder() -> None:
    """Gemini CLI 0.61 reads GEMINI_CLI_TRUST_WORKSPACE; with the old name the desk stays Disabled."""
    readme = (CONFIG_DIR / "README.md").read_text(encoding="utf-8")
    assert "GEMINI_CLI_TRUST_WORKSPACE=true" in readme
    assert "GEMINI_TRUST_WORKSPACE" not in readme


def test_claude_desktop_bundle_manifest_is_a_binary_server() -> None:
    manifest = json.loads((CONFIG_DIR / "claude-desktop" / "manifest.json").read_text(encoding="utf-8"))
    for key in ("manifest_version", "name", "version", "description", "author", "server"):
        assert key in manifest
    assert manifest["author"]["name"]
    server = manifest["server"]
    assert server["type"] == "binary"
    assert server["entry_point"] == "server/incident-desk"
    assert server["mcp_config"]["command"] == "${__dirname}/server/incident-desk"
    assert server["mcp_config"]["platform_overrides"]["win32"]["command"].endswith("incident-desk.exe")
    from incident_desk import __version__

    assert manifest["version"] == __version__


@pytest.mark.anyio
async def test_manifest_tools_and_prompts_exist_on_the_server(make_server: Any) -> None:
    manifest = json.loads((CONFIG_DIR / "claude-desktop" / "manifest.json").read_text(encoding="utf-8"))
    async with connect(make_server(), "legacy") as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
    assert {tool["name"] for tool in manifest["tools"]} <= tools
    assert {prompt["name"] for prompt in manifest["prompts"]} <= prompts


# ---------------------------------------------------------------------------------------------------------------
# render_snippet and launchers

REAL = Launcher(str(Path(sys.executable).absolute()), ("-m", "incident_desk"))


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_render_snippet_stdio_parses_with_absolute_command(client: str) -> None:
    fmt, _, command_field, _ = EXPECTED[client]
    entry = entry_of(client, parse(fmt, render_snippet(client, REAL)))
    assert entry[command_field] == REAL.command
    assert Path(entry[command_field]).is_absolute()
    assert entry["args"] == ["-m", "incident_desk"]


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_render_snippet_defaults_to_this_installation(client: str) -> None:
    fmt, _, command_field, _ = EXPECTED[client]
    entry = entry_of(client, parse(fmt, render_snippet(client)))
    assert Path(entry[command_field]).is_absolute()


@pytest.mark.parametrize("client", [c for c in CLIENT_NAMES if c != "claude-desktop"])
def test_render_snippet_http_parses(client: str) -> None:
    fmt, _, _, url_field = EXPECTED[client]
    url = "https://desk.example:8443/mcp"
    assert url_field is not None
    entry = entry_of(client, parse(fmt, render_snippet(client, http_url=url)))
    assert entry[url_field] == url


# How each client spells the token reference, restated from the reference, not read from the registry.
TOKEN_HEADERS: dict[str, str] = {
    "claude-code": "Bearer ${INCIDENT_DESK_HTTP_TOKEN}",
    "cursor": "Bearer ${env:INCIDENT_DESK_HTTP_TOKEN}",
    "vscode": "Bearer ${input:incident-desk-token}",
    "windsurf": "Bearer ${env:INCIDENT_DESK_HTTP_TOKEN}",
    "continue": "Bearer ${{ secrets.INCIDENT_DESK_HTTP_TOKEN }}",
    "gemini-cli": "Bearer ${INCIDENT_DESK_HTTP_TOKEN}",
}
HTTP_CLIENTS = [c for c in CLIENT_NAMES if c != "claude-desktop"]


def auth_header(client: str, entry: dict[str, Any]) -> str | None:
    headers = entry.get("requestOptions", {}).get("headers") if client == "continue" else entry.get("headers")
    return headers["Authorization"] if headers else None


@pytest.mark.parametrize("client", HTTP_CLIENTS)
def test_http_without_a_token_sends_no_authorization(client: str) -> None:
    fmt, _, _, url_field = EXPECTED[client]
    doc = parse(fmt, render_snippet(client, http_url=DEFAULT_HTTP_URL))
    entry = entry_of(client, doc)
    assert url_field is not None and entry[url_field] == DEFAULT_HTTP_URL
    assert auth_header(client, entry) is None
    assert "bearer_token_env_var" not in entry and "requestOptions" not in entry
    assert "inputs" not in doc, "no VS Code prompt for a token nobody uses"


@pytest.mark.parametrize("client", [*TOKEN_HEADERS, "codex"])
def test_http_with_a_token_references_it_through_the_client(client: str) -> None:
    fmt, _, _, _ = EXPECTED[client]
    url = "https://desk.example:8443/mcp"
    doc = parse(fmt, render_snippet(client, http_url=url, token=True))
    entry = entry_of(client, doc)
    assert auth_header(client, entry) == TOKEN_HEADERS.get(client)
    assert entry.get("bearer_token_env_var") == ("INCIDENT_DESK_HTTP_TOKEN" if client == "codex" else None)
    assert ("inputs" in doc) is (client == "vscode")


def test_claude_desktop_http_points_to_connectors() -> None:
    with pytest.raises(ClientConfigError, match="Connectors"):
        render_snippet("claude-desktop", http_url=DEFAULT_HTTP_URL)


def test_env_settings_are_rendered_and_secrets_refused() -> None:
    doc = json.loads(render_snippet("cursor", REAL, env={"INCIDENT_DESK_DATA_DIR": "/srv/desk"}))
    assert doc["mcpServers"]["incident-desk"]["env"] == {"INCIDENT_DESK_DATA_DIR": "/srv/desk"}
    goose = load_yaml(render_snippet("goose", REAL, env={"INCIDENT_DESK_LOG_LEVEL": "debug"}))
    assert goose["extensions"]["incident-desk"]["envs"] == {"INCIDENT_DESK_LOG_LEVEL": "debug"}
    for secret in ("INCIDENT_DESK_HTTP_TOKEN", "INCIDENT_DESK_PROVIDER_API_KEY", "INCIDENT_DESK_SEALING_KEY"):
        with pytest.raises(ClientConfigError, match="keychain"):
            render_snippet("cursor", REAL, env={secret: "x"})


def test_unknown_client_lists_the_known_ones() -> None:
    with pytest.raises(ClientConfigError, match="claude-desktop"):
        render_snippet("notepad", REAL)


def test_codex_uvx_gets_a_longer_startup_timeout() -> None:
    doc = tomllib.loads(render_snippet("codex", Launcher("/usr/bin/uvx", ("--from", "/x", "incident-desk"))))
    assert doc["mcp_servers"]["incident-desk"]["startup_timeout_sec"] >= 30


def test_windows_paths_survive_every_format() -> None:
    exe = Launcher(r"C:\Program Files\incident-desk\incident-desk.exe")
    for client in CLIENT_NAMES:
        fmt, _, command_field, _ = EXPECTED[client]
        assert entry_of(client, parse(fmt, render_snippet(client, exe)))[command_field] == exe.command


def test_detect_launcher_frozen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    exe = tmp_path / "incident-desk"
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(exe))
    assert detect_launcher() == Launcher(str(exe))


def test_detect_launcher_installed_script_and_module_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    launcher = detect_launcher()
    assert Path(launcher.command).is_absolute()
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    assert detect_launcher() == Launcher(str(python), ("-m", "incident_desk"))


def test_uvx_launcher_makes_local_checkouts_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkout").mkdir()
    local = uvx_launcher("checkout")
    assert local.args == ("--offline", "--from", str(tmp_path / "checkout"), "incident-desk")
    remote = uvx_launcher("git+https://example.org/desk.git@v1")
    assert remote.args == ("--offline", "--from", "git+https://example.org/desk.git@v1", "incident-desk")


@pytest.mark.parametrize("client", CLIENT_NAMES)
@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
def test_default_config_paths(client: str, platform: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    path = default_config_path(client, platform)
    assert path.is_absolute()
    assert path.suffix in {".json", ".yaml", ".toml"}
    assert cc.display_config_path(client, platform)


def test_default_config_paths_match_the_documented_locations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    home = Path.home()
    assert default_config_path("claude-desktop", "darwin") == (
        home / "Library/Application Support/Claude/claude_desktop_config.json"
    )
    assert default_config_path("claude-desktop", "linux") == home / ".config/Claude/claude_desktop_config.json"
    assert default_config_path("vscode", "linux") == home / ".config/Code/User/mcp.json"
    assert default_config_path("cursor", "win32") == home / ".cursor" / "mcp.json"
    assert default_config_path("codex", "linux") == home / ".codex/config.toml"
    assert default_config_path("goose", "darwin") == home / ".config/goose/config.yaml"
    assert cc.display_config_path("claude-desktop", "win32") == r"%APPDATA%\Claude\claude_desktop_config.json"
    monkeypatch.setenv("CODEX_HOME", "/opt/codex")
    assert default_config_path("codex", "linux") == Path("/opt/codex/config.toml")


# ---------------------------------------------------------------------------------------------------------------
# write_config: merging keeps everything else, broken files are untouched

EXE = Launcher("/opt/incident-desk/incident-desk")


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


def test_write_json_merges_keeps_other_servers_and_backs_up(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    original: dict[str, Any] = {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "git": {"command": "uvx", "args": ["mcp-server-git"]},
        },
    }
    path.write_text(json.dumps(original, indent=4) + "\n", encoding="utf-8")
    before = path.read_bytes()

    report = write_config("claude-desktop", EXE, path=path)

    assert report.path == path
    assert report.replaced is False
    assert report.backup is not None
    assert report.backup.read_bytes() == before
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["globalShortcut"] == "Ctrl+Space"
    assert doc["mcpServers"]["filesystem"] == original["mcpServers"]["filesystem"]
    assert doc["mcpServers"]["git"] == original["mcpServers"]["git"]
    assert doc["mcpServers"]["incident-desk"] == {"command": EXE.command, "args": []}
    assert '    "mcpServers": {' in path.read_text(encoding="utf-8"), "the file's own indentation is kept"

    again = write_config("claude-desktop", Launcher("/new/incident-desk"), path=path)
    assert again.replaced is True
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["mcpServers"]["incident-desk"]["command"] == "/new/incident-desk"
    assert set(doc["mcpServers"]) == {"filesystem", "git", "incident-desk"}
    assert len(backups(path)) == 2


def test_the_backup_is_never_written_through_a_link_planted_at_its_predictable_name(tmp_path: Path) -> None:
    """The backup's name is predictable (``<file>.bak-<timestamp>``): links planted at every name it could take in
    the next seconds, each pointing at a file that does not exist yet, are skipped, never written through."""
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    now = datetime.now()
    planted = {}
    for seconds in range(-1, 6):
        stamp = (now + timedelta(seconds=seconds)).strftime("%Y%m%d-%H%M%S")
        link, target = path.with_name(f"{path.name}.bak-{stamp}"), tmp_path / f"planted-target-{seconds}"
        link.symlink_to(target)
        planted[link] = target

    report = write_config("cursor", EXE, path=path)

    assert not [target for target in planted.values() if target.exists()], "a backup was written through a link"
    assert all(link.is_symlink() for link in planted)
    assert report.backup is not None and report.backup.name.endswith("-1")
    assert not report.backup.is_symlink() and report.backup.read_text(encoding="utf-8") == '{"mcpServers": {}}\n'
    assert "incident-desk" in json.loads(path.read_text(encoding="utf-8"))["mcpServers"]


def test_write_is_a_no_op_when_nothing_changes(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    write_config("cursor", EXE, path=path)
    report = write_config("cursor", EXE, path=path)
    assert report.replaced is True
    assert report.backup is None
    assert backups(path) == []


def test_write_creates_missing_file_and_folders(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "mcp.json"
    report = write_config("lm-studio", EXE, path=path)
    assert report.backup is None
    assert report.replaced is False
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "mcpServers": {"incident-desk": {"command": EXE.command, "args": []}}
    }
    assert not list(path.parent.glob(".*.tmp")), "no temp file left behind"


def test_write_default_path_comes_from_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # if the patch ever misses, the real home stays untouched
    monkeypatch.setattr(
        registry, "default_config_path", lambda client, platform=sys.platform: tmp_path / f"{client}.json"
    )
    report = write_config("gemini-cli", EXE)
    assert report.path == tmp_path / "gemini-cli.json"
    assert report.path.exists()


def test_write_jsonc_keeps_comments_and_trailing_commas(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    text = (
        "// Zed settings\n"
        "//\n"
        "// For information on how to configure Zed, see the Zed documentation.\n"
        "{\n"
        '  "theme": "One Dark", // the theme\n'
        '  "context_servers": {\n'
        '    /* a server */ "postgres": {"command": "pg-mcp", "args": [], "env": {}},\n'
        "  },\n"
        "}\n"
    )
    path.write_text(text, encoding="utf-8")
    write_config("zed", EXE, path=path)
    new = path.read_text(encoding="utf-8")
    for line in text.splitlines()[:5]:
        assert line in new
    assert "/* a server */" in new
    servers = load_jsonc(new)["context_servers"]
    assert set(servers) == {"postgres", "incident-desk"}
    assert servers["incident-desk"] == {"command": EXE.command, "args": [], "env": {}}


def test_write_vscode_http_adds_the_secret_input_once(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        '{\n\t"inputs": [{"type": "promptString", "id": "gh", "password": true}],\n'
        '\t"servers": {\n\t\t// GitHub\n\t\t"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}\n\t}\n}\n',
        encoding="utf-8",
    )
    write_config("vscode", path=path, http_url=DEFAULT_HTTP_URL, token=True)
    write_config("vscode", path=path, http_url=DEFAULT_HTTP_URL, token=True)
    new = path.read_text(encoding="utf-8")
    assert "// GitHub" in new
    doc = load_jsonc(new)
    assert [item["id"] for item in doc["inputs"]] == ["gh", "incident-desk-token"]
    assert doc["servers"]["incident-desk"]["headers"]["Authorization"] == "Bearer ${input:incident-desk-token}"
    assert "github" in doc["servers"]
    assert '\t\t"incident-desk"' in new, "tab indentation is kept"


def test_write_toml_keeps_comments_and_replaces_only_its_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    text = (
        '# my codex config\nmodel = "o4-mini"  # fast\n\n'
        '[mcp_servers.docs]\ncommand = "npx"\nargs = ["-y", "docs-mcp"]\n\n'
        '[mcp_servers.incident-desk]\ncommand = "/old/incident-desk"\nargs = []\n\n'
        '[mcp_servers.incident-desk.env]\nINCIDENT_DESK_LOG_LEVEL = "debug"\n\n'
        '# profiles below\n[profiles.work]\nmodel = "o3"\n'
    )
    path.write_text(text, encoding="utf-8")
    report = write_config("codex", EXE, path=path)
    assert report.replaced is True
    new = path.read_text(encoding="utf-8")
    assert "# my codex config" in new
    assert "# profiles below" in new
    doc = tomllib.loads(new)
    assert doc["model"] == "o4-mini"
    assert doc["profiles"] == {"work": {"model": "o3"}}
    assert doc["mcp_servers"]["docs"] == {"command": "npx", "args": ["-y", "docs-mcp"]}
    assert doc["mcp_servers"]["incident-desk"] == {"command": EXE.command, "args": []}


def test_write_toml_appends_when_absent_and_http_uses_env_var(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "o3"\n', encoding="utf-8")
    write_config("codex", path=path, http_url=DEFAULT_HTTP_URL, token=True)
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    assert doc["model"] == "o3"
    assert doc["mcp_servers"]["incident-desk"] == {
        "url": DEFAULT_HTTP_URL,
        "bearer_token_env_var": "INCIDENT_DESK_HTTP_TOKEN",
    }
    write_config("codex", path=path, http_url=DEFAULT_HTTP_URL)
    assert tomllib.loads(path.read_text(encoding="utf-8"))["mcp_servers"]["incident-desk"] == {"url": DEFAULT_HTTP_URL}


def test_write_vscode_http_without_a_token_adds_no_input(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{\n  // mine\n  "servers": {}\n}\n', encoding="utf-8")
    write_config("vscode", path=path, http_url=DEFAULT_HTTP_URL)
    doc = load_jsonc(path.read_text(encoding="utf-8"))
    assert doc == {"servers": {"incident-desk": {"type": "http", "url": DEFAULT_HTTP_URL}}}


def test_write_toml_refuses_an_inline_definition(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('mcp_servers = { incident-desk = { command = "x" } }\n', encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(ClientConfigError, match="left untouched") as err:
        write_config("codex", EXE, path=path)
    assert "[mcp_servers.incident-desk]" in str(err.value), "the error carries the snippet to add by hand"
    assert path.read_bytes() == before


def test_write_goose_yaml_keeps_other_extensions(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    text = (
        "GOOSE_PROVIDER: anthropic\n"
        "extensions:\n"
        "  developer:\n"
        "    bundled: true\n"
        "    enabled: true\n"
        "    name: developer\n"
        "    timeout: 300\n"
        "    type: builtin\n"
        "  # fetch server\n"
        "  fetch:\n"
        "    args:\n"
        "    - mcp-server-fetch\n"
        "    cmd: uvx\n"
        "    enabled: true\n"
        "    type: stdio\n"
        "GOOSE_MODE: smart_approve\n"
    )
    path.write_text(text, encoding="utf-8")
    write_config("goose", EXE, path=path)
    new = path.read_text(encoding="utf-8")
    assert "  # fetch server\n" in new
    doc = load_yaml(new)
    assert doc["GOOSE_PROVIDER"] == "anthropic"
    assert doc["GOOSE_MODE"] == "smart_approve"
    assert set(doc["extensions"]) == {"developer", "fetch", "incident-desk"}
    assert doc["extensions"]["fetch"]["args"] == ["mcp-server-fetch"]
    assert doc["extensions"]["incident-desk"]["cmd"] == EXE.command
    report = write_config("goose", path=path, http_url=DEFAULT_HTTP_URL)
    assert report.replaced is True
    doc = load_yaml(path.read_text(encoding="utf-8"))
    assert doc["extensions"]["incident-desk"]["uri"] == DEFAULT_HTTP_URL
    assert set(doc["extensions"]) == {"developer", "fetch", "incident-desk"}


def test_write_continue_yaml_replaces_its_list_item(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    text = (
        "name: Local config\nversion: 1.0.0\nschema: v1\n"
        'mcpServers:\n  - name: other\n    command: npx\n    args: ["-y", "other"]\n'
        "  - name: incident-desk\n    command: /old\n"
        "models: []\n"
    )
    path.write_text(text, encoding="utf-8")
    report = write_config("continue", EXE, path=path)
    assert report.replaced is True
    doc = load_yaml(path.read_text(encoding="utf-8"))
    assert [item["name"] for item in doc["mcpServers"]] == ["other", "incident-desk"]
    assert doc["mcpServers"][1]["command"] == EXE.command
    assert doc["models"] == []


def test_write_keeps_crlf_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b'{\r\n  "mcpServers": {\r\n    "a": {"command": "a"}\r\n  }\r\n}\r\n')
    write_config("cursor", EXE, path=path)
    data = path.read_bytes()
    assert b"\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert set(json.loads(data)["mcpServers"]) == {"a", "incident-desk"}


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_write_follows_a_symlinked_config(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    write_config("cursor", EXE, path=link)
    assert link.is_symlink()
    assert "incident-desk" in json.loads(real.read_text(encoding="utf-8"))["mcpServers"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_write_keeps_file_permissions(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text("{}\n", encoding="utf-8")
    path.chmod(0o600)
    write_config("cursor", EXE, path=path)
    assert path.stat().st_mode & 0o777 == 0o600


BROKEN = [
    ("claude-desktop", "claude_desktop_config.json", '{"mcpServers": {"a": {"command": "a"},}}\n', "not valid JSON"),
    ("cursor", "mcp.json", '{\n  // a comment\n  "mcpServers": {}\n}\n', "not valid JSON"),
    ("cline", "cline_mcp_settings.json", '{"mcpServers": ["not", "a", "map"]}\n', "'mcpServers' is not an object"),
    ("vscode", "mcp.json", '{"servers": {"x": {"command": "x"}\n', "unterminated object"),
    ("zed", "settings.json", '// zed\n{"context_servers": "off"}\n', "'context_servers' is not an object"),
    ("gemini-cli", "settings.json", "[1, 2]\n", "not a JSON object"),
    ("codex", "config.toml", '[mcp_servers.docs]\ncommand = "npx\n', "not valid TOML"),
    ("codex", "config.toml", 'mcp_servers = "none"\n', "'mcp_servers' is not a table"),
    ("goose", "config.yaml", "extensions:\n  fetch:\n    cmd: uvx\n   enabled: true\n", "indentation"),
    ("goose", "config.yaml", "extensions:\n  - fetch\n", "'extensions' is not a mapping"),
    ("goose", "config.yaml", "extensions:\n\tfetch: {}\n", "tab"),
    ("goose", "config.yaml", "base: &b {cmd: uvx}\nextensions:\n  fetch: *b\n", "cannot be edited safely"),
    ("continue", "config.yaml", "mcpServers:\n  name: x\n", "'mcpServers' is not a list"),
]


@pytest.mark.parametrize(("client", "name", "text", "problem"), BROKEN, ids=[f"{c}-{p}" for c, _, _, p in BROKEN])
def test_broken_file_is_left_byte_for_byte_untouched(
    tmp_path: Path, client: str, name: str, text: str, problem: str
) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(ClientConfigError) as err:
        write_config(client, EXE, path=path)
    message = str(err.value)
    assert str(path) in message
    assert problem in message
    assert "untouched" in message
    assert path.read_bytes() == text.encode("utf-8")
    assert backups(path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [name], "no temp or backup file left behind"


def test_non_utf8_file_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b'{"mcpServers": {"caf\xe9": {}}}')
    with pytest.raises(ClientConfigError, match="UTF-8"):
        write_config("cursor", EXE, path=path)
    assert path.read_bytes() == b'{"mcpServers": {"caf\xe9": {}}}'


def test_write_refuses_http_for_claude_desktop_without_touching_the_file(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text("{}\n", encoding="utf-8")
    with pytest.raises(ClientConfigError, match="Connectors"):
        write_config("claude-desktop", path=path, http_url=DEFAULT_HTTP_URL)
    assert path.read_text(encoding="utf-8") == "{}\n"


# ---------------------------------------------------------------------------------------------------------------
# Comments survive a merge wherever the client's format allows them; strict JSON refuses them


def test_only_vscode_and_zed_read_json_with_comments() -> None:
    jsonc = {spec.name for spec in cc.CLIENTS.values() if spec.comments_allowed}
    strict = {spec.name for spec in cc.CLIENTS.values() if spec.format == "json" and not spec.comments_allowed}
    assert jsonc == {"vscode", "zed"}
    assert len(strict) == 7


@pytest.mark.parametrize("client", ["vscode", "zed"])
def test_jsonc_comments_are_kept_when_the_entry_is_added_then_replaced(tmp_path: Path, client: str) -> None:
    _, where, _, _ = EXPECTED[client]
    path = tmp_path / "settings.json"
    text = (
        "// my editor settings\n"
        "{\n"
        '  "fontSize": 14, // points\n'
        "  /* servers I use */\n"
        f'  "{where}": {{\n'
        '    "docs": {"command": "docs-mcp", "args": []} // the docs server\n'
        "  }\n"
        "}\n"
    )
    path.write_text(text, encoding="utf-8")
    write_config(client, EXE, path=path)
    report = write_config(client, Launcher("/new/incident-desk"), path=path)
    assert report.replaced is True
    new = path.read_text(encoding="utf-8")
    for comment in ("// my editor settings", "// points", "/* servers I use */", "// the docs server"):
        assert comment in new
    doc = load_jsonc(new)
    assert doc["fontSize"] == 14
    assert doc[where]["docs"] == {"command": "docs-mcp", "args": []}
    assert doc[where]["incident-desk"]["command"] == "/new/incident-desk"
    assert len(backups(path)) == 2


STRICT_JSON = [c for c in CLIENT_NAMES if EXPECTED[c][0] == "json" and c not in {"vscode", "zed"}]


@pytest.mark.parametrize("client", STRICT_JSON)
@pytest.mark.parametrize("comment", ["// servers\n", "/* servers */\n"])
def test_strict_json_file_with_a_comment_is_refused_and_untouched(tmp_path: Path, client: str, comment: str) -> None:
    path = tmp_path / "config.json"
    text = "{\n  " + comment + '  "mcpServers": {"other": {"command": "x"}}\n}\n'
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ClientConfigError) as err:
        write_config(client, EXE, path=path)
    message = str(err.value)
    assert str(path) in message
    assert "not valid JSON" in message
    assert "comments" in message
    assert "line 2, column 3" in message
    assert "untouched" in message
    assert path.read_text(encoding="utf-8") == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_strict_json_is_rewritten_in_its_own_key_order_and_indentation(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{\n   "z": 1,\n   "mcpServers": {"b": {"command": "b"}},\n   "a": 2\n}\n', encoding="utf-8")
    write_config("cursor", EXE, path=path)
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert list(doc) == ["z", "mcpServers", "a"]
    assert list(doc["mcpServers"]) == ["b", "incident-desk"]
    assert '\n   "mcpServers": {\n      "b": {' in text, "three-space indentation is kept"


def test_jsonc_file_with_a_repeated_key_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    text = '{\n  // two blocks\n  "context_servers": {"a": {}},\n  "context_servers": {}\n}\n'
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ClientConfigError, match="left untouched"):
        write_config("zed", EXE, path=path)
    assert path.read_text(encoding="utf-8") == text


GOOSE_WITH_COMMENTS = (
    "# goose config, edited by hand\n"
    "GOOSE_PROVIDER: anthropic  # the provider\n"
    "extensions:\n"
    "  # the old desk\n"
    "  incident-desk:\n"
    "    cmd: /old/incident-desk\n"
    "    args:\n"
    "    - --verbose\n"
    "  # fetch server\n"
    "  fetch:\n"
    "    args:\n"
    "    - mcp-server-fetch\n"
    "    cmd: uvx  # from PATH\n"
    "    enabled: true\n"
    "    type: stdio\n"
    "\n"
    "# approval mode\n"
    "GOOSE_MODE: smart_approve\n"
)


def test_goose_yaml_comments_and_layout_are_kept_when_the_entry_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(GOOSE_WITH_COMMENTS, encoding="utf-8")
    report = write_config("goose", EXE, path=path)
    assert report.replaced is True
    new = path.read_text(encoding="utf-8")
    for line in GOOSE_WITH_COMMENTS.splitlines()[8:]:
        assert line + "\n" in new, f"{line!r} is kept as it was"
    for kept in (
        "# goose config, edited by hand\n",
        "GOOSE_PROVIDER: anthropic  # the provider\n",
        "  # the old desk\n",
    ):
        assert kept in new
    doc = load_yaml(new)
    assert doc["GOOSE_PROVIDER"] == "anthropic"
    assert doc["GOOSE_MODE"] == "smart_approve"
    assert doc["extensions"]["fetch"] == {"args": ["mcp-server-fetch"], "cmd": "uvx", "enabled": True, "type": "stdio"}
    assert doc["extensions"]["incident-desk"]["cmd"] == EXE.command
    assert list(doc["extensions"]) == ["incident-desk", "fetch"]
    assert write_config("goose", EXE, path=path).backup is None, "a second identical write changes nothing"


def test_goose_comment_above_the_next_key_stays_there_when_the_entry_is_added(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "extensions:\n  fetch:\n    cmd: uvx\n    args:\n    - a  # first\n# mode\nGOOSE_MODE: x\n", encoding="utf-8"
    )
    write_config("goose", EXE, path=path)
    write_config("goose", Launcher("/new/incident-desk"), path=path)
    new = path.read_text(encoding="utf-8")
    assert "    - a  # first\n  incident-desk:\n" in new, "the list keeps its indentation and its own comment"
    assert new.endswith("\n# mode\nGOOSE_MODE: x\n")
    assert load_yaml(new)["extensions"]["incident-desk"]["cmd"] == "/new/incident-desk"


def test_continue_yaml_comments_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    text = (
        "name: Local config  # shown in the picker\n"
        "version: 1.0.0\n"
        "schema: v1\n"
        "mcpServers:\n"
        "  # the old desk\n"
        "  - name: incident-desk\n"
        "    command: /old\n"
        "  # the other server\n"
        "  - name: other\n"
        "    command: npx\n"
        "models: []  # none yet\n"
    )
    path.write_text(text, encoding="utf-8")
    write_config("continue", EXE, path=path)
    new = path.read_text(encoding="utf-8")
    for comment in ("# shown in the picker", "  # the old desk\n", "  # the other server\n", "models: []  # none yet"):
        assert comment in new
    doc = load_yaml(new)
    assert [item["name"] for item in doc["mcpServers"]] == ["incident-desk", "other"]
    assert doc["mcpServers"][0]["command"] == EXE.command


CODEX_WITH_COMMENTS = (
    "# codex settings\n"
    'model = "o3"  # the default model\n'
    "\n"
    "# servers\n"
    "[mcp_servers.docs]\n"
    'command = "npx"  # needs node\n'
    "\n"
    "# our desk\n"
    "[mcp_servers.incident-desk]\n"
    'command = "/old/incident-desk"  # old build\n'
    "args = []\n"
    "\n"
    "# work profile\n"
    "[profiles.work]\n"
    'model = "o4-mini"\n'
)


def test_codex_toml_comments_are_kept_when_the_entry_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CODEX_WITH_COMMENTS, encoding="utf-8")
    report = write_config("codex", EXE, path=path, env={"INCIDENT_DESK_LOG_LEVEL": "debug"})
    assert report.replaced is True
    new = path.read_text(encoding="utf-8")
    assert new.startswith(CODEX_WITH_COMMENTS.split("[mcp_servers.incident-desk]")[0]), "everything before is kept"
    assert new.endswith('\n\n# work profile\n[profiles.work]\nmodel = "o4-mini"\n'), "the next table's comment too"
    doc = tomllib.loads(new)
    assert doc["model"] == "o3"
    assert doc["mcp_servers"]["docs"] == {"command": "npx"}
    assert doc["mcp_servers"]["incident-desk"] == {
        "command": EXE.command,
        "args": [],
        "env": {"INCIDENT_DESK_LOG_LEVEL": "debug"},
    }
    assert doc["profiles"] == {"work": {"model": "o4-mini"}}


def test_codex_toml_comments_are_kept_when_the_entry_is_added(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    without_desk = CODEX_WITH_COMMENTS.split("# our desk\n")[0] + CODEX_WITH_COMMENTS.split("args = []\n\n")[1]
    path.write_text(without_desk, encoding="utf-8")
    assert write_config("codex", EXE, path=path).replaced is False
    new = path.read_text(encoding="utf-8")
    for comment in ("# codex settings", "# the default model", "# servers", "# needs node"):
        assert comment in new
    assert "\n# work profile\n[profiles.work]\n" in new, "the comment still introduces the table it was above"
    doc = tomllib.loads(new)
    assert list(doc["mcp_servers"]) == ["docs", "incident-desk"]
    assert doc["profiles"] == {"work": {"model": "o4-mini"}}
