"""The configuration shapes of incident sources and per-service log sources (names are part of the contract).

``[[incident_sources]]`` tables say where incidents come from; ``[services.<name>.logs]`` says where a service's
log comes from when its incidents do not carry one (an Alertmanager alert has no log of its own).
"""

from __future__ import annotations

import os
from datetime import datetime
from glob import has_magic
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from incident_desk.core.names import SERVICE_NAME, is_safe_name
from incident_desk.core.neighbours.runner import check_pass_env

DEFAULT_LOOKBACK_MINUTES = 30.0
# What a command log's argv may name; anything else in braces is refused when the config is loaded.
PLACEHOLDERS = ("service", "incident", "since", "until", "since_epoch", "until_epoch")


def check_argv_placeholders(argv: list[str]) -> list[str]:
    """Validate a command's argv: a program first, and no placeholder beyond :data:`PLACEHOLDERS`."""
    if not argv[0].strip():
        raise ValueError("the first argv entry (the program) is empty")
    sample = dict.fromkeys(PLACEHOLDERS, "x")
    for word in argv:
        try:
            word.format_map(sample)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"argv entry {word!r} has an unknown placeholder {exc}: use {', '.join(PLACEHOLDERS)} "
                "(write {{ and }} for literal braces)"
            ) from None
    return argv


def placeholder_values(service: str, incident_id: str, since: datetime, until: datetime) -> dict[str, str]:
    """What each of :data:`PLACEHOLDERS` stands for in a command's argv over the window ``since``..``until``."""
    return {
        "service": service,
        "incident": incident_id,
        "since": since.isoformat().replace("+00:00", "Z"),
        "until": until.isoformat().replace("+00:00", "Z"),
        "since_epoch": str(int(since.timestamp())),
        "until_epoch": str(int(until.timestamp())),
    }


def _safe_source_name(name: str) -> str:
    if not is_safe_name(name, SERVICE_NAME):
        raise ValueError(f"source name {name!r} is not valid: use letters, digits, . _ -")
    return name


class FolderSourceConfig(BaseModel):
    """Today's layout: ``incidents/<ID>/incident.toml`` and ``log.txt`` under a directory (default data_dir)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["folder"] = "folder"
    name: str = "folder"
    path: Path | None = None

    _name = field_validator("name")(_safe_source_name)


class AlertmanagerSourceConfig(BaseModel):
    """Prometheus Alertmanager's API v2: each firing alert is an open incident ``<name>-<fingerprint>``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["alertmanager"]
    name: str
    url: Annotated[str, Field(pattern=r"^https?://[^\s/@]+(/\S*)?$")]
    service_label: str = "service"
    fallback_service_label: str = "job"
    auth: Literal["none", "basic", "bearer"] = "none"
    username: str | None = None
    # The whole exchange (connect, headers and body), not each read: see core.outside.
    timeout_seconds: Annotated[float, Field(gt=0, le=120)] = 5.0
    cache_seconds: Annotated[float, Field(ge=0, le=3600)] = 5.0
    max_response_bytes: Annotated[int, Field(ge=1024, le=1024**3)] = 8 * 1024 * 1024
    max_field_chars: Annotated[int, Field(ge=16, le=100_000)] = 500

    _name = field_validator("name")(_safe_source_name)

    @model_validator(mode="after")
    def _basic_needs_a_user(self) -> AlertmanagerSourceConfig:
        if self.auth == "basic" and not self.username:
            raise ValueError(f"incident source {self.name!r}: auth = 'basic' needs a username")
        return self

    @property
    def secret_name(self) -> str:
        """The keychain entry (and, upper-cased, the INCIDENT_DESK_* variable) holding its password or token."""
        return f"source-{self.name}"


def _source_kind(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("kind") or "folder")
    return str(getattr(value, "kind", "folder"))


IncidentSourceConfig = Annotated[
    Annotated[FolderSourceConfig, Tag("folder")] | Annotated[AlertmanagerSourceConfig, Tag("alertmanager")],
    Discriminator(_source_kind),
]


def check_unique_names(sources: list[Any]) -> list[Any]:
    names = [source.name for source in sources]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"incident source name(s) {', '.join(map(repr, twice))} used more than once")
    return sources


def glob_root(pattern: str) -> Path:
    """The fixed directory part of a glob: everything before the first component with a wildcard."""
    parts = Path(pattern).parts
    fixed: list[str] = []
    for part in parts[:-1]:
        if has_magic(part):
            break
        fixed.append(part)
    return Path(os.path.normpath(Path(*fixed))) if fixed else Path("/")


def within(path: Path, root: Path) -> bool:
    path, root = Path(os.path.normpath(path)), Path(os.path.normpath(root))
    return path == root or root in path.parents


class FilesLogConfig(BaseModel):
    """Files matched by globs, read as one log, oldest rotation first; gzip files decompressed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["files"]
    paths: Annotated[list[str], Field(min_length=1)]
    roots: list[Path] = Field(default_factory=list, description="Directories the files must resolve beneath")
    max_bytes: Annotated[int, Field(ge=1024)] = 512 * 1024 * 1024

    @model_validator(mode="after")
    def _globs_stay_in_their_roots(self) -> FilesLogConfig:
        roots = self.allowed_roots
        for pattern in self.paths:
            if not Path(pattern).is_absolute():
                raise ValueError(f"log path {pattern!r} is relative: give an absolute glob")
            if not any(within(glob_root(pattern), root) for root in roots):
                raise ValueError(f"log path {pattern!r} reaches outside the allowed roots {[str(r) for r in roots]}")
        return self

    @property
    def allowed_roots(self) -> list[Path]:
        """The configured roots, else the fixed directory part of each glob."""
        return list(self.roots) or [glob_root(pattern) for pattern in self.paths]


class CommandLogConfig(BaseModel):
    """Any argv, no shell; ``{since}``/``{until}`` (RFC 3339) and the other placeholders filled per incident."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["command"]
    argv: Annotated[list[str], Field(min_length=1)]
    cwd: Path | None = None
    pass_env: list[str] = Field(
        default_factory=list, description="Variables of the desk's environment the command also gets, by name"
    )
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 30.0
    max_bytes: Annotated[int, Field(ge=1024)] = 64 * 1024 * 1024
    cache_seconds: Annotated[float, Field(ge=0, le=86_400)] = 60.0
    lookback_minutes: Annotated[float, Field(ge=0)] = DEFAULT_LOOKBACK_MINUTES

    _pass_env_names = field_validator("pass_env")(check_pass_env)

    _placeholders_are_known = field_validator("argv")(check_argv_placeholders)


class JournaldLogConfig(BaseModel):
    """A systemd unit's journal through ``journalctl`` for the incident's window (a command log underneath)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["journald"]
    unit: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9@_.:\\-]+$")]
    directory: Path | None = None
    file: Path | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 30.0
    max_bytes: Annotated[int, Field(ge=1024)] = 64 * 1024 * 1024
    cache_seconds: Annotated[float, Field(ge=0, le=86_400)] = 60.0
    lookback_minutes: Annotated[float, Field(ge=0)] = DEFAULT_LOOKBACK_MINUTES

    def as_command(self) -> CommandLogConfig:
        argv = ["journalctl", "--no-pager", "--output=short-iso", f"--unit={self.unit}"]
        argv += ["--since=@{since_epoch}", "--until=@{until_epoch}"]
        if self.directory is not None:
            argv.append("--directory=" + _literal(str(self.directory)))
        if self.file is not None:
            argv.append("--file=" + _literal(str(self.file)))
        return CommandLogConfig(
            kind="command",
            argv=argv,
            timeout_seconds=self.timeout_seconds,
            max_bytes=self.max_bytes,
            cache_seconds=self.cache_seconds,
            lookback_minutes=self.lookback_minutes,
        )


def _literal(text: str) -> str:
    """``text`` as an argv word that formatting leaves as it is."""
    return text.replace("{", "{{").replace("}", "}}")


LogSourceConfig = Annotated[
    Annotated[FilesLogConfig, Tag("files")]
    | Annotated[CommandLogConfig, Tag("command")]
    | Annotated[JournaldLogConfig, Tag("journald")],
    Discriminator(lambda value: str(value.get("kind") if isinstance(value, dict) else getattr(value, "kind", ""))),
]


def window_values(
    service: str, incident_id: str, opened: datetime, until: datetime, lookback_minutes: float
) -> dict[str, str]:
    """The placeholders of a command log for one incident: its opened time minus the look-back, up to now."""
    from datetime import timedelta

    return placeholder_values(service, incident_id, opened - timedelta(minutes=lookback_minutes), until)
