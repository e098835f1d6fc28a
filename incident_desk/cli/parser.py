"""The ``incident-desk`` command line's grammar: its subcommands and their flags, settings flags read from the model.

Building the parser imports only what a subcommand's choices need, so a served desk's start pays for no other.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from incident_desk import __version__

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

SUBCOMMANDS = (
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
    "investigate",
    "handoff",
)


# The settings a command line may set, by their Settings field names: each flag's name, type, choices and help are
# read from the model, so a setting is described once. ``redact_secrets`` is turned off by ``--no-redact``.
SETTINGS_FLAGS = ("data_dir", "audit_db", "desk_name", "log_level", "log_format")
SERVE_FLAGS = ("transport", "host", "port", "stateless", "read_only", "redact_secrets")
_OFF_FLAGS = {"redact_secrets": "--no-redact"}


def setting_flags() -> dict[str, str]:
    """The flag that sets each setting a command line may set, by its Settings field name."""
    return {name: _OFF_FLAGS.get(name, "--" + name.replace("_", "-")) for name in (*SETTINGS_FLAGS, *SERVE_FLAGS)}


def _add_setting_flag(parser: argparse._ActionsContainer, name: str, *, default: Any = None) -> None:
    """``--name-with-dashes`` for the setting ``name``, as the Settings model declares it."""
    from incident_desk.settings.model import Settings

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


def _command(commands: Subparsers, name: str, *, help: str, description: str) -> argparse.ArgumentParser:
    """A subcommand that reads the desk's settings, with the settings flags every such command takes."""
    parser = commands.add_parser(name, help=help, description=description)
    _add_settings_flags(parser)
    return parser


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
        tools = _command(
            commands,
            "tools",
            help="print which tools this configuration serves",
            description="Print every tool, on or off, for these settings (read_only, enabled_tools, disabled_tools).",
        )
        _add_setting_flag(tools, "read_only")
    if only in (None, "actions"):
        actions = _command(
            commands,
            "actions",
            help="print the runbook actions this configuration offers",
            description="Print each service's runbook actions ([services.<name>.actions.<action>]): description, "
            "approval, argv, preview_argv and parameters.",
        )
        actions.add_argument("service", nargs="?", help="only this service's actions")
    if only in (None, "locks"):
        _add_locks_parser(commands)
    if only in (None, "limits"):
        _add_limits_parser(commands)
    if only in (None, "key"):
        _add_key_parser(commands)
    if only in (None, "token"):
        _add_token_parser(commands)
    if only in (None, "config"):
        _add_config_parser(commands)
    if only in (None, "doctor"):
        _command(
            commands,
            "doctor",
            help="check this installation end to end",
            description="Check the data directory, log sources, journal and keychain, then start the desk as a "
            "client would and talk to it over stdio.",
        )
    if only in (None, "demo"):
        demo = commands.add_parser(
            "demo",
            help="replay the scripted transcripts 01-12 against the sample desk",
            description="Replay transcripts 01-12 (reads, summary, approval, refusals, the text timeline) against the "
            "bundled sample desk with a scripted model and operator.",
        )
        demo.add_argument("--era", choices=["legacy", "2026-07-28"], default="legacy", help="protocol era to speak")
        demo.add_argument("--out", type=Path, help="also write each transcript to this folder")
    if only in (None, "timeline"):
        timeline = _command(
            commands,
            "timeline",
            help="print an incident's timeline, or write it as a page for a browser",
            description="Print the text timeline show_incident_timeline gives a model; with --html, also write the "
            "chart that app-rendering clients show as one self-contained page (the data inside, no network).",
        )
        timeline.add_argument("incident_id", metavar="ID", help="the incident, e.g. INC-1042")
        timeline.add_argument("--html", type=Path, metavar="FILE", help="write the chart as a self-contained page")
    if only in (None, "investigate"):
        investigate = _command(
            commands,
            "investigate",
            help="print an incident's ranked evidence",
            description="Print what investigate_incident finds: new and rising log templates, metric steps, changes "
            "before the opening, similar past incidents and runbook sections, each with where to check it.",
        )
        investigate.add_argument("incident_id", metavar="ID", help="the incident, e.g. INC-1042")
    if only in (None, "handoff"):
        handoff = _command(
            commands,
            "handoff",
            help="print the shift handoff",
            description="Print what get_shift_handoff gives a model: who is on call and next, open incidents, "
            "silences, acts, pending approvals, changes and resolutions of the shift.",
        )
        handoff.add_argument("--hours", type=_shift_hours, default=12, help="shift length in hours (default 12)")
    return parser


def _add_audit_parser(commands: Subparsers) -> None:
    audit = _command(
        commands,
        "audit",
        help="print the most recent restart decisions",
        description="Print the audit journal's most recent decisions, newest first.",
    )
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


def _add_limits_parser(commands: Subparsers) -> None:
    limits = _command(
        commands,
        "limits",
        help="show the act limits' counters, or reset a service's",
        description="Show each act limit's counter ([act_limits]: acts per person, restarts per service, cooldowns) "
        "as the journal holds it, and when each clears.",
    )
    actions = limits.add_subparsers(dest="limits_action", metavar="{reset}", help="reset a service's limits")
    reset = actions.add_parser(
        "reset",
        help="start a service's restart count and cooldown again (journalled, with your OS user)",
        description="Start a service's restart count and cooldown again, for a restart that must happen now. The "
        "reset is journalled with your OS user and the reason.",
    )
    # SUPPRESS: flags given before `reset` are kept, not overwritten by this parser's defaults.
    _add_settings_flags(reset, default=argparse.SUPPRESS)
    reset.add_argument("service", help="the service whose limits to reset")
    reset.add_argument("--reason", required=True, help="why the limits are reset; kept in the journal")


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


def _shift_hours(text: str) -> int:
    from incident_desk.core.handoff.shift import MAX_HOURS

    if not text.isdigit() or not 1 <= int(text) <= MAX_HOURS:
        raise argparse.ArgumentTypeError(f"must be a whole number of hours from 1 to {MAX_HOURS}")
    return int(text)


def _audit_limit(text: str) -> int:
    """The same bounds as the get_audit_log tool, checked before the journal is opened."""
    from incident_desk.core.journal.audit import MAX_RECENT_DECISIONS

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_RECENT_DECISIONS:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_RECENT_DECISIONS}")
    return value
