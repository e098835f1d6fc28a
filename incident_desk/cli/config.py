"""``incident-desk config CLIENT``: print or write a desktop client's entry for this desk.

A stdio entry carries this shell's settings (``client_configs.launch``); an HTTP entry points at a running desk and
sends its bearer token through the client's own secret reference, never in the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from incident_desk.cli.output import err, out

if TYPE_CHECKING:
    import argparse

    from incident_desk.client_configs import Launcher


# The server name in gemini-extension.json; Gemini CLI lets a settings.json entry of the same name win.
EXTENSION_SERVER = "incident-desk"
GEMINI_SHADOWS_EXTENSION = (
    "note: this settings.json entry takes precedence over the incident-desk Gemini extension's server of the same "
    "name; if you use the extension, remove this entry or write it with --name another-name"
)


def run_config(args: argparse.Namespace) -> int:
    """Print or write the entry; stdout is the snippet alone (it gets piped), every remark goes to stderr."""
    from incident_desk import client_configs

    try:
        launcher = client_configs.uvx_launcher(args.uvx) if args.uvx is not None else client_configs.detect_launcher()
        if args.http_url is None:
            (env, notes), token = _launch_env(args), False
        else:
            env, (token, notes) = {}, _http_token(args)
        if args.write:
            report = client_configs.write_config(
                args.client, launcher, path=args.path, http_url=args.http_url, env=env, token=token, name=args.name
            )
            backup = f" (backup: {report.backup})" if report.backup else ""
            if not report.changed:
                err(f"{args.name} in {report.path} is already up to date; nothing written")
            else:
                err(f"{args.name} {'updated in' if report.replaced else 'added to'} {report.path}{backup}")
            if args.client == "gemini-cli" and args.name == EXTENSION_SERVER:
                notes.append(GEMINI_SHADOWS_EXTENSION)
        else:
            snippet = client_configs.render_snippet(
                args.client, launcher, http_url=args.http_url, env=env, token=token, name=args.name
            )
            out(snippet)
    except client_configs.ClientConfigError as exc:
        err(str(exc))
        return 1
    if args.uvx is not None:
        notes += _uvx_cache_notes(launcher, args.uvx)
    for note in notes:
        err(note)
    return 0


_CARRIED_FLAGS = ("config", "data_dir", "audit_db", "log_level", "log_format")


def _launch_env(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    """The env of a desk the client starts (validated first), then which desk that is and what was left out."""
    from incident_desk.client_configs import ClientConfigError
    from incident_desk.client_configs.launch import client_launch

    if args.token:
        raise ClientConfigError("--token goes with --http-url: a desk the client starts over stdio needs no token")
    launch = client_launch({name: getattr(args, name) for name in _CARRIED_FLAGS})
    notes = [f"the client will see {launch.desk()}"]
    notes += [f"left out of the entry: {name}: {reason}" for name, reason in launch.left_out.items()]
    return launch.env, notes


def _http_token(args: argparse.Namespace) -> tuple[bool, list[str]]:
    """Whether the HTTP entry sends a token: ``--token``, or a URL beyond loopback (the desk needs one there)."""
    from urllib.parse import urlsplit

    from incident_desk.client_configs import ClientConfigError
    from incident_desk.client_configs.registry import client_spec
    from incident_desk.settings.model import is_loopback

    given = [f"--{name.replace('_', '-')}" for name in _CARRIED_FLAGS if getattr(args, name) is not None]
    if given:
        raise ClientConfigError(
            f"settings flags ({', '.join(given)}) configure a desk the client starts; the desk at {args.http_url} "
            "serves with the settings it was started with (drop --http-url for a desk of the client's own)"
        )
    host = urlsplit(args.http_url).hostname  # None: not a URL, which the entry itself refuses with the reason
    notes = [f"the client will see the desk serving {args.http_url}"]
    issuer = _oauth_issuer(args.http_url) if host is not None else None
    if issuer is not None:
        notes.append(
            f"the desk at {args.http_url} signs people in with OAuth at {issuer}: the client signs you in when it "
            "connects, so the entry sends no token" + ("; --token is not used" if args.token else "")
        )
        return False, notes
    spec, token = client_spec(args.client), args.token or (host is not None and not is_loopback(host))
    if not token:
        notes.append("no Authorization header: right for a loopback desk without a token; add --token if it has one")
    elif spec.http_token is None and spec.http_supported:
        raise ClientConfigError(
            f"{spec.title} cannot read a bearer token from outside its config file, and a token never goes in one: "
            "use the stdio entry (drop --http-url), or a loopback desk without a token"
        )
    else:
        notes.append(f"the entry sends the bearer token through {spec.http_token}, which the client fills in")
    return token, notes


# How long `config --http-url` waits for the desk's OAuth metadata, and how much of it it reads.
_METADATA_SECONDS = 5.0
_METADATA_BYTES = 64 * 1024


def _oauth_issuer(url: str) -> str | None:
    """The issuer a desk at ``url`` names in its Protected Resource Metadata (RFC 9728), or None when it has none
    (a token or loopback desk) or cannot be reached; what it answers is untrusted text, shown as one line."""
    import json
    from urllib.parse import urlsplit, urlunsplit

    from incident_desk.core.neighbours import outside
    from incident_desk.core.neighbours.untrusted import one_line

    parts = urlsplit(url)
    metadata = urlunsplit((parts.scheme, parts.netloc, "/.well-known/oauth-protected-resource" + parts.path, "", ""))
    request = outside.Request(
        "GET",
        metadata,
        what=f"the desk's OAuth metadata ({metadata})",
        deadline_seconds=_METADATA_SECONDS,
        max_bytes=_METADATA_BYTES,
        headers={"Accept": "application/json"},
    )
    try:
        response = outside.exchange(request)
        document = json.loads(response.content) if response.is_success else None
    except (outside.OutsideError, ValueError):
        return None
    servers = document.get("authorization_servers") if isinstance(document, dict) else None
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        return None
    return one_line(servers[0], 200)


def _uvx_cache_notes(launcher: Launcher, source: str) -> list[str]:
    """The uvx entry starts offline, so uv's cache must already hold the desk: say so now, not in a client's log."""
    import subprocess

    try:
        check = subprocess.run(
            [launcher.command, *launcher.args, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = f"{launcher.command} cannot be run ({exc})"
    else:
        if check.returncode == 0:
            return []
        problem = f"uv's cache cannot start {source} offline yet"
    return [
        f"{problem}: with uv installed, run `uvx --from {source} incident-desk --version` once while online "
        "(again with --refresh after an update), so the client's offline start finds it in uv's cache"
    ]
