"""The incident desk's data: incidents, their raw logs, and per-service runbooks, read from a directory.

Layout (documented in the README)::

    <data_dir>/incidents/<INCIDENT-ID>/incident.toml   title, service, severity, status, opened
    <data_dir>/incidents/<INCIDENT-ID>/log.txt         the raw log, any size
    <data_dir>/runbooks/<service>.md                   one Markdown runbook per service

Entries are re-read when their files change (``incident.toml`` or ``log.txt``), so incidents filed while the desk
runs show up without a restart. A malformed entry is reported (``problems``) and skipped; it never takes the rest
of the desk down. Nothing is served from outside the data directory: a log or runbook that is a symlink leading
out of it is refused.
"""

from __future__ import annotations

import threading
import tomllib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from importlib import resources
from pathlib import Path

import structlog

from incident_desk.core.names import INCIDENT_ID, SERVICE_NAME, is_safe_name

log = structlog.get_logger(__name__)

CLOSED_STATUSES = frozenset({"resolved", "closed"})
METADATA_FILE = "incident.toml"
LOG_FILE = "log.txt"


class DeskError(Exception):
    """Base of the desk's domain errors; messages are safe to show a client."""


class UnknownIncident(DeskError):
    def __init__(self, incident_id: str) -> None:
        super().__init__(f"No such incident: {incident_id}")
        self.incident_id = incident_id


class UnknownService(DeskError):
    def __init__(self, service: str) -> None:
        super().__init__(f"No such service: {service}")
        self.service = service


class LogUnavailable(DeskError):
    """An incident's log could not be read (gone, unreadable) after the desk listed the incident."""

    def __init__(self, incident_id: str, reason: str) -> None:
        super().__init__(f"Log of {incident_id} cannot be read: {reason}")
        self.incident_id = incident_id
        self.reason = reason


@dataclass(frozen=True)
class Incident:
    id: str
    title: str
    service: str
    severity: str
    status: str
    opened: datetime
    log_path: Path

    @property
    def is_open(self) -> bool:
        return self.status.lower() not in CLOSED_STATUSES


@dataclass(frozen=True)
class Problem:
    """A data-directory entry that was skipped, and why."""

    entry: str
    reason: str


def bundled_sample_desk() -> Path:
    """The sample desk shipped inside the package (and inside frozen executables)."""
    return Path(str(resources.files("incident_desk") / "data" / "sample_desk"))


def _inside(root: Path, candidate: Path) -> bool:
    """True when ``candidate`` (symlinks resolved) stays under ``root``."""
    try:
        return candidate.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


def _content_key(path: Path) -> tuple[int, int]:
    """(mtime in ns, size) of ``path``, or (-1, -1) when it cannot be read: changes whenever it is edited."""
    try:
        stat = path.stat()
    except OSError:
        return -1, -1
    return stat.st_mtime_ns, stat.st_size


def _identity_key(path: Path) -> tuple[int, int]:
    """(device, inode) of the file ``path`` leads to, or (-1, -1) when there is none: changes when the file is
    created, deleted, replaced or re-linked, but not while it is appended to."""
    try:
        stat = path.stat()
    except OSError:
        return -1, -1
    return stat.st_dev, stat.st_ino


def _parse_incident(entry: Path, root: Path) -> Incident:
    """The incident in directory ``entry`` of the data directory ``root``; ValueError says why it is skipped."""
    meta_path = entry / METADATA_FILE
    try:
        meta = tomllib.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"missing {METADATA_FILE}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{METADATA_FILE} is unreadable: {exc}") from None
    missing = [key for key in ("title", "service", "severity", "status", "opened") if key not in meta]
    if missing:
        raise ValueError(f"{METADATA_FILE} lacks {', '.join(missing)}")
    service = meta["service"]
    if not isinstance(service, str) or not is_safe_name(service, SERVICE_NAME):
        raise ValueError(f"service {service!r} is not a valid service name")
    opened = opened_time(meta["opened"])
    for key in ("title", "severity", "status"):
        if not isinstance(meta[key], str) or not meta[key].strip():
            raise ValueError(f"{key} must be a non-empty string")
    log_path = entry / LOG_FILE
    if not log_path.is_file():
        raise ValueError(f"missing {LOG_FILE}")
    if not _inside(root, log_path):
        raise ValueError(f"{LOG_FILE} points outside the data directory")
    return Incident(
        id=entry.name,
        title=meta["title"].strip(),
        service=service,
        severity=meta["severity"].strip(),
        status=meta["status"].strip(),
        opened=opened,
        # Resolved now, so that re-pointing a symlink later cannot make the desk read a file it did not check.
        log_path=log_path.resolve(),
    )


def opened_time(value: object) -> datetime:
    """When an incident opened, always with a time zone: a time or date written without one is taken as UTC.

    TOML allows local date-times (``2026-11-29 10:58:12``) and dates; clients validate ``opened`` as an RFC 3339
    date-time, which requires an offset, so a naive value must never reach them as it is.
    """
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())  # a date alone reads as its midnight
        except ValueError:
            raise ValueError(f"opened {value!r} is not an ISO 8601 time") from None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime.combine(value, time.min, tzinfo=UTC)
    raise ValueError("opened must be a date-time, e.g. 2026-11-29T10:58:00Z")


class Desk:
    """Read access to one data directory. Thread-safe; cheap to call on every request."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._incidents_dir = root / "incidents"
        self._runbooks_dir = root / "runbooks"
        self._lock = threading.Lock()
        self._signature: tuple[tuple[str, int, int, int, int], ...] | None = None
        self._incidents: dict[str, Incident] = {}
        self._problems: list[Problem] = []

    def _current_signature(self) -> tuple[tuple[str, int, int, int, int], ...]:
        """Per entry: its name, the (mtime, size) of its metadata and the identity of the file its log leads to.

        The log counts too: an incident whose log.txt is written after its incident.toml (or deleted, or re-linked)
        must be re-read, not stay skipped or listed until the metadata happens to change. Its identity, not its
        size, so that a log being appended to does not make every request re-parse every incident.
        """
        if not self._incidents_dir.is_dir():
            return ()
        return tuple(
            sorted(
                (entry.name, *_content_key(entry / METADATA_FILE), *_identity_key(entry / LOG_FILE))
                for entry in self._incidents_dir.iterdir()
            )
        )

    def _refresh(self) -> None:
        signature = self._current_signature()
        with self._lock:
            if signature == self._signature:
                return
            incidents: dict[str, Incident] = {}
            problems: list[Problem] = []
            for name, *_ in signature:
                entry = self._incidents_dir / name
                if not entry.is_dir():
                    problems.append(Problem(f"incidents/{name}", "not a directory"))
                elif not is_safe_name(name, INCIDENT_ID) or not _inside(self._incidents_dir, entry):
                    problems.append(Problem(f"incidents/{name}", "not a valid incident id"))
                else:
                    try:
                        incidents[name] = _parse_incident(entry, self.root)
                    except ValueError as exc:
                        problems.append(Problem(f"incidents/{name}", str(exc)))
            for problem in problems:
                if problem not in self._problems:
                    log.warning("skipped data entry", entry=problem.entry, reason=problem.reason, root=str(self.root))
            self._incidents, self._problems, self._signature = incidents, problems, signature

    def incidents(self) -> list[Incident]:
        """All incidents, sorted by id."""
        self._refresh()
        return [self._incidents[key] for key in sorted(self._incidents)]

    def open_incident_ids(self) -> list[str]:
        return [incident.id for incident in self.incidents() if incident.is_open]

    def incident(self, incident_id: str) -> Incident:
        if not is_safe_name(incident_id, INCIDENT_ID):
            raise UnknownIncident(incident_id)
        self._refresh()
        try:
            return self._incidents[incident_id]
        except KeyError:
            raise UnknownIncident(incident_id) from None

    def problems(self) -> list[Problem]:
        self._refresh()
        return list(self._problems)

    def runbook_services(self) -> list[str]:
        if not self._runbooks_dir.is_dir():
            return []
        return sorted(
            path.stem
            for path in self._runbooks_dir.glob("*.md")
            if is_safe_name(path.stem, SERVICE_NAME) and _inside(self._runbooks_dir, path) and path.is_file()
        )

    def runbook(self, service: str) -> str:
        if not is_safe_name(service, SERVICE_NAME):
            raise UnknownService(service)
        path = self._runbooks_dir / f"{service}.md"
        if not _inside(self._runbooks_dir, path) or not path.is_file():
            raise UnknownService(service)
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            raise UnknownService(service) from None

    def services(self, extra: list[str] | None = None) -> list[str]:
        """Every service the desk knows: from runbooks, incidents and ``extra`` (configured actions)."""
        names = set(self.runbook_services()) | {incident.service for incident in self.incidents()}
        names |= {name for name in extra or [] if is_safe_name(name, SERVICE_NAME)}
        return sorted(names)
