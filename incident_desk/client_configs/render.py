"""Each client's spelling of a stdio and an HTTP entry, the text of a minimal file holding one, and the shipped
examples. Secrets never go in: HTTP entries reference the token through the client's own indirection."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from tomlkit.items import InlineTable, Table

from incident_desk.client_configs import registry
from incident_desk.client_configs.registry import SERVER_NAME, ClientConfigError, ClientSpec, Launcher

DEFAULT_HTTP_URL = "http://127.0.0.1:8765/mcp"
PLACEHOLDER_EXECUTABLE = "/ABSOLUTE/PATH/TO/incident-desk"
PLACEHOLDER_CHECKOUT = "/ABSOLUTE/PATH/TO/incident-desk-checkout"
_DESCRIPTION = "On-call incident desk: incidents, logs, runbooks; restarts need a human's approval."
_CODEX_UVX_STARTUP_TIMEOUT_SECONDS = 60  # uvx rebuilds a changed checkout before it starts; Codex waits 10 s
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|SEALING|CREDENTIAL|(^|_)KEY$", re.IGNORECASE)
# Strings the shipped YAML writes bare; everything else is double-quoted, as the files always had it.
_YAML_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/]*$")
# An entry's key in a client's config (``--name``): a plain word every client's format takes unquoted.
_ENTRY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_YAML_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})


def _stdio_entry(spec: ClientSpec, launcher: Launcher, env: dict[str, str]) -> dict[str, Any]:
    command, args = launcher.command, list(launcher.args)
    match spec.name:
        case "goose":
            return _goose_entry("stdio", cmd=command, args=args, envs=env)
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
    if spec.name == "codex" and Path(command).name.lower() in {"uvx", "uvx.exe"}:
        entry["startup_timeout_sec"] = _CODEX_UVX_STARTUP_TIMEOUT_SECONDS
    return entry


def _goose_entry(kind: str, **fields: Any) -> dict[str, Any]:
    return {"name": SERVER_NAME, "type": kind, "enabled": True, **fields, "timeout": 300, "description": _DESCRIPTION}


def _http_entry(spec: ClientSpec, url: str, token: bool) -> dict[str, Any]:
    auth = {"headers": {"Authorization": spec.http_token}} if spec.http_token and token else {}
    match spec.name:
        case "claude-code" | "vscode":
            return {"type": "http", "url": url, **auth}
        case "windsurf":
            return {"serverUrl": url, **auth}
        case "gemini-cli":
            return {"httpUrl": url, **auth}
        case "cline":
            return {"type": "streamableHttp", "url": url, "disabled": False}
        case "continue":
            options = {"requestOptions": auth} if auth else {}
            return {"name": SERVER_NAME, "type": "streamable-http", "url": url, **options}
        case "goose":
            return _goose_entry("streamable_http", uri=url)
        case "codex":
            return {"url": url, **({"bearer_token_env_var": spec.http_token} if auth else {})}
        case _:  # cursor; zed, lm-studio: no header they could fill from the environment
            return {"url": url, **auth}


def entry_for(
    spec: ClientSpec,
    launcher: Launcher | None,
    url: str | None,
    env: Mapping[str, str],
    token: bool = False,
    name: str = SERVER_NAME,
) -> dict[str, Any]:
    """The entry in ``spec``'s spelling (HTTP: a token header if ``token``); no secret-like env."""
    entry = _entry_for(spec, launcher, url, env, token)
    if not _ENTRY_NAME.fullmatch(name):
        raise ClientConfigError(f"entry name {name!r} is not valid: use letters, digits, . _ - (at most 64)")
    if "name" in entry:  # Goose and Continue name the entry inside it too
        entry["name"] = name
    return entry


def _entry_for(
    spec: ClientSpec, launcher: Launcher | None, url: str | None, env: Mapping[str, str], token: bool
) -> dict[str, Any]:
    secret_like = sorted(name for name in env if _SECRET_NAME.search(name))
    if secret_like:
        raise ClientConfigError(
            f"refusing to put {', '.join(secret_like)} in a client config file: secrets belong in the OS "
            "keychain (`incident-desk key set`) or the environment, never in a file that gets copied and shared"
        )
    if url is None:
        return _stdio_entry(spec, launcher or registry.detect_launcher(), dict(env))
    if not re.match(r"^https?://[^\s/]+", url):
        raise ClientConfigError(f"HTTP URL {url!r} is not an http:// or https:// URL")
    if not spec.http_supported:
        raise ClientConfigError(
            f"{spec.title} does not take HTTP servers in its config file: add {url} in "
            "Settings → Connectors → Add custom connector, or use the stdio entry"
        )
    return _http_entry(spec, url, token)


def vscode_input() -> dict[str, Any]:
    """The VS Code ``inputs`` item that asks for the bearer token once and keeps it in its secret storage."""
    return {
        "type": "promptString",
        "id": registry.VSCODE_TOKEN_INPUT,
        "description": "incident-desk bearer token (kept in VS Code's secret storage)",
        "password": True,
    }


def document(spec: ClientSpec, entry: dict[str, Any], name: str = SERVER_NAME) -> dict[str, Any]:
    """The whole minimal file for ``spec`` holding just ``entry`` (named ``name``)."""
    if spec.layout == "continue":
        return {"name": SERVER_NAME, "version": "0.0.1", "schema": "v1", "mcpServers": [entry]}
    doc: dict[str, Any] = {spec.server_key: {name: entry}}
    return {"inputs": [vscode_input()], **doc} if spec.name == "vscode" and "headers" in entry else doc


def yaml_styled(value: Any) -> Any:
    """``value`` as ruamel nodes in the shipped files' style: flow lists of scalars, quotes unless a plain word."""
    if isinstance(value, Mapping):
        mapping = CommentedMap((key, yaml_styled(item)) for key, item in value.items())
        if not value:
            mapping.fa.set_flow_style()
        return mapping
    if isinstance(value, list | tuple):
        sequence = CommentedSeq(yaml_styled(item) for item in value)
        if not (value and all(isinstance(item, Mapping) for item in value)):
            sequence.fa.set_flow_style()
        return sequence
    if isinstance(value, str) and not (_YAML_BARE.match(value) and value.lower() not in _YAML_RESERVED):
        return DoubleQuotedScalarString(value)
    return value


def yaml_editor() -> YAML:
    """Round-trip YAML in the shipped files' layout (``  - `` lists), never folding a long path or URL."""
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    return yaml


def dump_yaml(yaml: YAML, data: Any) -> str:
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def toml_entry(entry: Mapping[str, Any]) -> Table:
    """The entry as one ``[mcp_servers.incident-desk]`` table; nested mappings stay inline so it is one block."""
    table = tomlkit.table()
    for key, value in entry.items():
        table[key] = _inline_table(value) if isinstance(value, Mapping) else value
    return table


def _inline_table(value: Mapping[str, Any]) -> InlineTable:
    inline = tomlkit.inline_table()
    inline.update(value)
    return inline


def render_document(spec: ClientSpec, doc: dict[str, Any]) -> str:
    """The text of ``doc`` in ``spec``'s format."""
    if spec.format == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if spec.format == "yaml":
        return dump_yaml(yaml_editor(), yaml_styled(doc))
    toml = tomlkit.document()
    servers = toml[spec.server_key] = tomlkit.table(is_super_table=True)
    for name, entry in doc[spec.server_key].items():
        servers[name] = toml_entry(entry)
    return toml.as_string()


def render_snippet(
    client: str,
    launcher: Launcher | None = None,
    *,
    http_url: str | None = None,
    env: Mapping[str, str] | None = None,
    token: bool = False,
    name: str = SERVER_NAME,
) -> str:
    """A minimal config file for ``client``: stdio with ``launcher`` (default: this installation), or HTTP."""
    spec = registry.client_spec(client)
    return render_document(spec, document(spec, entry_for(spec, launcher, http_url, env or {}, token, name), name))


def example_files() -> dict[str, str]:
    """The files under ``client_configs/``: relative path -> text. Tests keep the tree equal to this."""
    launchers = {
        "": Launcher(PLACEHOLDER_EXECUTABLE),
        ".uvx": Launcher("uvx", ("--offline", "--from", PLACEHOLDER_CHECKOUT, SERVER_NAME)),
    }
    files: dict[str, str] = {}
    for spec in registry.CLIENTS.values():
        for suffix, launcher in launchers.items():
            files[f"{spec.name}/{spec.example_stem}{suffix}.{spec.format}"] = render_snippet(spec.name, launcher)
        if spec.http_supported:
            http_snippet = render_snippet(spec.name, http_url=DEFAULT_HTTP_URL)
            files[f"{spec.name}/{spec.example_stem}.http.{spec.format}"] = http_snippet
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
    for spec in registry.CLIENTS.values():
        stem, ext = spec.example_stem, spec.format
        kinds = [f"`{stem}.{ext}`", f"`{stem}.uvx.{ext}`"]
        kinds += [f"`{stem}.http.{ext}`"] if spec.http_supported else []
        kinds += ["`manifest.json`"] if spec.name == "claude-desktop" else []
        where = " | ".join(
            f"`{registry.display_config_path(spec.name, plat)}`" for plat in ("linux", "darwin", "win32")
        )
        rows.append(
            f"| {spec.title} (`{spec.name}`) | {'<br>'.join(kinds)} | {where} | {spec.features} | {spec.notes} |"
        )
    return "\n".join(rows) + "\n"
