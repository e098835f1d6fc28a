"""Change events (deploys, config pushes, rollouts) from ``[[change_sources]]``, for the incident's window.

Kind ``files`` reads JSON-lines deploy records (``{"time": RFC 3339, "service": ..., "summary": ...}``), at most
``max_bytes`` from each file's end; kind ``command`` runs any argv (a ``git log``, a ``kubectl rollout history``)
through :mod:`core.runner` (no shell, a deadline, an output cap, the allowlisted environment) and reads each line
of its output as such a record or as ``<RFC 3339 time> <summary>``. Every field is untrusted text made one
visible, capped line; lines that are not records are counted, not fatal. Parsing is a split per line: linear.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from incident_desk.core import errors
from incident_desk.core.names import SERVICE_NAME, is_safe_name
from incident_desk.core.neighbours import runner
from incident_desk.core.neighbours.runner import check_pass_env
from incident_desk.core.neighbours.untrusted import one_line
from incident_desk.core.sources.config import check_argv_placeholders, placeholder_values

MAX_SUMMARY_CHARS = 300
MAX_EVENTS = 200


def _safe_name(name: str) -> str:
    if not is_safe_name(name, SERVICE_NAME):
        raise ValueError(f"change source name {name!r} is not valid: use letters, digits, . _ -")
    return name


class FilesChangeConfig(BaseModel):
    """JSON-lines deploy records in files (absolute paths); each record names its service, or ``service`` does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["files"]
    name: str
    paths: Annotated[list[Path], Field(min_length=1)]
    service: str | None = None
    max_bytes: Annotated[int, Field(ge=1024, le=1024**3)] = 4 * 1024 * 1024

    _name = field_validator("name")(_safe_name)

    @field_validator("paths")
    @classmethod
    def _absolute(cls, paths: list[Path]) -> list[Path]:
        for path in paths:
            if not path.is_absolute():
                raise ValueError(f"change file {str(path)!r} is relative: give an absolute path")
        return paths


class CommandChangeConfig(BaseModel):
    """Any argv, no shell; ``{service}``, ``{since}``, ``{until}`` and the other placeholders filled per incident."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["command"]
    name: str
    argv: Annotated[list[str], Field(min_length=1)]
    service: str | None = None
    cwd: Path | None = None
    pass_env: list[str] = Field(default_factory=list)
    timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 10.0
    max_bytes: Annotated[int, Field(ge=1024, le=256 * 1024 * 1024)] = 1024 * 1024

    _name = field_validator("name")(_safe_name)
    _pass_env_names = field_validator("pass_env")(check_pass_env)

    _placeholders_are_known = field_validator("argv")(check_argv_placeholders)


ChangeSourceConfig = Annotated[
    Annotated[FilesChangeConfig, Tag("files")] | Annotated[CommandChangeConfig, Tag("command")],
    Discriminator(lambda value: str(value.get("kind") if isinstance(value, dict) else getattr(value, "kind", ""))),
]


@dataclass(frozen=True)
class ChangeEvent:
    time: datetime
    service: str
    summary: str
    source: str


@dataclass(frozen=True)
class ChangeRead:
    """What the change sources said for one window: the events (oldest first) and each source's problem."""

    events: list[ChangeEvent]
    problems: list[str]
    skipped_lines: int


def read_changes(
    sources: Iterable[FilesChangeConfig | CommandChangeConfig],
    service: str,
    incident_id: str,
    start: datetime,
    end: datetime,
    cancel: threading.Event | None = None,
) -> ChangeRead:
    """Every source's events for ``service`` between ``start`` and ``end`` (blocks: call it off the event loop;
    ``cancel`` stops a command under way and the sources not yet read)."""
    events: list[ChangeEvent] = []
    problems: list[str] = []
    skipped = 0
    for source in sources:
        if cancel is not None and cancel.is_set():
            break
        if source.service is not None and source.service != service:
            continue
        try:
            lines = (
                _file_lines(source)
                if isinstance(source, FilesChangeConfig)
                else _command_lines(source, service, incident_id, start, end)
            )
        except ChangeSourceDown as exc:
            problems.append(str(exc))
            continue
        for line in lines:
            event = parse_record(line, source.name, source.service)
            if event is None:
                skipped += bool(line.strip())
            elif event.service == service and start <= event.time <= end:
                events.append(event)
    events.sort(key=lambda e: e.time)
    return ChangeRead(events[-MAX_EVENTS:], problems, skipped)


class ChangeSourceDown(errors.Unavailable):
    """A change source could not be read; the message names it and why."""


def _file_lines(source: FilesChangeConfig) -> list[str]:
    lines: list[str] = []
    for path in source.paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise ChangeSourceDown(f"change source {source.name!r}: cannot open {path}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - source.max_bytes)
            handle.seek(start)
            data = handle.read(source.max_bytes)
        text = data.decode("utf-8", errors="replace")
        if start > 0:
            text = text.partition("\n")[2]  # the first line read may be cut
        lines.extend(text.splitlines())
    return lines


def _command_lines(
    source: CommandChangeConfig,
    service: str,
    incident_id: str,
    start: datetime,
    end: datetime,
    cancel: threading.Event | None = None,
) -> list[str]:
    values = placeholder_values(service, incident_id, start, end)
    argv = [word.format_map(values) for word in source.argv]
    buffer = io.BytesIO()
    output = runner.HeadOutput(buffer, source.max_bytes)
    result = runner.run(
        argv,
        output,
        timeout=source.timeout_seconds,
        env=runner.child_environment(source.pass_env),
        cwd=source.cwd,
        cancel=cancel,
    )
    what = f"change source {source.name!r}"
    if result.launch_error:
        raise ChangeSourceDown(f"{what}: {result.launch_error}")
    if result.cancelled:
        raise ChangeSourceDown(f"{what}: cancelled with its request")
    if result.timed_out:
        raise ChangeSourceDown(f"{what}: the command did not finish within {source.timeout_seconds:g}s")
    if result.exit_status not in (0, None) and not result.cut:
        raise ChangeSourceDown(f"{what}: the command exited with status {result.exit_status}")
    text = buffer.getvalue().decode("utf-8", errors="replace")
    lines = text.splitlines()
    if result.cut and lines:
        lines.pop()  # the last line may be cut at the output cap
    return lines


def parse_record(line: str, source: str, default_service: str | None) -> ChangeEvent | None:
    """A JSON record, or ``<RFC 3339 time> <summary>``; None for anything else."""
    line = line.strip()
    if not line:
        return None
    if line.startswith("{"):
        try:
            record: Any = json.loads(line)
        except ValueError:
            return None
        if not isinstance(record, dict):
            return None
        when = _time(record.get("time") or record.get("timestamp"))
        service = record.get("service") or default_service
        summary = record.get("summary") or record.get("description") or record.get("version") or ""
    else:
        stamp, _, summary = line.partition(" ")
        when, service = _time(stamp), default_service
    if when is None or not isinstance(service, str) or not is_safe_name(service, SERVICE_NAME):
        return None
    return ChangeEvent(when, service, one_line(str(summary).strip() or "change", MAX_SUMMARY_CHARS), source)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
