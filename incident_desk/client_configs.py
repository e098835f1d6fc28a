"""Desktop MCP client configuration: one registry of clients, ready snippets, and a merge that never destroys.

Twelve clients are described here (file format, wrapper key, per-OS config file, how they spell a stdio and a
Streamable HTTP entry, and which MCP features they give the desk). ``render_snippet`` prints a client's minimal
file with this machine's absolute paths; ``write_config`` merges the ``incident-desk`` entry into an existing
file, keeping every other server, key, comment and line as it was.

Merging is done by editing the text, not by re-serialising a parsed document: the file is parsed (JSON, JSON
with comments, TOML, or a plain block-style YAML subset), the entry's span is replaced or a new one inserted,
and the result is parsed again and compared with what was intended before anything is written. A file that is
broken, or written in a form this module does not edit safely, is left byte-for-byte untouched and reported
with a ``ClientConfigError`` naming the file and the problem. Writes are backup-first and atomic.

Only the standard library is used, and nothing here imports ``mcp``: printing a snippet stays instant.
Secrets never go into these files: HTTP entries reference a token through each client's own indirection
(``${env:...}``, VS Code ``inputs``, Codex ``bearer_token_env_var``...), and ``env`` refuses secret-looking names.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "CLIENTS",
    "CLIENT_NAMES",
    "DEFAULT_HTTP_URL",
    "PLACEHOLDER_CHECKOUT",
    "PLACEHOLDER_EXECUTABLE",
    "SERVER_NAME",
    "TOKEN_ENV_VAR",
    "ClientConfigError",
    "ClientSpec",
    "Launcher",
    "WriteReport",
    "default_config_path",
    "detect_launcher",
    "display_config_path",
    "example_files",
    "readme_table",
    "render_snippet",
    "uvx_launcher",
    "write_config",
    "write_examples",
]

SERVER_NAME = "incident-desk"
DEFAULT_HTTP_URL = "http://127.0.0.1:8765/mcp"
# The variable a *client* reads the desk's bearer token from (each client spells the reference its own way).
TOKEN_ENV_VAR = "INCIDENT_DESK_HTTP_TOKEN"  # noqa: S105 -- a variable name, not a secret
VSCODE_TOKEN_INPUT = "incident-desk-token"  # noqa: S105 -- a VS Code input id, not a secret
PLACEHOLDER_EXECUTABLE = "/ABSOLUTE/PATH/TO/incident-desk"
PLACEHOLDER_CHECKOUT = "/ABSOLUTE/PATH/TO/incident-desk-checkout"
_DESCRIPTION = "On-call incident desk: incidents, logs, runbooks; restarts need a human's approval."
_GOOSE_TIMEOUT_SECONDS = 300
_CODEX_UVX_STARTUP_TIMEOUT_SECONDS = 60  # a cold uvx start resolves and installs; Codex's default is 10 s
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|SEALING|CREDENTIAL|(^|_)KEY$", re.IGNORECASE)

Format = Literal["json", "yaml", "toml"]
Platform = Literal["linux", "darwin", "win32"]
Layout = Literal["map", "goose", "continue", "codex"]


class ClientConfigError(Exception):
    """A client config could not be rendered or written; the message names the file and the problem."""


@dataclass(frozen=True)
class Launcher:
    """How a client starts the desk over stdio: an absolute command plus its arguments."""

    command: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class WriteReport:
    """What ``write_config`` did: the file written, its backup (None if the file was new or unchanged), and
    whether an existing ``incident-desk`` entry was replaced rather than added."""

    path: Path
    backup: Path | None
    replaced: bool


@dataclass(frozen=True)
class ClientSpec:
    """One desktop client: where its config lives and how it spells an MCP server entry."""

    name: str
    title: str
    format: Format
    layout: Layout
    server_key: str
    example_stem: str  # client_configs/<name>/<stem>[.uvx|.http].<ext>
    locations: Mapping[Platform, tuple[str, str]]  # platform -> (base, path relative to base)
    features: str
    notes: str
    comments_allowed: bool = False  # JSON with comments and trailing commas (JSONC)
    http_supported: bool = True
    http_token: str | None = None  # how the HTTP entry references the bearer token, None: it cannot

    @property
    def extension(self) -> str:
        return {"json": "json", "yaml": "yaml", "toml": "toml"}[self.format]


def _everywhere(base: str, rel: str) -> dict[Platform, tuple[str, str]]:
    return {"linux": (base, rel), "darwin": (base, rel), "win32": (base, rel)}


def _app_config(rel: str) -> dict[Platform, tuple[str, str]]:
    """Electron-style per-user app config: ~/.config, ~/Library/Application Support, %APPDATA%."""
    return {"linux": ("xdg", rel), "darwin": ("appsupport", rel), "win32": ("appdata", rel)}


_CLINE_REL = "Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"

CLIENTS: Mapping[str, ClientSpec] = {
    spec.name: spec
    for spec in (
        ClientSpec(
            name="claude-desktop",
            title="Claude Desktop",
            format="json",
            layout="map",
            server_key="mcpServers",
            example_stem="claude_desktop_config",
            locations=_app_config("Claude/claude_desktop_config.json"),
            features="resources, prompts, tools; no sampling, no elicitation",
            notes=(
                "summarize_incident answers with the raw log (or the direct provider); restart_service refuses "
                "(no approval channel). Remote servers are added in Settings → Connectors, not in this file, so "
                "there is no HTTP file here. One-click install: `manifest.json` (.mcpb, binary). The official app "
                "ships for macOS and Windows; the Linux path is the MCP tutorial's."
            ),
            http_supported=False,
        ),
        ClientSpec(
            name="claude-code",
            title="Claude Code",
            format="json",
            layout="map",
            server_key="mcpServers",
            example_stem="mcp",
            locations=_everywhere("home", ".claude.json"),
            features="resources, prompts, tools, elicitation (declared unreliably); no sampling",
            notes=(
                "Save as `.mcp.json` at a repo root (project scope) or merge into `~/.claude.json` (user scope); "
                "`claude mcp add` does the same. HTTP reads the token from `${INCIDENT_DESK_HTTP_TOKEN}`."
            ),
            http_token="Bearer ${" + TOKEN_ENV_VAR + "}",
        ),
        ClientSpec(
            name="cursor",
            title="Cursor",
            format="json",
            layout="map",
            server_key="mcpServers",
            example_stem="mcp",
            locations=_everywhere("home", ".cursor/mcp.json"),
            features="prompts, tools, elicitation (form); no resources, no sampling",
            notes="Project scope: `.cursor/mcp.json`. HTTP reads the token from `${env:INCIDENT_DESK_HTTP_TOKEN}`.",
            http_token="Bearer ${env:" + TOKEN_ENV_VAR + "}",
        ),
        ClientSpec(
            name="vscode",
            title="VS Code (GitHub Copilot)",
            format="json",
            layout="map",
            server_key="servers",
            example_stem="mcp",
            locations=_app_config("Code/User/mcp.json"),
            features="resources, templates, prompts, tools, completions, sampling, elicitation (form and url)",
            notes=(
                "The one client that exercises every degrade step's happy path. Workspace scope: "
                "`.vscode/mcp.json`. HTTP asks for the token once through `inputs` (stored in VS Code's secret "
                "storage). Comments in the file are kept."
            ),
            comments_allowed=True,
            http_token="Bearer ${input:" + VSCODE_TOKEN_INPUT + "}",
        ),
        ClientSpec(
            name="windsurf",
            title="Windsurf",
            format="json",
            layout="map",
            server_key="mcpServers",
            example_stem="mcp_config",
            locations=_everywhere("home", ".codeium/windsurf/mcp_config.json"),
            features="tools only; no resources, prompts, sampling or elicitation",
            notes="HTTP uses `serverUrl` and reads the token from `${env:INCIDENT_DESK_HTTP_TOKEN}`. 100-tool limit.",
            http_token="Bearer ${env:" + TOKEN_ENV_VAR + "}",
        ),
        ClientSpec(
            name="zed",
            title="Zed",
            format="json",
            layout="map",
            server_key="context_servers",
            example_stem="settings",
            locations={
                "linux": ("xdg", "zed/settings.json"),
                "darwin": ("home", ".config/zed/settings.json"),
                "win32": ("appdata", "Zed/settings.json"),
            },
            features="prompts, tools; no resources, no sampling, no elicitation",
            notes=(
                "Merge into Zed's settings.json (`zed: open settings`); comments in it are kept. Zed has no "
                "secret indirection: use HTTP on loopback only (no token), or stdio."
            ),
            comments_allowed=True,
        ),
        ClientSpec(
            name="cline",
            title="Cline",
            format="json",
            layout="map",
            server_key="mcpServers",
            example_stem="cline_mcp_settings",
            locations=_app_config(_CLINE_REL),
            features="resources, tools; no prompts, no sampling, no elicitation",
            notes=(
                "Path is the VS Code extension's globalStorage (the Cline CLI uses "
                "`~/.cline/data/settings/cline_mcp_settings.json`). No documented secret indirection: HTTP on "
                "loopback only (no token), or stdio."
            ),
        ),
        ClientSpec(
            name="continue",
            title="Continue",
            format="yaml",
            layout="continue",
            server_key="mcpServers",
            example_stem="incident-desk",
            locations=_everywhere("home", ".continue/mcpServers/incident-desk.yaml"),
            features="resources, prompts, tools (agent mode only); no sampling, no elicitation",
            notes=(
                "A standalone block file for `.continue/mcpServers/` (workspace or `~/.continue`); the same "
                "`mcpServers` list can be merged into `config.yaml`. HTTP reads the token from "
                "`${{ secrets.INCIDENT_DESK_HTTP_TOKEN }}`."
            ),
            http_token="Bearer ${{ secrets." + TOKEN_ENV_VAR + " }}",
        ),
        ClientSpec(
            name="goose",
            title="Goose",
            format="yaml",
            layout="goose",
            server_key="extensions",
            example_stem="config",
            locations={
                "linux": ("xdg", "goose/config.yaml"),
                "darwin": ("home", ".config/goose/config.yaml"),
                "win32": ("appdata", "Block/goose/config/config.yaml"),
            },
            features="resources, prompts, tools, sampling, elicitation (per the MCP clients page; check at runtime)",
            notes=(
                "Merge under `extensions:`; goose writes this file itself, so comments are rare but kept. HTTP "
                "is `type: streamable_http` with `uri`; no header indirection: loopback only (no token), or stdio."
            ),
        ),
        ClientSpec(
            name="codex",
            title="OpenAI Codex",
            format="toml",
            layout="codex",
            server_key="mcp_servers",
            example_stem="config",
            locations=_everywhere("codex", "config.toml"),
            features="resources (with templates), tools, elicitation (form); no prompts, no sampling",
            notes=(
                "`[mcp_servers.incident-desk]` in `$CODEX_HOME/config.toml` (default `~/.codex`); comments are "
                "kept. HTTP sends `Authorization: Bearer $INCIDENT_DESK_HTTP_TOKEN` via `bearer_token_env_var`. "
                "The uvx "
                "form raises `startup_timeout_sec` for a cold start."
            ),
            http_token=TOKEN_ENV_VAR,
        ),
        ClientSpec(
            name="gemini-cli",
            title="Gemini CLI",
            format="json",
            layout="map",
            server_key="mcpServers",
            example_stem="settings",
            locations=_everywhere("home", ".gemini/settings.json"),
            features="prompts (as slash commands), tools; no resources, no sampling, no elicitation",
            notes=(
                "Project scope: `.gemini/settings.json`. HTTP uses `httpUrl` (plain `url` means SSE) and reads "
                "the token from `${INCIDENT_DESK_HTTP_TOKEN}`."
            ),
            http_token="Bearer ${" + TOKEN_ENV_VAR + "}",
        ),
        ClientSpec(
            name="lm-studio",
            title="LM Studio",
            format="json",
            layout="map",
            server_key="mcpServers",
            example_stem="mcp",
            locations=_everywhere("home", ".lmstudio/mcp.json"),
            features="tools only; no resources, prompts, sampling or elicitation",
            notes="Edit in-app: Program → Install → Edit mcp.json. No secret indirection: HTTP on loopback only.",
        ),
    )
}

CLIENT_NAMES: tuple[str, ...] = tuple(CLIENTS)


# ---------------------------------------------------------------------------------------------------------------
# Launchers and paths


def detect_launcher() -> Launcher:
    """How this installation starts: the frozen executable, else the installed ``incident-desk`` script (the
    one beside this interpreter first, then PATH), else ``python -m incident_desk`` with this interpreter.

    Paths are made absolute but symlinks are kept: resolving a venv's python would escape the venv.
    """
    if getattr(sys, "frozen", False):
        return Launcher(str(Path(sys.executable).absolute()))
    script_name = "incident-desk.exe" if sys.platform == "win32" else "incident-desk"
    beside = Path(sys.executable).absolute().parent / script_name
    if beside.is_file():
        return Launcher(str(beside))
    found = shutil.which("incident-desk")
    if found:
        return Launcher(str(Path(found).absolute()))
    return Launcher(str(Path(sys.executable).absolute()), ("-m", "incident_desk"))


def uvx_launcher(source: str) -> Launcher:
    """``uvx --from <source> incident-desk``; a local checkout becomes absolute, uvx too when it is on PATH
    (GUI clients do not inherit the shell's PATH)."""
    if not source.strip():
        raise ClientConfigError("uvx source is empty: give a checkout path or a git URL")
    local = Path(source).expanduser()
    resolved_source = str(local.absolute()) if "://" not in source and local.exists() else source
    uvx = shutil.which("uvx")
    return Launcher(str(Path(uvx).absolute()) if uvx else "uvx", ("--from", resolved_source, SERVER_NAME))


def _platform(platform: str) -> Platform:
    if platform.startswith("win") or platform == "cygwin":
        return "win32"
    if platform == "darwin":
        return "darwin"
    return "linux"


def _spec(client: str) -> ClientSpec:
    try:
        return CLIENTS[client]
    except KeyError:
        raise ClientConfigError(f"unknown client {client!r}; choose one of: {', '.join(CLIENT_NAMES)}") from None


def _base_dir(base: str, platform: Platform) -> Path:
    home = Path.home()
    if base == "home":
        return home
    if base == "codex":
        codex_home = os.environ.get("CODEX_HOME")
        return Path(codex_home).expanduser() if codex_home else home / ".codex"
    if base == "xdg":
        xdg = os.environ.get("XDG_CONFIG_HOME")
        return Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    if base == "appsupport":
        return home / "Library" / "Application Support"
    if base == "appdata":
        appdata = os.environ.get("APPDATA") if platform == sys.platform else None
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    raise AssertionError(base)  # pragma: no cover -- the registry only uses the bases above


def default_config_path(client: str, platform: str = sys.platform) -> Path:
    """The client's user-level config file on ``platform`` (``linux``, ``darwin`` or ``win32``)."""
    plat = _platform(platform)
    base, rel = _spec(client).locations[plat]
    return _base_dir(base, plat).joinpath(*rel.split("/"))


_DISPLAY_BASES: Mapping[Platform, Mapping[str, str]] = {
    "linux": {"home": "~", "codex": "~/.codex", "xdg": "~/.config"},
    "darwin": {"home": "~", "codex": "~/.codex", "appsupport": "~/Library/Application Support"},
    "win32": {"home": "%USERPROFILE%", "codex": "%USERPROFILE%\\.codex", "appdata": "%APPDATA%"},
}


def display_config_path(client: str, platform: str) -> str:
    """The config location as documentation writes it (``~/...``, ``%APPDATA%\\...``)."""
    plat = _platform(platform)
    base, rel = _spec(client).locations[plat]
    prefix = _DISPLAY_BASES[plat][base]
    return prefix + "\\" + rel.replace("/", "\\") if plat == "win32" else f"{prefix}/{rel}"


# ---------------------------------------------------------------------------------------------------------------
# Entries: how each client spells a stdio and an HTTP server


def _is_uvx(launcher: Launcher) -> bool:
    return Path(launcher.command).name.lower() in {"uvx", "uvx.exe"}


def _check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    if not env:
        return {}
    secret_like = sorted(name for name in env if _SECRET_NAME.search(name))
    if secret_like:
        raise ClientConfigError(
            f"refusing to put {', '.join(secret_like)} in a client config file: secrets belong in the OS "
            "keychain (`incident-desk key set`) or the environment, never in a file that gets copied and shared"
        )
    return {str(k): str(v) for k, v in env.items()}


def _check_url(http_url: str) -> str:
    if not re.match(r"^https?://[^\s/]+", http_url):
        raise ClientConfigError(f"HTTP URL {http_url!r} is not an http:// or https:// URL")
    return http_url


def _stdio_entry(spec: ClientSpec, launcher: Launcher, env: dict[str, str]) -> dict[str, Any]:
    command, args = launcher.command, list(launcher.args)
    match spec.name:
        case "goose":
            return {
                "name": SERVER_NAME,
                "type": "stdio",
                "enabled": True,
                "cmd": command,
                "args": args,
                "envs": env,
                "timeout": _GOOSE_TIMEOUT_SECONDS,
                "description": _DESCRIPTION,
            }
        case "continue":
            entry: dict[str, Any] = {"name": SERVER_NAME, "type": "stdio", "command": command, "args": args}
        case "claude-code" | "vscode":
            entry = {"type": "stdio", "command": command, "args": args}
        case "cline":
            entry = {"command": command, "args": args, "disabled": False}
        case "zed":
            return {"command": command, "args": args, "env": env}
        case _:
            entry = {"command": command, "args": args}
    if env:
        entry["env"] = env
    if spec.name == "codex" and _is_uvx(launcher):
        entry["startup_timeout_sec"] = _CODEX_UVX_STARTUP_TIMEOUT_SECONDS
    return entry


def _http_entry(spec: ClientSpec, url: str) -> dict[str, Any]:
    auth = {"Authorization": spec.http_token} if spec.http_token else None
    match spec.name:
        case "claude-code" | "vscode":
            return {"type": "http", "url": url, "headers": auth}
        case "windsurf":
            return {"serverUrl": url, "headers": auth}
        case "gemini-cli":
            return {"httpUrl": url, "headers": auth}
        case "cline":
            return {"type": "streamableHttp", "url": url, "disabled": False}
        case "continue":
            return {
                "name": SERVER_NAME,
                "type": "streamable-http",
                "url": url,
                "requestOptions": {"headers": auth},
            }
        case "goose":
            return {
                "name": SERVER_NAME,
                "type": "streamable_http",
                "enabled": True,
                "uri": url,
                "timeout": _GOOSE_TIMEOUT_SECONDS,
                "description": _DESCRIPTION,
            }
        case "codex":
            return {"url": url, "bearer_token_env_var": TOKEN_ENV_VAR}
        case "cursor":
            return {"url": url, "headers": auth}
        case _:  # zed, lm-studio: url (+ headers, which they cannot fill from the environment)
            return {"url": url}


def _entry(
    spec: ClientSpec, launcher: Launcher | None, http_url: str | None, env: Mapping[str, str] | None
) -> dict[str, Any]:
    checked_env = _check_env(env)
    if http_url is not None:
        if not spec.http_supported:
            raise ClientConfigError(
                f"{spec.title} does not take HTTP servers in its config file: add {_check_url(http_url)} in "
                "Settings → Connectors → Add custom connector, or use the stdio entry"
            )
        return _http_entry(spec, _check_url(http_url))
    return _stdio_entry(spec, launcher or detect_launcher(), checked_env)


def _vscode_input() -> dict[str, Any]:
    return {
        "type": "promptString",
        "id": VSCODE_TOKEN_INPUT,
        "description": "incident-desk bearer token (kept in VS Code's secret storage)",
        "password": True,
    }


def _document(spec: ClientSpec, entry: dict[str, Any], http: bool) -> dict[str, Any]:
    """The whole minimal file for ``spec`` holding just ``entry``."""
    if spec.layout == "continue":
        return {"name": SERVER_NAME, "version": "0.0.1", "schema": "v1", "mcpServers": [entry]}
    doc: dict[str, Any] = {spec.server_key: {SERVER_NAME: entry}}
    if spec.name == "vscode" and http:
        doc = {"inputs": [_vscode_input()], **doc}
    return doc


def render_snippet(
    client: str,
    launcher: Launcher | None = None,
    *,
    http_url: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """The text of a minimal config file for ``client`` that runs the desk.

    stdio by default, with ``launcher`` (default: ``detect_launcher()``); ``http_url`` switches to the client's
    Streamable HTTP form instead. ``env`` adds non-secret settings (e.g. ``INCIDENT_DESK_DATA_DIR``).
    """
    spec = _spec(client)
    entry = _entry(spec, launcher, http_url, env)
    doc = _document(spec, entry, http_url is not None)
    if spec.format == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if spec.format == "toml":
        return _toml_table(spec, entry)
    return "\n".join(_yaml_block(doc, 0)) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Emitters (TOML and YAML for the few shapes above; JSON comes from the json module)


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string literal is a valid TOML basic string


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_toml_string(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _toml_table(spec: ClientSpec, entry: Mapping[str, Any]) -> str:
    lines = [f"[{spec.server_key}.{SERVER_NAME}]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


_YAML_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/]*$")
_YAML_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if _YAML_PLAIN.match(text) and text.lower() not in _YAML_RESERVED:
        return text
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def _yaml_flow(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_yaml_scalar(k)}: {_yaml_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_yaml_flow(v) for v in value) + "]"
    return _yaml_scalar(value)


def _yaml_block(mapping: Mapping[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for key, value in mapping.items():
        name = _yaml_scalar(key)
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{name}:")
            lines += _yaml_block(value, indent + 2)
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            lines.append(f"{pad}{name}:")
            for item in value:
                lines += _yaml_seq_item(item, indent + 2)
        else:
            lines.append(f"{pad}{name}: {_yaml_flow(value)}")
    return lines


def _yaml_seq_item(mapping: Mapping[str, Any], indent: int) -> list[str]:
    body = _yaml_block(mapping, indent + 2)
    return [" " * indent + "- " + body[0].lstrip(), *body[1:]]


# ---------------------------------------------------------------------------------------------------------------
# Example files shipped in client_configs/


def _example_launchers() -> dict[str, Launcher]:
    return {
        "": Launcher(PLACEHOLDER_EXECUTABLE),
        ".uvx": Launcher("uvx", ("--from", PLACEHOLDER_CHECKOUT, SERVER_NAME)),
    }


def example_files() -> dict[str, str]:
    """The files under ``client_configs/``: relative path -> text. Tests keep the tree equal to this."""
    files: dict[str, str] = {}
    for spec in CLIENTS.values():
        for suffix, launcher in _example_launchers().items():
            files[f"{spec.name}/{spec.example_stem}{suffix}.{spec.extension}"] = render_snippet(spec.name, launcher)
        if spec.http_supported:
            files[f"{spec.name}/{spec.example_stem}.http.{spec.extension}"] = render_snippet(
                spec.name, http_url=DEFAULT_HTTP_URL
            )
    return files


def write_examples(root: Path) -> list[Path]:
    """Regenerate the example files under ``root`` (``client_configs/``); the README and manifest are kept."""
    written = []
    for rel, text in example_files().items():
        target = root.joinpath(*rel.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="\n")
        written.append(target)
    return written


def readme_table() -> str:
    """The Markdown table of client_configs/README.md."""
    rows = [
        "| client | files | Linux | macOS | Windows | what the desk gets | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in CLIENTS.values():
        stem, ext = spec.example_stem, spec.extension
        kinds = [f"`{stem}.{ext}`", f"`{stem}.uvx.{ext}`"]
        if spec.http_supported:
            kinds.append(f"`{stem}.http.{ext}`")
        if spec.name == "claude-desktop":
            kinds.append("`manifest.json`")
        where = [f"`{display_config_path(spec.name, plat)}`" for plat in ("linux", "darwin", "win32")]
        rows.append(
            f"| {spec.title} (`{spec.name}`) | {'<br>'.join(kinds)} | {' | '.join(where)} "
            f"| {spec.features} | {spec.notes} |"
        )
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# JSON / JSONC: a parser that records spans, so edits touch only the entry's text


class _ParseError(Exception):
    def __init__(self, message: str, text: str = "", pos: int = 0) -> None:
        if text:
            line = text.count("\n", 0, pos) + 1
            col = pos - (text.rfind("\n", 0, pos) + 1) + 1
            message = f"{message} (line {line}, column {col})"
        super().__init__(message)


class _Unsupported(Exception):
    """Valid, but written in a form this module does not edit safely."""


@dataclass
class _JNode:
    kind: Literal["object", "array", "scalar"]
    start: int
    end: int
    value: Any
    # objects: (key, key_start, value node); arrays: ("", item_start, item node)
    children: list[tuple[str, int, _JNode]] = field(default_factory=list)

    def member(self, key: str) -> _JNode | None:
        found = [node for name, _, node in self.children if name == key]
        if len(found) > 1:
            raise _Unsupported(f"the key {key!r} appears {len(found)} times")
        return found[0] if found else None


_JSON_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


class _JsonParser:
    def __init__(self, text: str, *, comments: bool) -> None:
        self.text = text
        self.comments = comments

    def parse(self) -> _JNode | None:
        pos = self._ws(0)
        if pos == len(self.text):
            return None
        node = self._value(pos)
        end = self._ws(node.end)
        if end != len(self.text):
            raise _ParseError("unexpected text after the top-level value", self.text, end)
        return node

    def _ws(self, pos: int) -> int:
        text = self.text
        while pos < len(text):
            char = text[pos]
            if char in " \t\r\n":
                pos += 1
            elif char == "/" and text.startswith(("//", "/*"), pos):
                if not self.comments:
                    raise _ParseError("comments are not allowed in this file (strict JSON)", text, pos)
                if text.startswith("//", pos):
                    newline = text.find("\n", pos)
                    pos = len(text) if newline < 0 else newline
                else:
                    close = text.find("*/", pos + 2)
                    if close < 0:
                        raise _ParseError("unterminated /* comment", text, pos)
                    pos = close + 2
            else:
                break
        return pos

    def _value(self, pos: int) -> _JNode:
        text = self.text
        if pos >= len(text):
            raise _ParseError("unexpected end of file", text, pos)
        char = text[pos]
        if char == "{":
            return self._container(pos, "object")
        if char == "[":
            return self._container(pos, "array")
        if char == '"':
            value, end = self._string(pos)
            return _JNode("scalar", pos, end, value)
        for literal, literal_value in (("true", True), ("false", False), ("null", None)):
            if text.startswith(literal, pos):
                return _JNode("scalar", pos, pos + len(literal), literal_value)
        match = _JSON_NUMBER.match(text, pos)
        if match and match.end() > pos:
            number = match.group()
            parsed: Any = float(number) if any(c in number for c in ".eE") else int(number)
            return _JNode("scalar", pos, match.end(), parsed)
        raise _ParseError(f"unexpected character {char!r}", text, pos)

    def _string(self, pos: int) -> tuple[str, int]:
        match = _JSON_STRING.match(self.text, pos)
        if match is None:
            raise _ParseError("bad string (unterminated, a raw control character or a bad escape)", self.text, pos)
        return str(json.loads(match.group())), match.end()

    def _container(self, pos: int, kind: Literal["object", "array"]) -> _JNode:
        text = self.text
        close = "}" if kind == "object" else "]"
        node = _JNode(kind, pos, pos, {} if kind == "object" else [])
        pos = self._ws(pos + 1)
        expect_item = True
        while True:
            if pos >= len(text):
                raise _ParseError(f"unterminated {kind}", text, node.start)
            if text[pos] == close:
                if expect_item and node.children and not self.comments:
                    raise _ParseError("trailing comma", text, pos)
                node.end = pos + 1
                return node
            if not expect_item:
                raise _ParseError(f"expected ',' or '{close}'", text, pos)
            start = pos
            key = ""
            if kind == "object":
                if text[pos] != '"':
                    raise _ParseError("expected a quoted key", text, pos)
                key, pos = self._string(pos)
                pos = self._ws(pos)
                if pos >= len(text) or text[pos] != ":":
                    raise _ParseError("expected ':' after the key", text, pos)
                pos = self._ws(pos + 1)
            child = self._value(pos)
            node.children.append((key, start, child))
            if kind == "object":
                node.value[key] = child.value
            else:
                node.value.append(child.value)
            pos = self._ws(child.end)
            expect_item = pos < len(text) and text[pos] == ","
            if expect_item:
                pos = self._ws(pos + 1)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _leading_ws(text: str, pos: int) -> str:
    start = _line_start(text, pos)
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def _indent_unit(text: str) -> str:
    for line in text.split("\n"):
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            ws = line[: len(line) - len(stripped)]
            return "\t" if ws.startswith("\t") else ws
    return "  "


def _child_indent(text: str, node: _JNode, unit: str) -> str:
    if node.children:
        start = node.children[0][1]
        prefix = text[_line_start(text, start) : start]
        if not prefix.strip():
            return prefix
    return _leading_ws(text, node.start) + unit


def _dump_json(value: Any, indent: str, unit: str) -> str:
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _json_insert(text: str, node: _JNode, key: str | None, value: Any, unit: str) -> str:
    """Insert ``"key": value`` (object) or ``value`` (array) as the last child of ``node``."""
    indent = _child_indent(text, node, unit)
    # A compact container stays compact: {"a": 1} -> {"a": 1, "incident-desk": {...}}
    one_line = "\n" not in text[node.start : node.end] and bool(node.children)
    piece = json.dumps(value, ensure_ascii=False) if one_line else _dump_json(value, indent, unit)
    if key is not None:
        piece = json.dumps(key, ensure_ascii=False) + ": " + piece
    if not node.children:
        inner = text[node.start + 1 : node.end - 1]
        if inner.strip():  # only comments inside: put the entry first
            return text[: node.start + 1] + "\n" + indent + piece + text[node.start + 1 :]
        closing = "\n" + _leading_ws(text, node.start)
        return text[: node.start + 1] + "\n" + indent + piece + closing + text[node.end - 1 :]
    last_end = node.children[-1][2].end
    pos = last_end
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    trailing_comma = pos < len(text) and text[pos] == ","
    if trailing_comma:
        pos += 1
        while pos < len(text) and text[pos] in " \t":
            pos += 1
    if text.startswith("//", pos):
        newline = text.find("\n", pos)
        pos = len(text) if newline < 0 else newline
    if pos < len(text) and text[pos] == "\n":
        if trailing_comma:
            return text[:pos] + "\n" + indent + piece + "," + text[pos:]
        return text[:last_end] + "," + text[last_end:pos] + "\n" + indent + piece + text[pos:]
    if trailing_comma:
        return text[:pos] + " " + piece + "," + text[pos:]
    return text[:last_end] + ", " + piece + text[last_end:]


def _json_replace(text: str, key_start: int, node: _JNode, value: Any, unit: str) -> str:
    indent = _leading_ws(text, key_start)
    return text[: node.start] + _dump_json(value, indent, unit) + text[node.end :]


def _merge_json(spec: ClientSpec, text: str, entry: dict[str, Any], http: bool) -> tuple[str, bool, Any]:
    """(new text, replaced, expected value) for a JSON/JSONC client file."""
    if not spec.comments_allowed and text.strip():
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise _ParseError(f"not valid JSON: {exc.msg}", text, exc.pos) from None
    root = _JsonParser(text, comments=spec.comments_allowed).parse()
    if root is None:
        doc = _document(spec, entry, http)
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n", False, doc
    if root.kind != "object":
        raise _ParseError("the top level is not a JSON object")
    unit = _indent_unit(text)
    expected = copy.deepcopy(root.value)
    servers = root.member(spec.server_key)
    replaced = False
    if servers is None:
        text = _json_insert(text, root, spec.server_key, {SERVER_NAME: entry}, unit)
        expected[spec.server_key] = {SERVER_NAME: entry}
    elif servers.kind != "object":
        raise _ParseError(f"{spec.server_key!r} is not an object (it is {_json_kind(servers.value)})")
    else:
        existing = [(start, node) for name, start, node in servers.children if name == SERVER_NAME]
        if len(existing) > 1:
            raise _Unsupported(f"{spec.server_key}.{SERVER_NAME} appears {len(existing)} times")
        if existing:
            text = _json_replace(text, existing[0][0], existing[0][1], entry, unit)
            replaced = True
        else:
            text = _json_insert(text, servers, SERVER_NAME, entry, unit)
        expected[spec.server_key][SERVER_NAME] = entry
    if spec.name == "vscode" and http:
        text, expected = _merge_vscode_input(spec, text, expected, unit)
    return text, replaced, expected


def _merge_vscode_input(spec: ClientSpec, text: str, expected: Any, unit: str) -> tuple[str, Any]:
    root = _JsonParser(text, comments=spec.comments_allowed).parse()
    if root is None:
        raise _Unsupported("the file became empty while merging")
    inputs = root.member("inputs")
    wanted = _vscode_input()
    if inputs is None:
        text = _json_insert(text, root, "inputs", [wanted], unit)
        expected["inputs"] = [wanted]
    elif inputs.kind != "array":
        raise _ParseError(f"'inputs' is not an array (it is {_json_kind(inputs.value)})")
    elif not any(isinstance(item, dict) and item.get("id") == VSCODE_TOKEN_INPUT for item in inputs.value):
        text = _json_insert(text, inputs, None, wanted, unit)
        expected["inputs"].append(wanted)
    return text, expected


def _json_kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "a value")


# ---------------------------------------------------------------------------------------------------------------
# TOML (Codex): tomllib validates; the entry's table is edited as text and the result checked with tomllib

_TOML_HEADER = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]#]*?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY_PART = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([A-Za-z0-9_-]+))\s*')


def _toml_key_path(raw: str) -> tuple[str, ...] | None:
    parts: list[str] = []
    pos = 0
    while pos <= len(raw):
        match = _TOML_KEY_PART.match(raw, pos)
        if not match or match.end() == pos:
            return None
        dq, sq, bare = match.groups()
        if dq is not None:
            try:
                parts.append(json.loads(f'"{dq}"'))
            except ValueError:
                return None
        else:
            parts.append(sq if sq is not None else bare)
        pos = match.end()
        if pos == len(raw):
            return tuple(parts)
        if raw[pos] != ".":
            return None
        pos += 1
    return None


def _merge_toml(spec: ClientSpec, text: str, entry: dict[str, Any]) -> tuple[str, bool, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _ParseError(f"not valid TOML: {exc}") from None
    servers = data.get(spec.server_key)
    if servers is not None and not isinstance(servers, dict):
        raise _ParseError(f"{spec.server_key!r} is not a table (it is {type(servers).__name__})")
    lines = text.split("\n")
    headers = [(i, _toml_key_path(m.group("name"))) for i, line in enumerate(lines) if (m := _TOML_HEADER.match(line))]
    ours = [
        i for i, path in headers if path is not None and len(path) >= 2 and path[:2] == (spec.server_key, SERVER_NAME)
    ]
    blocks: list[tuple[int, int]] = []
    for i in ours:
        following = [j for j, _ in headers if j > i]
        end = following[0] if following else len(lines)
        if end in ours:  # our own sub-table follows: one contiguous block, blank lines and all
            blocks.append((i, end))
            continue
        while end - 1 > i and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        blocks.append((i, end))
    replaced = bool(servers and SERVER_NAME in servers)
    if replaced and not blocks:
        raise _Unsupported(
            f"{spec.server_key}.{SERVER_NAME} is written as an inline table or dotted keys; "
            f"remove it, or edit it by hand"
        )
    new_block = _toml_table(spec, entry).rstrip("\n").split("\n")
    if blocks:
        insert_at = blocks[0][0]
        for start, end in sorted(blocks, reverse=True):
            del lines[start:end]
        lines[insert_at:insert_at] = new_block
    else:
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ["", *new_block] if lines else new_block
        lines.append("")
    expected = copy.deepcopy(data)
    expected.setdefault(spec.server_key, {})[SERVER_NAME] = entry
    return "\n".join(lines), replaced, expected


# ---------------------------------------------------------------------------------------------------------------
# YAML (Goose, Continue): a strict parser for plain block-style YAML. Anchors, tags, block scalars, multi-line
# scalars and multiple documents are refused rather than guessed at.


@dataclass
class _YLine:
    index: int  # line number in the file (0-based)
    indent: int
    text: str  # content without indentation and comment


@dataclass
class _YNode:
    kind: Literal["map", "seq", "scalar", "flow"]
    value: Any
    first: int  # first line (key line for a mapping value written inline)
    last: int  # last content line
    indent: int = 0
    keys: dict[str, tuple[int, _YNode]] = field(default_factory=dict)  # map: key -> (key line, node)
    items: list[_YNode] = field(default_factory=list)  # seq: item nodes, .first is the dash line


_YAML_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_YAML_TRUE = frozenset({"true", "True", "TRUE"})
_YAML_FALSE = frozenset({"false", "False", "FALSE"})
_YAML_INT = re.compile(r"^[-+]?(?:[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_YAML_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_YAML_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
    "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip


def _yaml_plain(text: str) -> Any:
    if text in _YAML_NULL:
        return None
    if text in _YAML_TRUE:
        return True
    if text in _YAML_FALSE:
        return False
    if _YAML_INT.match(text):
        return int(text, 0) if text.lstrip("+-").startswith(("0o", "0x")) else int(text)
    if _YAML_FLOAT.match(text):
        return float(text)
    if text.lower() in {".inf", "+.inf", "-.inf", ".nan"}:
        return float(text.replace(".", "", 1))
    if text[0] in "&*!|>%@`" or text.startswith(("- ", "? ", ": ")) or ": " in text or text.endswith(":"):
        raise _Unsupported(f"YAML feature or ambiguous scalar {text!r}")
    return text


class _YamlParser:
    def __init__(self, text: str) -> None:
        self.lines = self._content_lines(text)
        self.pos = 0

    @staticmethod
    def _strip_comment(line: str) -> str:
        quote = ""
        prev = " "
        i = 0
        while i < len(line):
            char = line[i]
            if quote:
                if quote == "'" and char == "'" and line[i + 1 : i + 2] == "'":
                    i += 2
                    continue
                if quote == '"' and char == "\\":
                    i += 2
                    continue
                if char == quote:
                    quote = ""
            elif char in "\"'" and (prev in " :-[{," or i == 0):
                quote = char
            elif char == "#" and prev in " \t":
                return line[:i].rstrip()
            prev = char
            i += 1
        return line.rstrip()

    def _content_lines(self, text: str) -> list[_YLine]:
        out: list[_YLine] = []
        seen_document_start = False
        for index, raw in enumerate(text.split("\n")):
            stripped_raw = raw.lstrip(" ")
            if stripped_raw.startswith("\t") and stripped_raw.strip():
                raise _ParseError(f"tab used for indentation on line {index + 1}")
            body = self._strip_comment(raw)
            if not body.strip():
                continue
            if body.startswith("%"):
                raise _Unsupported(f"YAML directive on line {index + 1}")
            if body.rstrip() in {"---", "..."} or body.startswith("--- "):
                if body.rstrip() == "---" and not out and not seen_document_start:
                    seen_document_start = True
                    continue
                raise _Unsupported(f"multiple YAML documents or document markers (line {index + 1})")
            indent = len(body) - len(body.lstrip(" "))
            out.append(_YLine(index, indent, body.strip()))
        return out

    def parse(self) -> _YNode | None:
        if not self.lines:
            return None
        node = self._block(self.lines[0].indent)
        if self.pos != len(self.lines):
            line = self.lines[self.pos]
            raise _ParseError(f"unexpected indentation on line {line.index + 1}")
        return node

    def _block(self, indent: int) -> _YNode:
        line = self.lines[self.pos]
        if line.text == "-" or line.text.startswith("- "):
            return self._seq(indent)
        if _split_key(line.text) is not None:
            return self._map(indent)
        self.pos += 1
        value, kind = _yaml_inline(line.text, line.index)
        return _YNode(kind, value, line.index, line.index, indent)

    def _nested(self, parent_indent: int, owner: _YLine, allow_same_indent_seq: bool) -> _YNode:
        """The value after ``key:`` or ``-`` with nothing on that line."""
        if self.pos < len(self.lines):
            nxt = self.lines[self.pos]
            if nxt.indent > parent_indent:
                return self._block(nxt.indent)
            if allow_same_indent_seq and nxt.indent == parent_indent and (nxt.text == "-" or nxt.text.startswith("- ")):
                return self._seq(parent_indent)
        return _YNode("scalar", None, owner.index, owner.index, parent_indent)

    def _map(self, indent: int) -> _YNode:
        first = self.lines[self.pos]
        node = _YNode("map", {}, first.index, first.index, indent)
        while self.pos < len(self.lines) and self.lines[self.pos].indent == indent:
            line = self.lines[self.pos]
            split = _split_key(line.text)
            if split is None:
                raise _ParseError(f"expected 'key: value' on line {line.index + 1}")
            key, rest = split
            if key in node.keys:
                raise _ParseError(f"duplicate key {key!r} on line {line.index + 1}")
            self.pos += 1
            if rest:
                value, kind = _yaml_inline(rest, line.index)
                child = _YNode(kind, value, line.index, line.index, indent)
                if self.pos < len(self.lines) and self.lines[self.pos].indent > indent:
                    raise _Unsupported(f"multi-line value after line {line.index + 1}")
            else:
                child = self._nested(indent, line, allow_same_indent_seq=True)
            node.keys[key] = (line.index, child)
            node.value[key] = child.value
            node.last = max(line.index, child.last)
        if self.pos < len(self.lines) and self.lines[self.pos].indent > indent:
            raise _ParseError(f"unexpected indentation on line {self.lines[self.pos].index + 1}")
        return node

    def _seq(self, indent: int) -> _YNode:
        first = self.lines[self.pos]
        node = _YNode("seq", [], first.index, first.index, indent)
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.indent != indent or not (line.text == "-" or line.text.startswith("- ")):
                break
            rest = line.text[1:].lstrip(" ")
            if not rest:
                self.pos += 1
                child = self._nested(indent, line, allow_same_indent_seq=False)
            elif rest == "-" or rest.startswith("- "):
                raise _Unsupported(f"nested sequence on one line (line {line.index + 1})")
            elif _split_key(rest) is not None:
                column = indent + len(line.text) - len(rest)
                self.lines[self.pos] = _YLine(line.index, column, rest)
                child = self._map(column)
            else:
                self.pos += 1
                value, kind = _yaml_inline(rest, line.index)
                child = _YNode(kind, value, line.index, line.index, indent)
                if self.pos < len(self.lines) and self.lines[self.pos].indent > indent:
                    raise _Unsupported(f"multi-line value after line {line.index + 1}")
            child.first = line.index
            node.items.append(child)
            node.value.append(child.value)
            node.last = max(line.index, child.last)
        return node


def _split_key(text: str) -> tuple[str, str] | None:
    """``key: rest`` -> (key, rest) for a block mapping line, else None."""
    if text.startswith("? "):
        raise _Unsupported("complex mapping keys ('? ')")
    if text[:1] in "\"'":
        try:
            key, end = _yaml_quoted(text, 0)
        except _ParseError:
            return None
        rest = text[end:].lstrip(" ")
        if rest == ":" or rest.startswith(": "):
            return key, rest[1:].strip()
        return None
    if text[:1] in "[{":
        return None
    for match in re.finditer(r":(?: |$)", text):
        key = text[: match.start()].rstrip()
        if key and not key.startswith(("- ", "-\t")) and key != "-":
            parsed = _yaml_plain(key)
            return str(parsed) if not isinstance(parsed, str) else parsed, text[match.end() :].strip()
        return None
    return None


def _yaml_quoted(text: str, pos: int) -> tuple[str, int]:
    quote = text[pos]
    out: list[str] = []
    i = pos + 1
    while i < len(text):
        char = text[i]
        if quote == "'" and char == "'":
            if text[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), i + 1
        if quote == '"' and char == '"':
            return "".join(out), i + 1
        if quote == '"' and char == "\\":
            code = text[i + 1 : i + 2]
            if code in _YAML_ESCAPES:
                out.append(_YAML_ESCAPES[code])
                i += 2
                continue
            width = {"x": 2, "u": 4, "U": 8}.get(code)
            digits = text[i + 2 : i + 2 + width] if width else ""
            if not width or len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise _ParseError(f"bad escape '\\{code}' in a double-quoted string")
            out.append(chr(int(digits, 16)))
            i += 2 + width
            continue
        out.append(char)
        i += 1
    raise _Unsupported("a quoted string that continues on the next line")


def _yaml_inline(text: str, line_index: int) -> tuple[Any, Literal["scalar", "flow"]]:
    where = f" on line {line_index + 1}"
    if text[0] in "[{":
        value, end = _yaml_flow_value(text, 0, where)
        if text[end:].strip():
            raise _ParseError(f"unexpected text after a flow collection{where}")
        return value, "flow"
    if text[0] in "\"'":
        value, end = _yaml_quoted(text, 0)
        if text[end:].strip():
            raise _ParseError(f"unexpected text after a quoted string{where}")
        return value, "scalar"
    if text[0] in "|>":
        raise _Unsupported(f"block scalar ('{text[0]}'){where}")
    try:
        return _yaml_plain(text), "scalar"
    except _Unsupported as exc:
        raise _Unsupported(f"{exc}{where}") from None


def _yaml_flow_value(text: str, pos: int, where: str) -> tuple[Any, int]:
    while pos < len(text) and text[pos] == " ":
        pos += 1
    if pos >= len(text):
        raise _Unsupported(f"a flow collection that continues on the next line{where}")
    char = text[pos]
    if char in "[{":
        close = "]" if char == "[" else "}"
        result: Any = [] if char == "[" else {}
        pos += 1
        while True:
            while pos < len(text) and text[pos] == " ":
                pos += 1
            if pos >= len(text):
                raise _Unsupported(f"a flow collection that continues on the next line{where}")
            if text[pos] == close:
                return result, pos + 1
            if char == "[":
                item, pos = _yaml_flow_value(text, pos, where)
                result.append(item)
            else:
                key, pos = _yaml_flow_value(text, pos, where)
                while pos < len(text) and text[pos] == " ":
                    pos += 1
                if pos < len(text) and text[pos] == ":":
                    item, pos = _yaml_flow_value(text, pos + 1, where)
                else:
                    item = None
                result[str(key) if not isinstance(key, str) else key] = item
            while pos < len(text) and text[pos] == " ":
                pos += 1
            if pos < len(text) and text[pos] == ",":
                pos += 1
            elif pos < len(text) and text[pos] != close:
                raise _ParseError(f"expected ',' or '{close}' in a flow collection{where}")
    if char in "\"'":
        return _yaml_quoted(text, pos)
    match = _YAML_FLOW_PLAIN.match(text, pos)
    if match is None:
        raise _ParseError(f"bad flow scalar{where}")
    return _yaml_plain(match.group().strip()), match.end()


_YAML_FLOW_PLAIN = re.compile(r"[^,\[\]{}]*?(?=\s*(?:[,\[\]{}]|:(?:\s|$)|$))")


def _yaml_parse(text: str) -> _YNode | None:
    return _YamlParser(text).parse()


def _merge_yaml(spec: ClientSpec, text: str, entry: dict[str, Any]) -> tuple[str, bool, Any]:
    root = _yaml_parse(text)
    if root is None or (root.kind == "scalar" and root.value is None):
        doc = _document(spec, entry, http=False)
        lead = text.rstrip("\n") + "\n" if text.strip() else ""
        return lead + "\n".join(_yaml_block(doc, 0)) + "\n", False, doc
    if root.kind != "map":
        raise _ParseError("the top level is not a YAML mapping")
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    key = spec.server_key
    expected = copy.deepcopy(root.value)
    child_indent = root.indent + 2
    found = root.keys.get(key)
    if spec.layout == "goose":
        block = [" " * child_indent + f"{SERVER_NAME}:", *_yaml_block(entry, child_indent + 2)]
    else:
        block = _yaml_seq_item(entry, child_indent)
    replaced = False
    if found is None:
        lines += [" " * root.indent + f"{key}:", *block]
        expected[key] = {SERVER_NAME: entry} if spec.layout == "goose" else [entry]
    else:
        key_line, node = found
        empty = node.value is None or (node.kind == "flow" and node.value in ({}, []))
        if empty:
            lines[key_line : node.last + 1] = [" " * root.indent + f"{key}:", *block]
            expected[key] = {SERVER_NAME: entry} if spec.layout == "goose" else [entry]
        elif spec.layout == "goose":
            if node.kind != "map":
                raise _ParseError(f"{key!r} is not a mapping")
            current = node.keys.get(SERVER_NAME)
            block = [" " * node.indent + f"{SERVER_NAME}:", *_yaml_block(entry, node.indent + 2)]
            if current is not None:
                lines[current[0] : current[1].last + 1] = block
                replaced = True
            else:
                lines[node.last + 1 : node.last + 1] = block
            expected[key][SERVER_NAME] = entry
        else:
            if node.kind != "seq":
                raise _ParseError(f"{key!r} is not a list")
            matches = [
                (i, item) for i, item in enumerate(node.items) if isinstance(item.value, dict)
                and item.value.get("name") == SERVER_NAME
            ]  # fmt: skip
            if len(matches) > 1:
                raise _Unsupported(f"{len(matches)} entries named {SERVER_NAME!r} under {key!r}")
            block = _yaml_seq_item(entry, node.indent)
            if matches:
                index, item = matches[0]
                lines[item.first : item.last + 1] = block
                expected[key][index] = entry
                replaced = True
            else:
                lines[node.last + 1 : node.last + 1] = block
                expected[key].append(entry)
    return "\n".join(lines) + "\n", replaced, expected


# ---------------------------------------------------------------------------------------------------------------
# Writing


def _parse_for_check(spec: ClientSpec, text: str) -> Any:
    if spec.format == "json":
        node = _JsonParser(text, comments=spec.comments_allowed).parse()
        if not spec.comments_allowed:
            json.loads(text)
        return node.value if node else None
    if spec.format == "toml":
        return tomllib.loads(text)
    node_y = _yaml_parse(text)
    return node_y.value if node_y else None


def _merge(spec: ClientSpec, text: str, entry: dict[str, Any], http: bool) -> tuple[str, bool]:
    if spec.format == "json":
        new_text, replaced, expected = _merge_json(spec, text, entry, http)
    elif spec.format == "toml":
        new_text, replaced, expected = _merge_toml(spec, text, entry)
    else:
        new_text, replaced, expected = _merge_yaml(spec, text, entry)
    try:
        result = _parse_for_check(spec, new_text)
    except (_ParseError, _Unsupported, ValueError) as exc:
        raise _Unsupported(f"the merged text would not parse ({exc})") from None
    if result != expected:
        raise _Unsupported("the merged text does not read back as intended")
    return new_text, replaced


def _backup_path(path: Path) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    counter = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{counter}")
        counter += 1
    return candidate


def _atomic_write(path: Path, data: bytes, mode: int | None) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            tmp.chmod(mode)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_config(
    client: str,
    launcher: Launcher | None = None,
    *,
    path: Path | None = None,
    http_url: str | None = None,
    env: Mapping[str, str] | None = None,
) -> WriteReport:
    """Merge the ``incident-desk`` entry into ``client``'s config file (default: ``default_config_path``).

    Every other server, key, comment and line is kept. The old file is copied to ``<file>.bak-<timestamp>``
    first and the new one replaces it atomically; a missing file (and its folder) is created. A broken file,
    or one written in a form that cannot be edited safely, is left untouched and ``ClientConfigError`` says
    which file and why, with the snippet to add by hand.
    """
    spec = _spec(client)
    entry = _entry(spec, launcher, http_url, env)
    target = (path or default_config_path(client)).expanduser()
    if target.is_symlink():
        target = target.resolve()  # keep a dotfile manager's link; write where it points
    original: bytes | None = None
    mode: int | None = None
    try:
        original = target.read_bytes()
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ClientConfigError(f"{target}: cannot be read: {exc}") from None
    if original is None:
        text, bom, crlf = "", "", False
    else:
        try:
            decoded = original.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ClientConfigError(f"{target}: not UTF-8 text ({exc}); left untouched") from None
        bom = "\ufeff" if decoded.startswith("\ufeff") else ""
        crlf = "\r\n" in decoded
        text = decoded[len(bom) :].replace("\r\n", "\n")
    try:
        new_text, replaced = _merge(spec, text, entry, http_url is not None)
    except _ParseError as exc:
        raise ClientConfigError(f"{target}: {exc}; the file was left untouched") from None
    except _Unsupported as exc:
        snippet = render_snippet(client, launcher, http_url=http_url, env=env)
        raise ClientConfigError(
            f"{target}: cannot be edited safely ({exc}); the file was left untouched. Add this by hand:\n{snippet}"
        ) from None
    data = (bom + (new_text.replace("\n", "\r\n") if crlf else new_text)).encode("utf-8")
    if data == original:
        return WriteReport(target, None, replaced)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        backup: Path | None = None
        if original is not None:
            backup = _backup_path(target)
            shutil.copy2(target, backup)
        _atomic_write(target, data, mode)
    except OSError as exc:
        raise ClientConfigError(f"{target}: cannot be written: {exc}") from None
    return WriteReport(target, backup, replaced)
