"""Command line: ``incident-desk`` serves (stdio by default); subcommands manage keys, the journal and clients.

Every human-facing line goes to stderr except the output a subcommand exists to print (``audit``, ``config``,
``key show``...). Serving never writes to stdout: in stdio mode it belongs to the protocol.
"""

from __future__ import annotations

import argparse
import gc
import getpass
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from incident_desk import __version__

if TYPE_CHECKING:
    from incident_desk.client_configs import Launcher
    from incident_desk.settings import Settings

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

SUBCOMMANDS = ("serve", "audit", "tools", "locks", "key", "token", "config", "doctor", "demo", "timeline")


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(f"incident-desk: {text}\n")


# The settings a command line may set, by their Settings field names: each flag's name, type, choices and help are
# read from the model, so a setting is described once. ``redact_secrets`` is turned off by ``--no-redact``.
SETTINGS_FLAGS = ("data_dir", "audit_db", "desk_name", "log_level", "log_format")
SERVE_FLAGS = ("transport", "host", "port", "stateless", "read_only", "redact_secrets")
_OFF_FLAGS = {"redact_secrets": "--no-redact"}


def _add_setting_flag(parser: argparse._ActionsContainer, name: str, *, default: Any = None) -> None:
    """``--name-with-dashes`` for the setting ``name``, as the Settings model declares it."""
    from incident_desk.settings import Settings

    field = Settings.model_fields[name]
    description = (field.description or name).rstrip(".")
    if name in _OFF_FLAGS:
        off = f"turn off: {description[:1].lower()}{description[1:]}"
        parser.add_argument(_OFF_FLAGS[name], dest=name, action="store_false", default=default, help=off)
        return
    flag = "--" + name.replace("_", "-")
    annotation = field.annotation
    options = get_args(annotation) or (annotation,)
    if annotation is bool:
        parser.add_argument(flag, action="store_true", default=default, help=description)
        return
    shown = f"{description} (default {field.default})" if field.default is not None else description
    if get_origin(annotation) is Literal:
        parser.add_argument(flag, choices=list(options), default=default, help=shown)
    elif Path in options and str not in options:
        parser.add_argument(flag, type=Path, default=default, help=shown)
    elif int in options:
        parser.add_argument(flag, type=int, default=default, help=shown)
    else:
        parser.add_argument(flag, default=default, help=shown)


def _add_settings_flags(parser: argparse._ActionsContainer, *, default: Any = None) -> None:
    parser.add_argument("--config", type=Path, default=default, help="TOML config file (also INCIDENT_DESK_CONFIG)")
    for name in SETTINGS_FLAGS:
        _add_setting_flag(parser, name, default=default)


def _add_serve_flags(parser: argparse._ActionsContainer, *, default: Any = None) -> None:
    _add_settings_flags(parser, default=default)
    for name in SERVE_FLAGS:
        _add_setting_flag(parser, name, default=default)


def _add_config_flag(parser: argparse.ArgumentParser) -> None:
    """``key`` and ``token`` read only the keychain service name, which a config file may set."""
    parser.add_argument(
        "--config", type=Path, help="TOML config file whose keyring_service names the keychain entry (optional)"
    )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``only``, just that subcommand's (a served desk builds no other)."""
    parser = argparse.ArgumentParser(
        prog="incident-desk",
        description="An on-call incident desk for desktop AI clients, served over MCP. "
        "With no subcommand it serves over stdio: `incident-desk [flags]` is `incident-desk serve [flags]`.",
    )
    parser.add_argument("--version", action="version", version=f"incident-desk {__version__}")
    if only is None:
        # Shown in `incident-desk --help` because the README uses them without `serve`; main() hands any leading
        # flag to `serve`, so these are never parsed here (SUPPRESS: they add nothing to the namespace).
        _add_serve_flags(
            parser.add_argument_group("serving flags (with no subcommand, or after `serve`)"),
            default=argparse.SUPPRESS,
        )
    commands = parser.add_subparsers(dest="command", metavar="{" + ",".join(SUBCOMMANDS) + "}")

    if only in (None, "serve"):
        _add_serve_flags(
            commands.add_parser("serve", help="serve the desk (the default)", description="Serve the desk.")
        )
    if only in (None, "audit"):
        _add_audit_parser(commands)
    if only in (None, "tools"):
        tools = commands.add_parser(
            "tools",
            help="print which tools this configuration serves",
            description="Print every tool, on or off, for these settings (read_only, enabled_tools, disabled_tools).",
        )
        _add_settings_flags(tools)
        _add_setting_flag(tools, "read_only")
    if only in (None, "locks"):
        _add_locks_parser(commands)
    if only in (None, "key"):
        _add_key_parser(commands)
    if only in (None, "token"):
        _add_token_parser(commands)
    if only in (None, "config"):
        _add_config_parser(commands)
    if only in (None, "doctor"):
        doctor = commands.add_parser(
            "doctor",
            help="check this installation end to end",
            description="Check the data directory, log sources, journal and keychain, then start the desk as a "
            "client would and talk to it over stdio.",
        )
        _add_settings_flags(doctor)
    if only in (None, "demo"):
        demo = commands.add_parser(
            "demo",
            help="replay the scripted transcripts 01-11 against the sample desk",
            description="Replay transcripts 01-11 (reads, summary, approval, refusals) against the bundled sample "
            "desk with a scripted model and operator, then show the text timeline.",
        )
        demo.add_argument("--era", choices=["legacy", "2026-07-28"], default="legacy", help="protocol era to speak")
        demo.add_argument("--out", type=Path, help="also write each transcript to this folder")
    if only in (None, "timeline"):
        timeline = commands.add_parser(
            "timeline",
            help="print an incident's timeline, or write it as a page for a browser",
            description="Print the text timeline show_incident_timeline gives a model; with --html, also write the "
            "chart that app-rendering clients show as one self-contained page (the data inside, no network).",
        )
        _add_settings_flags(timeline)
        timeline.add_argument("incident_id", metavar="ID", help="the incident, e.g. INC-1042")
        timeline.add_argument("--html", type=Path, metavar="FILE", help="write the chart as a self-contained page")
    return parser


def _add_audit_parser(commands: Subparsers) -> None:
    audit = commands.add_parser(
        "audit",
        help="print the most recent restart decisions",
        description="Print the audit journal's most recent decisions, newest first.",
    )
    _add_settings_flags(audit)
    audit.add_argument("--limit", type=_audit_limit, default=50, help="how many decisions, 1-500 (default 50)")


def _add_locks_parser(commands: Subparsers) -> None:
    locks = commands.add_parser(
        "locks",
        help="list the restart locks held on a team desk, or break a stuck one",
        description="See which replica holds each service's restart lock on a PostgreSQL journal, and break a "
        "stuck one.",
    )
    actions = locks.add_subparsers(
        dest="locks_action", required=True, metavar="{list,break}", help="list the locks, or break one"
    )
    _add_settings_flags(
        actions.add_parser(
            "list",
            help="the services being restarted now, by whom, since when",
            description="List the restart locks held now: service, holder, since when, database session.",
        )
    )
    breaking = actions.add_parser(
        "break",
        help="end the session holding a service's lock (journalled, with your OS user)",
        description="Break a service's restart lock by ending the database session that holds it. Do this only "
        "once the holder's restart command cannot still be running: kill a stopped replica instead if you can "
        "(its lock then goes by itself).",
    )
    _add_settings_flags(breaking)
    breaking.add_argument("service", help="the service whose lock to break")
    breaking.add_argument("--reason", required=True, help="why the lock is broken; kept in the journal")


def _add_key_parser(commands: Subparsers) -> None:
    key = commands.add_parser(
        "key",
        help="store, show (masked) or delete the model provider's API key",
        description="Keep a secret the desk reads in the OS keychain: set asks for it (input hidden).",
    )
    _add_config_flag(key)
    key.add_argument("action", choices=["set", "show", "delete"], help="set (asks), show (masked) or delete")
    key.add_argument(
        "--kind", choices=["provider", "audit-db"], default="provider", help="which secret (default provider)"
    )
    key.add_argument("--source", help="an incident source's password or token instead (its [[incident_sources]] name)")
    key.add_argument(
        "--metrics", help="a service's Prometheus password or token instead (its [services.<name>.metrics])"
    )


def _add_token_parser(commands: Subparsers) -> None:
    token = commands.add_parser(
        "token",
        help="create or show the HTTP bearer token / sealing key",
        description="Generate a random secret into the OS keychain and print it once (without a keychain: print "
        "one for the INCIDENT_DESK_* variable).",
    )
    _add_config_flag(token)
    token.add_argument(
        "action", choices=["create", "show", "delete"], help="create (prints it once), show (masked) or delete"
    )
    token.add_argument("--kind", choices=["http", "sealing"], default="http", help="which secret (default http)")


def _add_config_parser(commands: Subparsers) -> None:
    from incident_desk.client_configs.registry import CLIENT_NAMES

    config = commands.add_parser(
        "config",
        help="print or install the config snippet for a desktop client",
        description="Print (or --write) a client's entry for this desk. The settings flags below and the "
        "INCIDENT_DESK_* variables set here go into the entry, paths made absolute, so the client starts the same "
        "desk; secrets never do.",
    )
    config.add_argument("client", choices=CLIENT_NAMES, help="the desktop client whose entry to print or write")
    _add_settings_flags(config)
    config.add_argument("--write", action="store_true", help="merge into the client's config file (backup first)")
    config.add_argument("--path", type=Path, help="config file to write instead of the client's default")
    config.add_argument(
        "--name",
        default="incident-desk",
        help="the entry's name in the client (default incident-desk); e.g. incident-desk-http beside a stdio entry",
    )
    config.add_argument("--uvx", metavar="SOURCE", help="launch with `uvx --offline --from SOURCE incident-desk`")
    config.add_argument("--http-url", help="point the client at a running HTTP desk instead of stdio")
    config.add_argument(
        "--token",
        action="store_true",
        help="the HTTP desk wants a bearer token: the entry sends it through the client's own secret reference "
        "(implied by a --http-url beyond loopback)",
    )


def _audit_limit(text: str) -> int:
    """The same bounds as the get_audit_log tool, checked before the journal is opened."""
    from incident_desk.core.audit import MAX_RECENT_DECISIONS

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_RECENT_DECISIONS:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_RECENT_DECISIONS}")
    return value


def _settings_from(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {name: getattr(args, name, None) for name in (*SETTINGS_FLAGS, *SERVE_FLAGS)}
    from incident_desk.settings import Settings, load_settings

    settings = load_settings(overrides, getattr(args, "config", None))
    if args.command not in ("serve", "doctor"):  # a served desk logs them (transport.serve), doctor reports them
        from incident_desk.settings_errors import unknown_environment_variables

        for warning in unknown_environment_variables(Settings.model_fields):
            _err(f"warning: {warning}")
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or (arguments[0].startswith("-") and arguments[0] not in ("-h", "--help", "--version")):
        arguments.insert(0, "serve")
    command = arguments[0] if arguments[0] in SUBCOMMANDS else None
    collecting = gc.isenabled()
    if command == "serve":
        # Importing the settings and the SDK and building the desk make objects that all live as long as the
        # process; the collector, run again and again while they are made, frees nothing and only slows the start
        # (docs/performance.md). serve() freezes them and turns it back on before the first request.
        gc.disable()
    try:
        return _run(build_parser(command).parse_args(arguments))
    finally:
        if collecting:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    from incident_desk.settings import SettingsError

    if args.command != "serve":
        # `serve` sets logging up from its settings; the other commands print for people on stdout, and a log line
        # written by the code they call (a skipped data entry, say) belongs on stderr, not in that output.
        from incident_desk import log

        log.configure("warning")
    try:
        if args.command == "config":
            return _config(args)
        if args.command == "demo":
            from incident_desk.demo import run_demo
            from incident_desk.safe_write import UnsafeTarget

            try:
                return run_demo(args.era, args.out)
            except UnsafeTarget as exc:
                _err(f"demo: {exc}")
                return 2
        settings = _settings_from(args)
        if args.command == "serve":
            from incident_desk.transport import serve

            return serve(settings)
        if args.command == "audit":
            return _audit(settings, args.limit)
        if args.command == "tools":
            return _tools(settings)
        if args.command == "locks":
            from incident_desk.locks_cli import run_locks

            return run_locks(settings, args.locks_action, getattr(args, "service", None), getattr(args, "reason", None))
        if args.command == "key":
            return _key(settings, args.action, args.kind, args.source, args.metrics)
        if args.command == "token":
            return _token(settings, args.action, args.kind)
        if args.command == "doctor":
            from incident_desk.doctor import run_doctor

            return run_doctor(settings, getattr(args, "config", None))
        if args.command == "timeline":
            from incident_desk.timeline_page import run_timeline

            return run_timeline(settings, args.incident_id, args.html)
    except SettingsError as exc:
        _err(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    return 2


def _tools(settings: Settings) -> int:
    from incident_desk.tool_selection import ALL_TOOLS, tools_off

    off = tools_off(read_only=settings.read_only, enabled=settings.enabled_tools, disabled=settings.disabled_tools)
    width = max(len(name) for name in ALL_TOOLS)
    for name in ALL_TOOLS:
        _out(f"{name.ljust(width)}  {'off (' + off[name] + ')' if name in off else 'on'}")
    return 0


def _audit(settings: Settings, limit: int) -> int:
    from incident_desk.app import open_journal
    from incident_desk.core.audit import AuditError, format_decisions

    if settings.audit_url is None and not settings.audit_path.exists():
        _out(f"no decisions recorded yet ({settings.audit_path} does not exist)")
        return 0
    try:
        journal = open_journal(settings)
        try:
            _out(format_decisions(journal.recent(limit)))
        finally:
            journal.close()
    except AuditError as exc:
        _err(str(exc))
        return 1
    return 0


def _secret_command(settings: Settings, name: str, action: str, *, value_source: str) -> int:
    from incident_desk.core import credentials

    service = settings.keyring_service
    try:
        if action in ("set", "create"):
            try:
                credentials.check_can_store(service, name)  # before the prompt: nothing typed is then lost
            except credentials.CredentialStoreError as exc:
                if value_source != "generate":
                    raise
                return _token_without_a_keychain(name, str(exc))
            if value_source == "generate":
                value = credentials.generate_token()
            else:
                try:
                    value = getpass.getpass(f"{name} (input hidden): ").strip()
                except EOFError:
                    value = ""
                if not value:
                    _err("no value entered; nothing stored")
                    return 1
            credentials.store_secret(service, name, value)
            _err(f"stored {name} in {credentials.backend_description()} (service {service!r})")
            if value_source == "generate":
                # Shown once, so it can be given to clients; it is never logged.
                _out(value)
            return 0
        if action == "show":
            stored = credentials.read_secret(service, name)
            if stored is None:
                _err(f"no {name} stored in the keychain (service {service!r})")
                return 1
            _out(credentials.mask(stored))
            return 0
        removed = credentials.delete_secret(service, name)
        _err(f"deleted {name}" if removed else f"no {name} was stored")
        return 0
    except credentials.CredentialStoreError as exc:
        _err(str(exc))
        return 1


def _token_without_a_keychain(name: str, problem: str) -> int:
    """No keychain to keep a generated token: print one for the environment variable the desk also reads."""
    from incident_desk.core import credentials

    variable = credentials.env_var_name(name)
    share = "give it to each client" if name == credentials.HTTP_TOKEN else "the same on every replica"
    _err(problem.split("; or set ")[0])
    _err(
        f"nothing stored; here is a fresh {name} for {variable}: set it in the desk's environment ({share}), "
        "e.g. in the service's environment file, never in a config file"
    )
    _out(credentials.generate_token())  # shown once, on stdout only, so it can be piped; never logged
    return 0


def _key(settings: Settings, action: str, kind: str, source: str | None = None, metrics: str | None = None) -> int:
    from incident_desk.core.credentials import AUDIT_DB_PASSWORD, PROVIDER_API_KEY

    name = AUDIT_DB_PASSWORD if kind == "audit-db" else PROVIDER_API_KEY
    if source is not None:
        name = f"source-{source}"
    if metrics is not None:
        name = f"metrics-{metrics}"
    return _secret_command(settings, name, action, value_source="prompt")


def _token(settings: Settings, action: str, kind: str) -> int:
    from incident_desk.core.credentials import HTTP_TOKEN, SEALING_KEY

    name = HTTP_TOKEN if kind == "http" else SEALING_KEY
    return _secret_command(settings, name, action, value_source="generate")


def _config(args: argparse.Namespace) -> int:
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
                _err(f"{args.name} in {report.path} is already up to date; nothing written")
            else:
                _err(f"{args.name} {'updated in' if report.replaced else 'added to'} {report.path}{backup}")
        else:
            snippet = client_configs.render_snippet(
                args.client, launcher, http_url=args.http_url, env=env, token=token, name=args.name
            )
            _out(snippet)
    except client_configs.ClientConfigError as exc:
        _err(str(exc))
        return 1
    if args.uvx is not None:
        notes += _uvx_cache_notes(launcher, args.uvx)
    for note in notes:
        _err(note)
    return 0


_CARRIED_FLAGS = ("config", "data_dir", "audit_db", "log_level", "log_format")


def _launch_env(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    """The env of a desk the client starts (validated first), then which desk that is and what was left out."""
    from incident_desk.client_configs import ClientConfigError
    from incident_desk.settings import client_launch

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
    from incident_desk.settings import is_loopback

    given = [f"--{name.replace('_', '-')}" for name in _CARRIED_FLAGS if getattr(args, name) is not None]
    if given:
        raise ClientConfigError(
            f"settings flags ({', '.join(given)}) configure a desk the client starts; the desk at {args.http_url} "
            "serves with the settings it was started with (drop --http-url for a desk of the client's own)"
        )
    host = urlsplit(args.http_url).hostname  # None: not a URL, which the entry itself refuses with the reason
    spec, token = client_spec(args.client), args.token or (host is not None and not is_loopback(host))
    notes = [f"the client will see the desk serving {args.http_url}"]
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
