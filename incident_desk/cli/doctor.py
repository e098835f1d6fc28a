"""``incident-desk doctor``: check this installation end to end, the way a desktop client will use it.

It launches the desk exactly as a client would (same executable, stdio), completes a real handshake, lists the
tools, reads a resource, and fails if anything but protocol reached stdout. Output goes to stdout: doctor is a
command for people, not a server.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from incident_desk.core.journal.audit import Journal
from incident_desk.core.sources.config import LogSourceConfig
from incident_desk.settings.model import Settings


def _launch_command() -> tuple[str, list[str]]:
    if getattr(sys, "frozen", False):
        return sys.executable, []
    return sys.executable, ["-m", "incident_desk"]


_NUMBER_WORDS = (
    *("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"),
    *("thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"),
)


@dataclass(frozen=True)
class Surface:
    """What this very package registers for these settings: what the launched desk should list."""

    tools: tuple[str, ...]
    resources: tuple[str, ...]
    templates: tuple[str, ...]
    prompts: tuple[str, ...]

    def describe(self) -> str:
        """One line for people, generated from the registrations so it never goes stale."""

        def counted(items: tuple[str, ...], noun: str) -> str:
            number = _NUMBER_WORDS[len(items)] if len(items) < len(_NUMBER_WORDS) else str(len(items))
            plural = noun if len(items) == 1 else noun + "s"
            return f"{number} {plural} ({', '.join(items)})" if items else f"no {plural}"

        return "; ".join(
            (
                counted(self.tools, "tool"),
                counted(self.resources, "resource"),
                counted(self.templates, "resource template"),
                counted(self.prompts, "prompt"),
            )
        )


async def _surface_of_this_installation(settings: Settings) -> Surface:
    from incident_desk.assembly import build_app
    from incident_desk.server import build_server

    server = build_server(build_app(settings))
    return Surface(
        tools=tuple(tool.name for tool in await server.list_tools()),
        resources=tuple(str(resource.uri) for resource in await server.list_resources()),
        templates=tuple(template.uri_template for template in await server.list_resource_templates()),
        prompts=tuple(prompt.name for prompt in await server.list_prompts()),
    )


async def _handshake(settings: Settings, surface: Surface, config_file: Path | None) -> list[str]:
    """Talk to a fresh desk over stdio, configured as this one is (its config file, flags and environment, so the
    journal and sources it opens are the ones checked above); return the problems found (empty when healthy)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command, args = _launch_command()
    if config_file is not None:
        args = [*args, "--config", str(config_file)]
    if settings.data_dir is not None:
        args = [*args, "--data-dir", str(settings.data_dir)]
    if settings.audit_db is not None:
        args = [*args, "--audit-db", str(settings.audit_db)]
    # The SDK would hand the child only a few safe variables; a client launching the desk passes its whole
    # environment, INCIDENT_DESK_* settings and secrets included.
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    problems: list[str] = []
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            with anyio.fail_after(60):
                async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                    tools = {tool.name for tool in (await client.list_tools()).tools}
                    index = await client.read_resource("incident://index")
        except Exception as exc:  # doctor reports every failure rather than crashing on the first
            errlog.seek(0)
            tail = errlog.read()[-2000:]
            return [f"stdio handshake failed: {exc!r}\n{tail}"]
        errlog.seek(0)
        stderr = errlog.read()
    expected = set(surface.tools)
    if tools != expected:
        problems.append(f"tools/list returned {sorted(tools)}, expected {sorted(expected)}")
    if not index.contents:
        problems.append("incident://index returned no contents")
    if "Failed to parse JSONRPC" in stderr or "ModuleNotFoundError" in stderr:
        problems.append(f"the server's stderr shows a problem:\n{stderr[-2000:]}")
    return problems


def _secrets_from_the_keychain(settings: Settings) -> list[str]:
    """The secrets these settings need that the environment does not supply, so only the keychain can."""
    needed = []
    if settings.provider == "anthropic" and settings.provider_api_key is None:
        needed.append("the anthropic API key")
    if settings.transport == "http" and settings.http_token is None:
        needed.append("the HTTP bearer token")
    return needed


def run_doctor(settings: Settings, config_file: Path | None = None) -> int:
    from incident_desk import __version__
    from incident_desk.assembly import open_journal
    from incident_desk.core import credentials
    from incident_desk.core.incidents import DataFolder, bundled_sample_data
    from incident_desk.core.journal.audit import AuditError
    from incident_desk.settings.errors import SettingsError

    failures = 0

    def report(ok: bool, what: str, detail: str = "", *, warn_only: bool = False) -> None:
        nonlocal failures
        failures += 0 if ok or warn_only else 1
        status = "ok" if ok else "warn" if warn_only else "FAIL"
        sys.stdout.write(f"[{status}] {what}{': ' + detail if detail else ''}\n")

    sys.stdout.write(f"incident-desk {__version__} ({'frozen' if getattr(sys, 'frozen', False) else sys.executable})\n")
    from incident_desk.settings.errors import unknown_environment_variables

    for warning in unknown_environment_variables(type(settings).model_fields):
        report(False, "environment", warning, warn_only=True)
    root = settings.data_dir or bundled_sample_data()
    desk = DataFolder(Path(root), max_file_bytes=settings.max_data_file_bytes)
    listing = desk.listing()
    report(desk.root.is_dir(), "data directory", f"{root} ({len(listing.incidents)} incidents)")
    for folder in ("incidents", "runbooks"):
        if desk.root.is_dir() and not (desk.root / folder).is_dir():
            report(
                False,
                f"data directory {folder}/",
                f"{desk.root / folder} does not exist, so the desk serves no {folder}",
                warn_only=True,
            )
    for problem in listing.problems:
        report(False, f"data entry {problem.entry}", problem.reason)
    if settings.incident_sources:
        from incident_desk.app import source_secret
        from incident_desk.core.sources import IncidentSources

        sources = IncidentSources(desk, settings.incident_sources, secret=source_secret(settings))
        for ok, what, detail in sources.check():
            report(ok, what, detail)
    if settings.service_metrics:
        from incident_desk.app import source_secret
        from incident_desk.core.neighbours import metrics

        for service, config in sorted(settings.service_metrics.items()):
            ok, detail = metrics.check(config, service, source_secret(settings))
            report(ok, f"metrics of {service}", detail)
    for service, log_source in sorted(settings.service_logs.items()):
        ok, detail = _check_log_source(log_source)
        report(ok, f"log source of {service}", detail)
    journal_opens = False
    try:
        journal = open_journal(settings)
        journal_opens = True
        try:
            detail = _check_journal(journal)
        finally:
            journal.close()
        report(True, "audit journal", f"{settings.audit_location} ({detail})")
    except (AuditError, SettingsError) as exc:  # SettingsError: the postgres extra is not installed
        report(False, "audit journal", str(exc))
    if settings.http_auth == "oauth":
        ok, detail = anyio.run(_check_issuer, settings)
        report(ok, "OAuth issuer", detail)
    backend = credentials.backend_description()
    key = credentials.resolve_secret(settings.provider_api_key, settings.keyring_service, credentials.PROVIDER_API_KEY)
    needed_by = _secrets_from_the_keychain(settings)
    if key.problem is None:
        report(True, "keychain", backend)
    elif needed_by:
        report(False, "keychain", f"{backend} -- {key.problem}; needed for {', '.join(needed_by)}")
    else:
        # A headless Linux box has no keychain; that only matters when a secret has nowhere else to come from.
        report(
            False,
            "keychain",
            f"{backend} -- {key.problem}; no configured secret needs it (secrets can also come from "
            "INCIDENT_DESK_* environment variables)",
            warn_only=True,
        )
    if settings.provider != "none":
        where = key.source or "nowhere (set one with `incident-desk key set`)"
        report(key.value is not None or settings.provider == "openai", f"{settings.provider} API key", f"from {where}")
    if journal_opens:
        _check_serving(settings, config_file, report)
    else:
        # The desk does not start without its journal: a handshake would only repeat the failure above.
        sys.stdout.write("[skip] stdio handshake: the desk does not start until its audit journal opens\n")
    sys.stdout.write(f"\n{'all checks passed' if not failures else f'{failures} check(s) failed'}\n")
    return 0 if not failures else 1


def _check_serving(settings: Settings, config_file: Path | None, report: Callable[[bool, str], None]) -> None:
    """A real stdio handshake, then what a client of this installation sees."""
    surface = anyio.run(_surface_of_this_installation, settings)
    handshake_problems = anyio.run(_handshake, settings, surface, config_file)
    report(not handshake_problems, "stdio handshake, tools/list, resources/read, stdout purity")
    for issue in handshake_problems:
        sys.stdout.write(f"       {issue}\n")
    sys.stdout.write(
        "\nWhat a client sees:\n"
        f"  - the desk serves {surface.describe()}; each client sees what it supports\n"
        "  - client with sampling: summarize_incident answers with the client's model (mode=sampled)\n"
        "  - client without sampling: the configured provider"
        f" ({settings.provider}), else the raw log with SAMPLING_UNAVAILABLE\n"
        + "".join(f"  - {line}\n" for line in approval_lines(settings))
        + "  See client_configs/README.md for which desktop client supports what.\n"
    )


def approval_lines(settings: Settings) -> list[str]:
    """How each act is approved on this desk, as a client meets it: in band by default, else on the page."""
    overrides = [f"{act}: {mode}" for act, mode in sorted(settings.act_approval.items()) if mode != "in-band"]
    overrides += [
        f"service {service}: {mode}" for service, mode in sorted(settings.service_approval.items()) if mode != "in-band"
    ]
    lines = [
        "client with form elicitation: an in-band act (restart, resolve, silence, unsilence) asks a human for "
        "approval and a change ticket in the client's own form",
        "client without elicitation: an in-band act refuses with ELICITATION_UNAVAILABLE",
    ]
    if not overrides:
        return [*lines, "approvals: every act in band (no [act_approval] or per-service approval set)"]
    return [
        *lines,
        f"approvals on the desk's page instead: {'; '.join(overrides)} (the strictest of an act's and its "
        "service's mode wins); a client with URL elicitation opens the link, any other gets APPROVAL PENDING "
        "with it, and second-person needs a signed-in approver other than the requester",
    ]


async def _check_issuer(settings: Settings) -> tuple[bool, str]:
    from incident_desk.http.serve import MCP_PATH
    from incident_desk.identity.oauth import IssuerUnavailable, resource_url, verifier_for

    try:
        return True, await verifier_for(settings, resource_url(settings, MCP_PATH)).check()
    except IssuerUnavailable as exc:
        return False, str(exc)


def _check_log_source(source: LogSourceConfig) -> tuple[bool, str]:
    """What a log read would need, checked without reading a log: matching files, or a program to run."""
    from glob import glob

    from incident_desk.core.sources.config import FilesLogConfig, JournaldLogConfig

    if isinstance(source, FilesLogConfig):
        matched = sorted({match for pattern in source.paths for match in glob(pattern)})  # noqa: PTH207 -- absolute
        if not matched:
            return False, f"files: no file matches {', '.join(source.paths)}"
        unreadable = [match for match in matched if not os.access(match, os.R_OK)]
        if unreadable:
            return False, f"files: {', '.join(unreadable[:3])} cannot be read by this user"
        return True, f"files: {len(matched)} file(s) match {', '.join(source.paths)}"
    program = "journalctl" if isinstance(source, JournaldLogConfig) else source.argv[0]
    found = shutil.which(program)
    if found is None:
        return False, f"{source.kind}: {program} is not found or not executable"
    return True, f"{source.kind}: runs {found}"


def _check_journal(journal: Journal) -> str:
    """Reachable and schema current (opening checks both), then a row written, read back and rolled back.

    The row never commits: a doctor's row would read as a decision in an append-only audit trail.
    """
    from incident_desk.core.journal.audit import SCHEMA_VERSION

    journal.probe()
    return f"schema version {SCHEMA_VERSION}, {journal.count()} decisions, a test row written and read back"
