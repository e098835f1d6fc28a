"""The twelve desktop MCP clients (where each keeps its config, how it spells an entry, what the desk gets from
it) and how this installation is launched. Data and paths only: the CLI imports it to build ``--help``."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SERVER_NAME = "incident-desk"
# The variable a *client* reads the desk's bearer token from (each client spells the reference its own way).
TOKEN_ENV_VAR = "INCIDENT_DESK_HTTP_TOKEN"  # noqa: S105 -- a variable name, not a secret
VSCODE_TOKEN_INPUT = "incident-desk-token"  # noqa: S105 -- a VS Code input id, not a secret

Platform = Literal["linux", "darwin", "win32"]


class ClientConfigError(Exception):
    """A client config could not be rendered or written; the message names the file and the problem."""


@dataclass(frozen=True)
class Launcher:
    """How a client starts the desk over stdio: an absolute command plus its arguments."""

    command: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClientSpec:
    """One desktop client: where its config lives and how it spells an MCP server entry."""

    name: str
    title: str
    example_stem: str  # client_configs/<name>/<stem>[.uvx|.http].<ext>
    locations: Mapping[Platform, tuple[str, str]]  # platform -> (base, path relative to base)
    features: str
    notes: str
    format: Literal["json", "yaml", "toml"] = "json"
    layout: Literal["map", "continue"] = "map"  # continue: a list of named entries, not a map keyed by name
    server_key: str = "mcpServers"
    comments_allowed: bool = False  # the client reads JSON with comments and trailing commas (JSONC)
    http_supported: bool = True
    http_token: str | None = None  # how the HTTP entry references the bearer token, None: it cannot


def _everywhere(base: str, rel: str) -> dict[Platform, tuple[str, str]]:
    return {"linux": (base, rel), "darwin": (base, rel), "win32": (base, rel)}


def _app_config(rel: str) -> dict[Platform, tuple[str, str]]:
    """Electron-style per-user app config: ~/.config, ~/Library/Application Support, %APPDATA%."""
    return {"linux": ("xdg", rel), "darwin": ("appsupport", rel), "win32": ("appdata", rel)}


# One block per client, laid out as a table by hand: the formatter would give every field its own line.
# fmt: off
CLIENTS: Mapping[str, ClientSpec] = {spec.name: spec for spec in (
    ClientSpec("claude-desktop", "Claude Desktop", "claude_desktop_config",
        _app_config("Claude/claude_desktop_config.json"),
        http_supported=False,
        features="resources, prompts, tools; no sampling, no elicitation",
        notes="summarize_incident answers with the raw log (or the direct provider); restart_service refuses "
              "(no approval channel). Remote servers are added in Settings → Connectors, not in this file, so "
              "there is no HTTP file here. One-click install: `manifest.json` (.mcpb, binary). The official app "
              "ships for macOS and Windows; the Linux path is the MCP tutorial's."),
    ClientSpec("claude-code", "Claude Code", "mcp", _everywhere("home", ".claude.json"),
        http_token="Bearer ${" + TOKEN_ENV_VAR + "}",
        features="resources, prompts, tools, elicitation (declared unreliably); no sampling",
        notes="Save as `.mcp.json` at a repo root (project scope) or merge into `~/.claude.json` (user scope); "
              "`claude mcp add` does the same. HTTP with a token reads it from `${INCIDENT_DESK_HTTP_TOKEN}`."),
    ClientSpec("cursor", "Cursor", "mcp", _everywhere("home", ".cursor/mcp.json"),
        http_token="Bearer ${env:" + TOKEN_ENV_VAR + "}",
        features="prompts, tools, elicitation (form); no resources, no sampling",
        notes="Project scope: `.cursor/mcp.json`. HTTP with a token reads it from `${env:INCIDENT_DESK_HTTP_TOKEN}`."),
    ClientSpec("vscode", "VS Code (GitHub Copilot)", "mcp", _app_config("Code/User/mcp.json"),
        server_key="servers", comments_allowed=True, http_token="Bearer ${input:" + VSCODE_TOKEN_INPUT + "}",
        features="resources, templates, prompts, tools, completions, sampling, elicitation (form and url)",
        notes="The one client that exercises every degrade step's happy path. Workspace scope: "
              "`.vscode/mcp.json`. HTTP with a token asks for it once through `inputs` (kept in VS Code's secret "
              "storage). Comments in the file are kept."),
    ClientSpec("windsurf", "Windsurf", "mcp_config", _everywhere("home", ".codeium/windsurf/mcp_config.json"),
        http_token="Bearer ${env:" + TOKEN_ENV_VAR + "}",
        features="tools only; no resources, prompts, sampling or elicitation",
        notes="HTTP uses `serverUrl`; a token is read from `${env:INCIDENT_DESK_HTTP_TOKEN}`. 100-tool limit."),
    ClientSpec("zed", "Zed", "settings", {
            "linux": ("xdg", "zed/settings.json"),
            "darwin": ("home", ".config/zed/settings.json"),
            "win32": ("appdata", "Zed/settings.json"),
        },
        server_key="context_servers", comments_allowed=True,
        features="prompts, tools; no resources, no sampling, no elicitation",
        notes="Merge into Zed's settings.json (`zed: open settings`); comments in it are kept. Zed has no "
              "secret indirection: use HTTP on loopback only (no token), or stdio."),
    ClientSpec("cline", "Cline", "cline_mcp_settings",
        _app_config("Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"),
        features="resources, tools; no prompts, no sampling, no elicitation",
        notes="Path is the VS Code extension's globalStorage (the Cline CLI uses "
              "`~/.cline/data/settings/cline_mcp_settings.json`). No documented secret indirection: HTTP on "
              "loopback only (no token), or stdio."),
    ClientSpec("continue", "Continue", "incident-desk", _everywhere("home", ".continue/mcpServers/incident-desk.yaml"),
        format="yaml", layout="continue", http_token="Bearer ${{ secrets." + TOKEN_ENV_VAR + " }}",
        features="resources, prompts, tools (agent mode only); no sampling, no elicitation",
        notes="A standalone block file for `.continue/mcpServers/` (workspace or `~/.continue`); the same "
              "`mcpServers` list can be merged into `config.yaml`. HTTP with a token reads it from "
              "`${{ secrets.INCIDENT_DESK_HTTP_TOKEN }}`."),
    ClientSpec("goose", "Goose", "config", {
            "linux": ("xdg", "goose/config.yaml"),
            "darwin": ("home", ".config/goose/config.yaml"),
            "win32": ("appdata", "Block/goose/config/config.yaml"),
        },
        format="yaml", server_key="extensions",
        features="resources, prompts, tools, sampling, elicitation (per the MCP clients page; check at runtime)",
        notes="Merge under `extensions:`; goose writes this file itself, so comments are rare but kept. HTTP "
              "is `type: streamable_http` with `uri`; no header indirection: loopback only (no token), or stdio."),
    ClientSpec("codex", "OpenAI Codex", "config", _everywhere("codex", "config.toml"),
        format="toml", server_key="mcp_servers", http_token=TOKEN_ENV_VAR,
        features="resources (with templates), tools, elicitation (form); no prompts, no sampling",
        notes="`[mcp_servers.incident-desk]` in `$CODEX_HOME/config.toml` (default `~/.codex`); comments are kept. "
              "HTTP with a token: `bearer_token_env_var`. The uvx form raises `startup_timeout_sec` for rebuilds."),
    ClientSpec("gemini-cli", "Gemini CLI", "settings", _everywhere("home", ".gemini/settings.json"),
        http_token="Bearer ${" + TOKEN_ENV_VAR + "}",
        features="prompts (as slash commands), tools; no resources, no sampling, no elicitation",
        notes="Project scope: `.gemini/settings.json`. In an untrusted folder no MCP server connects (`gemini mcp "
              "list`: Disabled): trust it with `/permissions`. HTTP uses `httpUrl` (plain `url` means SSE); a "
              "token is read from `${INCIDENT_DESK_HTTP_TOKEN}`."),
    ClientSpec("lm-studio", "LM Studio", "mcp", _everywhere("home", ".lmstudio/mcp.json"),
        features="tools only; no resources, prompts, sampling or elicitation",
        notes="Edit in-app: Program → Install → Edit mcp.json. No secret indirection: HTTP on loopback only."),
)}
# fmt: on

CLIENT_NAMES: tuple[str, ...] = tuple(CLIENTS)


def detect_launcher() -> Launcher:
    """The frozen executable, else the ``incident-desk`` script beside this interpreter or on PATH, else
    ``python -m incident_desk``. Absolute, but symlinks are kept: resolving a venv's python escapes the venv."""
    if getattr(sys, "frozen", False):
        return Launcher(str(Path(sys.executable).absolute()))
    beside = (
        Path(sys.executable).absolute().with_name("incident-desk.exe" if sys.platform == "win32" else "incident-desk")
    )
    if beside.is_file():
        return Launcher(str(beside))
    found = shutil.which("incident-desk")
    if found:
        return Launcher(str(Path(found).absolute()))
    return Launcher(str(Path(sys.executable).absolute()), ("-m", "incident_desk"))


def uvx_launcher(source: str) -> Launcher:
    """``uvx --offline --from <source> incident-desk``: a start never waits on the package index (uv's cache must
    hold it: one online run fills it). Absolute where possible: GUI clients do not inherit the shell's PATH."""
    if not source.strip():
        raise ClientConfigError("uvx source is empty: give a checkout path or a git URL")
    local = Path(source).expanduser()
    resolved_source = str(local.absolute()) if "://" not in source and local.exists() else source
    uvx = shutil.which("uvx")
    return Launcher(str(Path(uvx).absolute()) if uvx else "uvx", ("--offline", "--from", resolved_source, SERVER_NAME))


def _platform(platform: str) -> Platform:
    if platform.startswith("win") or platform == "cygwin":
        return "win32"
    return "darwin" if platform == "darwin" else "linux"


def client_spec(client: str) -> ClientSpec:
    """The registry entry for ``client``; an unknown name is answered with the list of known ones."""
    if client not in CLIENTS:
        raise ClientConfigError(f"unknown client {client!r}; choose one of: {', '.join(CLIENT_NAMES)}")
    return CLIENTS[client]


def _base_dir(base: str, platform: Platform) -> Path:
    home, codex_home, xdg = Path.home(), os.environ.get("CODEX_HOME"), os.environ.get("XDG_CONFIG_HOME", "")
    if base == "codex":
        return Path(codex_home).expanduser() if codex_home else home / ".codex"
    if base == "xdg":
        return Path(xdg) if Path(xdg).is_absolute() else home / ".config"
    if base == "appdata":
        appdata = os.environ.get("APPDATA") if platform == sys.platform else None
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    return home / "Library" / "Application Support" if base == "appsupport" else home


def default_config_path(client: str, platform: str = sys.platform) -> Path:
    """The client's user-level config file on ``platform`` (``linux``, ``darwin`` or ``win32``)."""
    plat = _platform(platform)
    base, rel = client_spec(client).locations[plat]
    return _base_dir(base, plat).joinpath(*rel.split("/"))


_DISPLAY_BASES: Mapping[Platform, Mapping[str, str]] = {
    "linux": {"home": "~", "codex": "~/.codex", "xdg": "~/.config"},
    "darwin": {"home": "~", "codex": "~/.codex", "appsupport": "~/Library/Application Support"},
    "win32": {"home": "%USERPROFILE%", "codex": "%USERPROFILE%\\.codex", "appdata": "%APPDATA%"},
}


def display_config_path(client: str, platform: str) -> str:
    """The config location as documentation writes it (``~/...``, ``%APPDATA%\\...``)."""
    plat = _platform(platform)
    base, rel = client_spec(client).locations[plat]
    prefix = _DISPLAY_BASES[plat][base]
    return prefix + "\\" + rel.replace("/", "\\") if plat == "win32" else f"{prefix}/{rel}"
