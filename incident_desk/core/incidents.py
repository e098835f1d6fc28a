"""The incident desk's data: incidents, their raw logs, and per-service runbooks, read from a directory.

Layout (documented in docs/data.md)::

    <data_dir>/incidents/<INCIDENT-ID>/incident.toml   title, service, severity, status, opened
                                                       (and, once resolved, resolution)
    <data_dir>/incidents/<INCIDENT-ID>/log.txt         the raw log, any size
    <data_dir>/runbooks/<service>.md                   one Markdown runbook per service

Entries are re-read when their files change (``incident.toml`` or ``log.txt``), so incidents filed while the desk
runs show up without a restart: within ``freshness_seconds`` (one second in the desk's settings), because the
directory is checked for changes at most that often and every request in between shares the last check. A
malformed entry is reported (``problems``) and skipped; it never takes the rest of the desk down. Every file is
opened through :mod:`core.datafiles`: nothing is served from outside the data directory, a FIFO or device is
never waited on, and incident files and runbooks are read only up to a size limit.

A scan never holds a lock: each one builds a fresh snapshot and publishes it in one assignment, so a request
never waits for another request's scan.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from importlib import resources
from pathlib import Path
from time import monotonic
from typing import Any, BinaryIO

import structlog

from incident_desk.core import errors
from incident_desk.core.datafiles import DESCRIPTORS_SUPPORTED, DataRoot, Directory, Refused
from incident_desk.core.names import INCIDENT_ID, SERVICE_NAME, is_safe_name
from incident_desk.core.neighbours.untrusted import masked_line, one_line

log = structlog.get_logger(__name__)

CLOSED_STATUSES = frozenset({"resolved", "closed"})
METADATA_FILE = "incident.toml"
LOG_FILE = "log.txt"
INCIDENTS_DIR = "incidents"
RUNBOOKS_DIR = "runbooks"
RUNBOOK_SUFFIX = ".md"
DEFAULT_MAX_FILE_BYTES = 1024 * 1024
MAX_RESOLUTION_CHARS = 2000


class DataError(errors.IncidentDeskError):
    """What the data (incidents, logs, runbooks) could not give; messages are safe to show a client."""


class UnknownIncident(DataError, errors.NotFound):
    def __init__(self, incident_id: str) -> None:
        super().__init__(f"No such incident: {errors.echoed(incident_id, 'incidentId')}")
        self.incident_id = incident_id


class UnknownService(DataError, errors.NotFound):
    def __init__(self, service: str) -> None:
        super().__init__(f"No such service: {errors.echoed(service, 'service')}")
        self.service = service


class RunbookMissing(UnknownService):
    """A service the desk knows (an incident, a restart action or a log source names it) with no runbook file."""

    def __init__(self, service: str) -> None:
        shown = errors.echoed(service, "service")
        DataError.__init__(self, f"No runbook for {shown} ({RUNBOOKS_DIR}/{shown}{RUNBOOK_SUFFIX} is missing)")
        self.service = service


class LogUnavailable(DataError, errors.Unavailable):
    """An incident's log could not be read (gone, unreadable, refused) after the desk listed the incident."""

    def __init__(self, incident_id: str, reason: str) -> None:
        super().__init__(f"Log of {incident_id} cannot be read: {reason}")
        self.incident_id = incident_id
        self.reason = reason


class RunbookUnavailable(DataError, errors.Unavailable):
    """A runbook that exists but is refused (not a regular file, too big, leads outside) or cannot be read."""

    def __init__(self, service: str, reason: str) -> None:
        super().__init__(f"Runbook of {service} cannot be read: {reason}")
        self.service = service
        self.reason = reason


@dataclass(frozen=True)
class Incident:
    id: str
    title: str
    service: str
    severity: str
    status: str
    opened: datetime
    source: str = "folder"  # the incident source that serves it (core/sources)
    expression: str | None = None  # an alert's own PromQL (its generator URL's g0.expr), drawn beside the metrics
    # An Alertmanager alert's labels (what a silence matches on) and the silences muting it now.
    labels: tuple[tuple[str, str], ...] = ()
    silenced_by: tuple[str, ...] = ()
    # What fixed it, when the source says (a folder incident's ``resolution = "..."``); the journal's resolve acts too.
    resolution: str = ""

    @property
    def is_open(self) -> bool:
        return self.status.lower() not in CLOSED_STATUSES


@dataclass(frozen=True)
class Problem:
    """A data-directory entry that was skipped, and why."""

    entry: str
    reason: str


@dataclass(frozen=True)
class Listing:
    """One consistent view of the data directory: incidents by id, runbook services, skipped entries."""

    incidents: dict[str, Incident]
    runbook_services: tuple[str, ...]
    problems: tuple[Problem, ...]

    def open_incident_ids(self) -> list[str]:
        return [key for key in sorted(self.incidents) if self.incidents[key].is_open]


# Per directory, each entry's name and the change keys of its files; or why the directory cannot be listed.
_DirectorySignature = tuple[tuple[Any, ...], ...] | str
_Signature = tuple[_DirectorySignature, _DirectorySignature]
_EMPTY = Listing({}, (), ())
_NEVER = float("-inf")


def bundled_sample_data() -> Path:
    """The sample desk shipped inside the package (and inside frozen executables)."""
    return Path(str(resources.files("incident_desk") / "data" / "sample"))


def _reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def _change_key(directory: Directory, *names: str, content: bool = True) -> tuple[int, ...]:
    """What changes when the file at ``names`` is edited (``content``) or only when it is replaced, linked or
    deleted; (-1, ...) when there is none. Never trusted for anything but noticing a change."""
    try:
        found = directory.stat(*names)
    except (OSError, ValueError):
        return (-1, -1, -1, -1) if content else (-1, -1)
    identity = (found.st_dev, found.st_ino)
    return (found.st_mtime_ns, found.st_size, *identity) if content else identity


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


class _Vanished(errors.NotFound):
    """An incident directory removed between listing the folder and opening it: gone, not a problem to report."""


class DataFolder:
    """Read access to one data directory. Thread-safe and lock-free; cheap to call on every request.

    ``freshness_seconds``: how long a check of the directory stands before the next request checks again (0:
    every call checks, as the doctor wants).
    """

    def __init__(
        self,
        root: Path,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        use_descriptors: bool = DESCRIPTORS_SUPPORTED,
        freshness_seconds: float = 0.0,
    ) -> None:
        self.root = root
        self.max_file_bytes = max_file_bytes
        self.freshness_seconds = freshness_seconds
        self._data = DataRoot(root, use_descriptors=use_descriptors)
        # When the directory was last checked, the signature found, and the scan made for it; replaced together
        # in one assignment.
        self._current: tuple[float, _Signature | None, Listing] = (_NEVER, None, _EMPTY)

    def _directory_signature(self, name: str, *files: str) -> _DirectorySignature:
        try:
            with self._data.directory([name]) as directory:
                if not files:
                    return tuple(sorted((entry, *_change_key(directory, entry)) for entry in directory.names()))
                return tuple(
                    sorted(
                        (
                            entry,
                            *_change_key(directory, entry, METADATA_FILE),
                            *_change_key(directory, entry, LOG_FILE, content=False),
                        )
                        for entry in directory.names()
                    )
                )
        except FileNotFoundError:
            return ()
        except Refused as exc:
            return str(exc)
        except (OSError, ValueError) as exc:
            return f"cannot be listed: {_reason(exc) if isinstance(exc, OSError) else exc}"

    def listing(self) -> Listing:
        """The current view, re-scanned only when an entry changed. Incidents filed meanwhile show up here.

        The log counts too: an incident whose log.txt is written after its incident.toml (or deleted, or
        re-linked) must be re-read, not stay skipped or listed until the metadata happens to change. Its identity,
        not its size, so that a log being appended to does not make every request re-parse every incident.

        Checking lists both directories and stats every entry, so it is done at most once per
        ``freshness_seconds``: requests in between get the last view without touching the disk.
        """
        cached = self.cached_listing()
        if cached is not None:
            return cached
        _, scanned_for, previous = self._current
        checking_since = monotonic()
        signature = (
            self._directory_signature(INCIDENTS_DIR, METADATA_FILE, LOG_FILE),
            self._directory_signature(RUNBOOKS_DIR),
        )
        if signature == scanned_for:
            self._current = (checking_since, signature, previous)
            return previous
        fresh = self._scan(signature, self._parsed_before(scanned_for, previous))
        for problem in fresh.problems:
            if problem not in previous.problems:
                log.warning("skipped data entry", entry=problem.entry, reason=problem.reason, root=str(self.root))
        self._current = (checking_since, signature, fresh)
        return fresh

    def cached_listing(self) -> Listing | None:
        """The last view while it is within ``freshness_seconds``, else None; never touches the disk, so an
        event loop may call it and go to a worker thread for :meth:`listing` only when it gets None."""
        checked_at, _, previous = self._current
        return previous if monotonic() - checked_at < self.freshness_seconds else None

    @staticmethod
    def _parsed_before(signature: _Signature | None, listing: Listing) -> dict[str, tuple[Any, Incident | Problem]]:
        """What the last scan made of each incident entry (the incident or why it was skipped), with the entry's
        change key then: an entry whose key is the same now is not parsed again."""
        if signature is None or isinstance(signature[0], str):
            return {}
        problems = {problem.entry: problem for problem in listing.problems}
        parsed: dict[str, tuple[Any, Incident | Problem]] = {}
        for name, *change in signature[0]:
            outcome = listing.incidents.get(name) or problems.get(f"{INCIDENTS_DIR}/{name}")
            if outcome is not None:
                parsed[name] = (change, outcome)
        return parsed

    def _scan(self, signature: _Signature, parsed_before: dict[str, tuple[Any, Incident | Problem]]) -> Listing:
        """The view for ``signature``. An incident entry whose change key is what it was at the last scan keeps
        what that scan made of it (the whole view is kept on the same terms when no key changed): a desk of ten
        thousand incidents with one being filed re-reads that one, not all of them (0.1 s, not 1.7 s)."""
        incidents_signature, runbooks_signature = signature
        incidents: dict[str, Incident] = {}
        problems: list[Problem] = []
        if isinstance(incidents_signature, str):
            problems.append(Problem(INCIDENTS_DIR, incidents_signature))
        else:
            for name, *change in incidents_signature:
                entry = f"{INCIDENTS_DIR}/{name}"
                if not is_safe_name(name, INCIDENT_ID):
                    problems.append(Problem(entry, "not a valid incident id"))
                    continue
                kept = parsed_before.get(name)
                if kept is not None and kept[0] == change:
                    if isinstance(kept[1], Problem):
                        problems.append(kept[1])
                    else:
                        incidents[name] = kept[1]
                    continue
                try:
                    incidents[name] = self._parse_incident(name)
                except _Vanished:
                    log.debug("data entry removed while the directory was read", entry=entry)
                except ValueError as exc:
                    problems.append(Problem(entry, str(exc)))
        services: list[str] = []
        if isinstance(runbooks_signature, str):
            problems.append(Problem(RUNBOOKS_DIR, runbooks_signature))
        else:
            for name, *_ in runbooks_signature:
                service = name.removesuffix(RUNBOOK_SUFFIX)
                if service == name:
                    continue
                problem = self._runbook_problem(name, service)
                if problem is None:
                    services.append(service)
                elif problem:
                    problems.append(Problem(f"{RUNBOOKS_DIR}/{name}", problem))
        return Listing(incidents, tuple(sorted(services)), tuple(problems))

    def _parse_incident(self, name: str) -> Incident:
        """The incident in ``incidents/<name>``; ValueError says why it is skipped."""
        try:
            with self._data.directory([INCIDENTS_DIR, name]):
                pass
        except Refused as exc:
            raise ValueError(str(exc)) from None
        except FileNotFoundError:
            raise _Vanished from None
        except OSError as exc:
            raise ValueError(f"cannot be opened: {_reason(exc)}") from None
        try:
            raw = self._data.read_bytes([INCIDENTS_DIR, name, METADATA_FILE], max_bytes=self.max_file_bytes)
            meta = tomllib.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            raise ValueError(f"missing {METADATA_FILE}") from None
        except Refused as exc:
            raise ValueError(f"{METADATA_FILE} {exc}") from None
        except OSError as exc:
            raise ValueError(f"{METADATA_FILE} is unreadable: {_reason(exc)}") from None
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
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
        resolution = meta.get("resolution", "")
        if not isinstance(resolution, str):
            raise ValueError("resolution must be a string")
        try:
            self._data.open_file([INCIDENTS_DIR, name, LOG_FILE]).close()
        except FileNotFoundError:
            raise ValueError(f"missing {LOG_FILE}") from None
        except Refused as exc:
            raise ValueError(f"{LOG_FILE} {exc}") from None
        except OSError as exc:
            raise ValueError(f"{LOG_FILE} cannot be read: {_reason(exc)}") from None
        return Incident(
            id=name,
            title=masked_line(meta["title"].strip()),
            service=service,
            severity=one_line(meta["severity"].strip()),
            status=one_line(meta["status"].strip()),
            opened=opened,
            resolution=masked_line(resolution.strip(), MAX_RESOLUTION_CHARS),
        )

    def _runbook_problem(self, name: str, service: str) -> str | None:
        """Why ``runbooks/<name>`` is not offered; None when it is, "" when it vanished meanwhile."""
        if not is_safe_name(service, SERVICE_NAME):
            return "not a valid service name"
        try:
            self._data.open_file([RUNBOOKS_DIR, name], max_bytes=self.max_file_bytes).close()
        except FileNotFoundError:
            return ""
        except Refused as exc:
            return str(exc)
        except OSError as exc:
            return f"cannot be read: {_reason(exc)}"
        return None

    def incidents(self) -> list[Incident]:
        """All incidents, sorted by id."""
        incidents = self.listing().incidents
        return [incidents[key] for key in sorted(incidents)]

    def incident(self, incident_id: str) -> Incident:
        if not is_safe_name(incident_id, INCIDENT_ID):
            raise UnknownIncident(incident_id)
        try:
            return self.listing().incidents[incident_id]
        except KeyError:
            raise UnknownIncident(incident_id) from None

    def open_log(self, incident_id: str) -> BinaryIO:
        """An incident's log, opened now and judged as opened: read it through this handle, never by its path."""
        self.incident(incident_id)
        return self._open_log_file(incident_id)

    def open_listed_log(self, incident_id: str) -> BinaryIO | None:
        """Like :meth:`open_log` for an incident the last view listed while that view is fresh; None otherwise.

        Never lists a directory, so an event loop may call it (opening is non-blocking and judged by ``fstat``).
        """
        listing = self.cached_listing()
        if listing is None or incident_id not in listing.incidents:
            return None
        return self._open_log_file(incident_id)

    def _open_log_file(self, incident_id: str) -> BinaryIO:
        try:
            return self._data.open_file([INCIDENTS_DIR, incident_id, LOG_FILE])
        except Refused as exc:
            raise LogUnavailable(incident_id, f"{LOG_FILE} {exc}") from None
        except OSError as exc:
            raise LogUnavailable(incident_id, _reason(exc)) from None

    def problems(self) -> list[Problem]:
        return list(self.listing().problems)

    def runbook_services(self) -> list[str]:
        return list(self.listing().runbook_services)

    def runbook(self, service: str) -> str:
        if not is_safe_name(service, SERVICE_NAME):
            raise UnknownService(service)
        name = f"{service}{RUNBOOK_SUFFIX}"
        try:
            raw = self._data.read_bytes([RUNBOOKS_DIR, name], max_bytes=self.max_file_bytes)
        except (FileNotFoundError, NotADirectoryError):
            raise UnknownService(service) from None
        except Refused as exc:
            raise RunbookUnavailable(service, f"{name} {exc}") from None
        except OSError as exc:
            raise RunbookUnavailable(service, _reason(exc)) from None
        return raw.decode("utf-8", errors="replace")

    def services(self, extra: list[str] | None = None) -> list[str]:
        """Every service the desk knows: from runbooks, incidents and ``extra`` (configured actions)."""
        listing = self.listing()
        names = set(listing.runbook_services) | {incident.service for incident in listing.incidents.values()}
        names |= {name for name in extra or [] if is_safe_name(name, SERVICE_NAME)}
        return sorted(names)
