"""Command line: ``incident-desk`` serves (stdio by default); subcommands manage keys, the journal and clients.

``main`` parses (``cli.parser``), loads the settings and hands each subcommand to its handler, imported only when
that subcommand runs (``config``, ``keychain``, ``locks``, ``doctor``...; ``audit`` and ``tools`` print
a few lines each and are here). Every human-facing line goes to stderr except the output a subcommand exists to
print (``output``). Serving never writes to stdout: in stdio mode it belongs to the protocol.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from incident_desk import __version__
from incident_desk.observability.lean_structlog import import_structlog

import_structlog()  # before the modules below import it with rich

from incident_desk.cli.output import err, out  # noqa: E402
from incident_desk.cli.parser import SERVE_FLAGS, SETTINGS_FLAGS, SUBCOMMANDS, build_parser  # noqa: E402

if TYPE_CHECKING:
    import argparse

    from incident_desk.settings.model import Settings


def _settings_from(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {name: getattr(args, name, None) for name in (*SETTINGS_FLAGS, *SERVE_FLAGS)}
    from incident_desk.settings.model import Settings, load_settings

    settings = load_settings(overrides, getattr(args, "config", None))
    if settings.enabled_tools is not None or settings.disabled_tools:
        # The names are checked against the tools the features declare, which settings cannot import.
        from incident_desk.features import tool_catalog
        from incident_desk.protocol.tool_selection import check_names

        check_names(tool_catalog(), enabled=settings.enabled_tools, disabled=settings.disabled_tools)
    if args.command not in ("serve", "doctor"):  # a served desk logs them (transport.serve), doctor reports them
        from incident_desk.settings.errors import unknown_environment_variables

        for warning in unknown_environment_variables(Settings.model_fields):
            err(f"warning: {warning}")
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments == ["--version"]:
        # Answered before the parser is built: its settings flags are read from the settings model (pydantic).
        out(f"incident-desk {__version__}")
        raise SystemExit(0)  # as argparse's version action does
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
    from incident_desk.settings.errors import SettingsError

    if args.command != "serve":
        # `serve` sets logging up from its settings; the other commands print for people on stdout, and a log line
        # written by the code they call (a skipped data entry, say) belongs on stderr, not in that output.
        from incident_desk.observability import log

        log.configure("warning")
    try:
        if args.command == "config":
            from incident_desk.cli.config import run_config

            return run_config(args)
        if args.command == "demo":
            from incident_desk.cli.demo import run_demo
            from incident_desk.safe_write import UnsafeTarget

            try:
                return run_demo(args.era, args.out)
            except UnsafeTarget as exc:
                err(f"demo: {exc}")
                return 2
        settings = _settings_from(args)
        if args.command == "serve":
            from incident_desk.transport import serve

            return serve(settings)
        if args.command == "audit":
            return _audit(settings, args.limit)
        if args.command == "tools":
            return _tools(settings)
        if args.command == "actions":
            from incident_desk.cli.actions import run_actions

            return run_actions(settings, args.service)
        if args.command == "locks":
            from incident_desk.cli.locks import run_locks

            return run_locks(settings, args.locks_action, getattr(args, "service", None), getattr(args, "reason", None))
        if args.command == "limits":
            from incident_desk.cli.limits import run_limits

            action = getattr(args, "limits_action", None)
            return run_limits(settings, action, getattr(args, "service", None), getattr(args, "reason", None))
        if args.command == "key":
            from incident_desk.cli.keychain import run_key

            return run_key(settings, args.action, args.kind, args.source, args.metrics)
        if args.command == "token":
            from incident_desk.cli.keychain import run_token

            return run_token(settings, args.action, args.kind)
        if args.command == "doctor":
            from incident_desk.cli.doctor import run_doctor

            return run_doctor(settings, getattr(args, "config", None))
        if args.command == "timeline":
            from incident_desk.cli.timeline_page import run_timeline

            return run_timeline(settings, args.incident_id, args.html)
        if args.command == "investigate":
            from incident_desk.cli.investigate import run_investigate

            return run_investigate(settings, args.incident_id)
        if args.command == "handoff":
            from incident_desk.cli.handoff import run_handoff

            return run_handoff(settings, args.hours)
    except SettingsError as exc:
        err(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    return 2


def _tools(settings: Settings) -> int:
    from incident_desk.features import tool_catalog
    from incident_desk.protocol.tool_selection import tools_off

    catalog = tool_catalog()
    off = tools_off(
        catalog, read_only=settings.read_only, enabled=settings.enabled_tools, disabled=settings.disabled_tools
    )
    width = max(len(name) for name in catalog)
    for name in catalog:
        out(f"{name.ljust(width)}  {'off (' + off[name] + ')' if name in off else 'on'}")
    return 0


def _audit(settings: Settings, limit: int) -> int:
    from incident_desk.assembly import open_journal
    from incident_desk.core.journal.audit import AuditError, format_decisions

    if settings.audit_url is None and not settings.audit_path.exists():
        out(f"no decisions recorded yet ({settings.audit_path} does not exist)")
        return 0
    try:
        journal = open_journal(settings)
        try:
            out(format_decisions(journal.recent(limit)))
        finally:
            journal.close()
    except AuditError as exc:
        err(str(exc))
        return 1
    return 0
