"""Settings problems in the user's own words: the keys they wrote, where they wrote them, and what they meant.

pydantic reports locations in the model's shape (``service_logs.web.files``, a union's tag, ``_action_kind()``);
the user wrote ``[services.web.logs]`` in a file or ``INCIDENT_DESK_DATA_DIR`` in a shell. This module turns one
into the other and suggests the nearest known name for a typo.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from incident_desk.core.acts.actions import CommandAction, SimulateAction
from incident_desk.core.credentials import ENV_PREFIX
from incident_desk.core.sources.config import (
    AlertmanagerSourceConfig,
    CommandLogConfig,
    FilesLogConfig,
    FolderSourceConfig,
    JournaldLogConfig,
)

# The tables whose entries are unions chosen by ``kind``: each kind's model, for a typo's nearest key.
_KINDS: dict[str, dict[str, type[BaseModel]]] = {
    "services": {"command": CommandAction, "simulate": SimulateAction},
    "service_logs": {"files": FilesLogConfig, "command": CommandLogConfig, "journald": JournaldLogConfig},
    "incident_sources": {"folder": FolderSourceConfig, "alertmanager": AlertmanagerSourceConfig},
}
# Settings the command line also takes as flags (cli/parser.py: _add_settings_flags and _add_serve_flags).
_FLAGS = {
    "data_dir": "--data-dir",
    "audit_db": "--audit-db",
    "log_level": "--log-level",
    "log_format": "--log-format",
    "transport": "--transport",
    "host": "--host",
    "port": "--port",
    "stateless": "--stateless",
    "redact_secrets": "--no-redact",
}
# INCIDENT_DESK_* names the desk reads or sets that are not settings: the config file, a restart command's service,
# the build script's mode; INCIDENT_DESK_SOURCE_<NAME> holds an incident source's secret; TEST_ belongs to tests.
_OTHER_VARIABLES = frozenset({"CONFIG", "SERVICE", "BUILD_MODE"})
_OTHER_PREFIXES = ("SOURCE_", "TEST_")


class SettingsError(Exception):
    """A setting is missing, malformed or in the wrong place; the message names it."""


def _suggest(word: str, candidates: list[str]) -> str:
    import difflib  # only when something is wrong: a served desk's start does not pay for it

    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _user_location(loc: tuple[int | str, ...]) -> list[str]:
    """The key path as written in the config file: no union tag, logs where the user put them."""
    parts = list(loc)
    top = str(parts[0]) if parts else ""
    if top in _KINDS and len(parts) >= 3 and parts[2] in _KINDS[top]:
        parts.pop(2)
    if top == "service_logs" and len(parts) >= 2:
        parts = ["services", parts[1], "logs", *parts[2:]]
    if top == "service_actions" and len(parts) >= 2:
        parts = ["services", parts[1], "actions", *parts[2:]]
    if top == "incident_sources" and len(parts) >= 2 and isinstance(parts[1], int):
        parts = [f"incident_sources #{parts[1] + 1}", *parts[2:]]
    return [str(part) for part in parts]


def _where(top: str, nested: bool, flags: Mapping[str, Any], config_file: Path | None) -> str:
    """Where the bad value was written: a flag, a variable, or the config file (the sources' precedence)."""
    if not nested and top in flags and top in _FLAGS:
        return _FLAGS[top]
    variable = ENV_PREFIX + top.upper()
    if any(name.upper() == variable or name.upper().startswith(variable + "__") for name in os.environ):
        return variable
    if config_file is not None:
        return f"config file {config_file}"
    flag = f"flag {_FLAGS[top]}, " if top in _FLAGS and not nested else ""
    return f"{flag}{variable} or config file" if not nested else "config file"


def _message(error: Any, key: str, top: str, nested: bool, settings: list[str]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        if top in _KINDS:  # any kind's keys: the typo may be in the very key that decides the kind (argv)
            candidates = sorted({name for model in _KINDS[top].values() for name in model.model_fields})
            candidates += ["logs"] if top == "services" else []
        else:
            candidates = [] if nested else settings
        return f"not a setting of this desk{_suggest(key, candidates)}"
    if kind == "union_tag_invalid":
        context = error.get("ctx", {})
        tags = [tag.strip(" '") for tag in str(context.get("expected_tags", "")).split(",") if tag.strip()]
        wrong = str(context.get("tag", ""))
        return f"kind {wrong!r} is not one of {', '.join(tags)}{_suggest(wrong, tags)}"
    if kind == "missing":
        return "required, and not given"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message


def describe_validation_error(
    exc: ValidationError,
    settings: Iterable[str],
    flags: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
) -> str:
    """One line per problem: ``invalid setting services.api.kind (config file x.toml): kind 'comand' ...``."""
    names = [name for name in settings if name != "service_logs"]  # written [services.<name>.logs]
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        parts = _user_location(tuple(error["loc"]))
        if error["type"] == "union_tag_invalid":
            parts.append("kind")
        top = str(error["loc"][0]) if error["loc"] else ""
        nested = top in _KINDS or len(parts) > 1
        location = ".".join(parts) or "settings"
        key = parts[-1] if parts else ""
        where = _where(top, nested, flags or {}, config_file) if top else ""
        message = _message(error, key, top, nested, names)
        lines.append(f"invalid setting {location}{f' ({where})' if where else ''}: {message}")
    return "\n".join(lines)


def unknown_environment_variables(settings: Iterable[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """One warning per ``INCIDENT_DESK_*`` variable the desk would ignore in silence (a typo, mostly)."""
    known = {ENV_PREFIX + name.upper() for name in settings if name != "service_logs"}
    known |= {ENV_PREFIX + name for name in _OTHER_VARIABLES}
    warnings = []
    for name in sorted(os.environ if environ is None else environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper.split("__")[0] in known:
            continue
        if upper[len(ENV_PREFIX) :].startswith(_OTHER_PREFIXES):
            continue
        import difflib

        close = difflib.get_close_matches(upper, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        warnings.append(f"{name} is not a setting of this desk and is ignored{hint}")
    return warnings
