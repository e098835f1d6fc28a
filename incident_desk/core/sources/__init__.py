"""Where incidents and their logs come from: folder layouts, Alertmanager, and per-service log sources.

:class:`IncidentSources` puts several sources behind the one interface the features already use on a
:class:`~incident_desk.core.incidents.DataFolder`. Ids never collide: a non-folder source's ids start with its name, and
an id served twice (two folders) is skipped with the reason. A source that is down is one named problem in the
listing and a named error for its own incidents, while every other source keeps serving.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import BinaryIO

from incident_desk.core.incidents import DataFolder, Incident, Listing, LogUnavailable, Problem, UnknownIncident
from incident_desk.core.names import INCIDENT_ID, is_safe_name
from incident_desk.core.sources.alertmanager import AlertmanagerSource, SourceDown, SourceLoading
from incident_desk.core.sources.config import (
    AlertmanagerSourceConfig,
    CommandLogConfig,
    FilesLogConfig,
    FolderSourceConfig,
    JournaldLogConfig,
)
from incident_desk.core.sources.logs import CommandLog, FilesLog, LogSourceError
from incident_desk.core.sources.spool import DEFAULT_MAX_BYTES as DEFAULT_SPOOL_BYTES
from incident_desk.core.sources.spool import Spool

__all__ = ["IncidentSources", "SourceDown", "SourceLoading", "SourceUnavailable"]

SecretLookup = Callable[[str], str | None]


class SourceUnavailable(LogUnavailable):
    """An incident whose source is down: named, so a client knows it is the source and not the id."""

    def __init__(self, incident_id: str, reason: str) -> None:
        super().__init__(incident_id, reason)
        self.args = (f"Incident {incident_id} cannot be served: {reason}",)

    def __str__(self) -> str:
        return str(self.args[0])


class _Folder:
    kind = "folder"

    def __init__(self, name: str, folder: DataFolder) -> None:
        self.name = name
        self.folder = folder

    def describe(self) -> str:
        return f"folder {self.name!r} at {self.folder.root}"


class IncidentSources:
    """Every configured incident source behind the desk's read interface; runbooks from the data directory."""

    def __init__(
        self,
        data: DataFolder,
        sources: list[FolderSourceConfig | AlertmanagerSourceConfig] | None = None,
        logs: Mapping[str, FilesLogConfig | CommandLogConfig | JournaldLogConfig] | None = None,
        *,
        secret: SecretLookup = lambda _name: None,
        spool_max_bytes: int = DEFAULT_SPOOL_BYTES,
    ) -> None:
        self.data = data
        self.root = data.root
        self.sources: list[_Folder | AlertmanagerSource] = []
        for config in sources or [FolderSourceConfig()]:
            if isinstance(config, FolderSourceConfig):
                same = config.path is None or config.path == data.root
                folder = data if same else DataFolder(config.path or data.root, max_file_bytes=data.max_file_bytes)
                self.sources.append(_Folder(config.name, folder))
            else:
                self.sources.append(AlertmanagerSource(config, functools.partial(secret, config.secret_name)))
        only = self.sources[0] if len(self.sources) == 1 else None
        self._only_the_data_directory = isinstance(only, _Folder) and only.name == "folder" and only.folder is data
        self.spool = Spool(spool_max_bytes)  # its directory is made on first use
        self._answered: dict[str, bool] = {}  # each outside source: whether its last look succeeded
        self.logs: dict[str, FilesLog | CommandLog] = {
            service: FilesLog(service, config, self.spool)
            if isinstance(config, FilesLogConfig)
            else CommandLog(service, config, self.spool)
            for service, config in (logs or {}).items()
        }

    def listing(self, wait: float | None = None) -> Listing:
        """All sources' incidents, the data directory's runbooks, and every problem, each source asked once.

        Blocks (call it off the event loop) for at most a source's deadline, or ``wait`` seconds for a fetch
        another request has under way: a source still loading then is a problem that says so."""
        if self._only_the_data_directory:
            return self.data.listing()  # the default: exactly the folder layout's view, at its cost
        incidents: dict[str, Incident] = {}
        problems: list[Problem] = []
        data_listing: Listing | None = None
        for source in self.sources:
            if isinstance(source, _Folder):
                listed = source.folder.listing()
                if source.folder is self.data:
                    data_listing = listed
                found = listed.incidents
                if source.name != "folder":
                    found = {key: dataclasses.replace(value, source=source.name) for key, value in found.items()}
                problems.extend(listed.problems)
            else:
                try:
                    found = source.incidents(wait)
                except SourceDown as exc:
                    self._answered[source.name] = False
                    problems.append(Problem(f"source {source.name}", str(exc)))
                    continue
                self._answered[source.name] = True
            for key, incident in found.items():
                if key in incidents:
                    problems.append(Problem(f"{source.name}/{key}", f"id already served by {incidents[key].source}"))
                else:
                    incidents[key] = incident
        if data_listing is None:
            data_listing = self.data.listing()
            problems.extend(data_listing.problems)
        return Listing(incidents, data_listing.runbook_services, tuple(problems))

    def waits_on_sources(self, incident_id: str | None = None) -> bool:
        """Whether a look (at everything, or at this incident) may wait on an outside source, for its deadline."""
        return any(
            isinstance(source, AlertmanagerSource) and (incident_id is None or incident_id.startswith(source.id_prefix))
            for source in self.sources
        )

    def cached_listing(self) -> Listing | None:
        """The data directory's last view while fresh, when it is the only source; else None (look again)."""
        return self.data.cached_listing() if self._only_the_data_directory else None

    def open_listed_log(self, incident_id: str) -> BinaryIO | None:
        """The data directory's log of a listed incident without looking again, when it is the only source."""
        return self.data.open_listed_log(incident_id) if self._only_the_data_directory else None

    def incidents(self) -> list[Incident]:
        incidents = self.listing().incidents
        return [incidents[key] for key in sorted(incidents)]

    def incident(self, incident_id: str) -> Incident:
        """The incident, asking only the sources that could serve its id, in order (the first serving it wins, as
        in :meth:`listing`): a folder incident never waits on an Alertmanager, whose ids all start with its name."""
        if not is_safe_name(incident_id, INCIDENT_ID):
            raise UnknownIncident(incident_id)
        unavailable: SourceUnavailable | None = None
        for source in self.sources:
            if isinstance(source, _Folder):
                found = source.folder.listing().incidents.get(incident_id)
                if found is not None:
                    return found if source.name == "folder" else dataclasses.replace(found, source=source.name)
            elif incident_id.startswith(source.id_prefix):
                try:
                    served = source.incidents().get(incident_id)
                except SourceLoading as exc:
                    unavailable = unavailable or SourceUnavailable(incident_id, f"its source is still loading: {exc}")
                except SourceDown as exc:
                    unavailable = unavailable or SourceUnavailable(incident_id, f"its source is down: {exc}")
                else:
                    if served is not None:
                        return served
        if unavailable is not None:
            raise unavailable
        raise UnknownIncident(incident_id)

    def alertmanager_of(self, incident: Incident) -> AlertmanagerSource | None:
        """The Alertmanager serving ``incident``; None for a folder incident (nothing there to silence)."""
        for source in self.sources:
            if isinstance(source, AlertmanagerSource) and source.name == incident.source:
                return source
        return None

    def open_log(self, incident_id: str) -> BinaryIO:
        """The incident's own log (folder) or its service's configured log source, as one readable file."""
        incident = self.incident(incident_id)
        for source in self.sources:
            if isinstance(source, _Folder) and source.name == incident.source:
                return source.folder.open_log(incident_id)
        return self.service_log(incident_id, incident.service, incident.opened)

    def service_log(self, incident_id: str, service: str, opened: datetime) -> BinaryIO:
        log_source = self.logs.get(service)
        if log_source is None:
            raise LogUnavailable(
                incident_id, f"no log source is configured for service {service} ([services.{service}.logs])"
            )
        try:
            if isinstance(log_source, FilesLog):
                return log_source.open()
            return log_source.open(incident_id, opened)
        except LogSourceError as exc:
            raise LogUnavailable(incident_id, str(exc)) from None
        except OSError as exc:
            raise LogUnavailable(incident_id, exc.strerror or exc.__class__.__name__) from None

    def problems(self) -> list[Problem]:
        return list(self.listing().problems)

    def runbook_services(self) -> list[str]:
        return self.data.runbook_services()

    def runbook(self, service: str) -> str:
        return self.data.runbook(service)

    def services(self, extra: list[str] | None = None, wait: float | None = None) -> list[str]:
        listing = self.listing(wait)
        names = set(self.data.services(extra=extra)) | {i.service for i in listing.incidents.values()}
        return sorted(names | set(self.logs))

    def health(self) -> dict[str, bool]:
        """Each source's state without asking anyone: a folder is up while it is a directory, an outside source
        by its last look (one never looked at yet is left out rather than guessed)."""
        states: dict[str, bool] = {}
        for source in self.sources:
            if isinstance(source, _Folder):
                states[source.name] = source.folder.root.is_dir()
            elif source.name in self._answered:
                states[source.name] = self._answered[source.name]
        return states

    def check(self) -> list[tuple[bool, str, str]]:
        """Each source asked once, for ``doctor``: (ok, what, detail)."""
        checks = []
        for source in self.sources:
            if isinstance(source, _Folder):
                listed = source.folder.listing()
                ok = source.folder.root.is_dir()
                checks.append(
                    (ok, f"incident source {source.name}", f"{source.describe()}: {len(listed.incidents)} incidents")
                )
            else:
                try:
                    found = source.incidents()
                except SourceDown as exc:
                    checks.append((False, f"incident source {source.name}", str(exc)))
                else:
                    checks.append((True, f"incident source {source.name}", f"{source.describe()}: {len(found)} firing"))
        return checks
