"""Where incidents and their logs come from: folder layouts, Alertmanager, and per-service log sources.

:class:`IncidentSources` puts several sources behind the one interface the features already use on a
:class:`~incident_desk.core.incidents.DataFolder`. Ids never collide: a non-folder source's ids start with its name, and
an id served twice (two folders) is skipped with the reason. A source that is down is one named problem in the
listing and a named error for its own incidents, while every other source keeps serving.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import BinaryIO, Protocol

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
from incident_desk.core.sources.folder import FolderSource
from incident_desk.core.sources.logs import CommandLog, CommandSlots, FilesLog, LogSourceError
from incident_desk.core.sources.spool import DEFAULT_MAX_BYTES as DEFAULT_SPOOL_BYTES
from incident_desk.core.sources.spool import Spool

__all__ = ["FolderSource", "IncidentSource", "IncidentSources", "SourceDown", "SourceLoading", "SourceUnavailable"]

SecretLookup = Callable[[str], str | None]


class IncidentSource(Protocol):
    """What the desk asks of every incident source, so a new kind of source is one class and no branch elsewhere.

    ``name`` is what an incident's ``source`` says and what errors and problems name; ``kind`` says what it is.
    """

    name: str
    kind: str

    def describe(self) -> str:
        """The source for messages: its kind, name and where it is, never a secret."""
        ...

    def may_wait(self, incident_id: str | None = None) -> bool:
        """Whether a look (at everything, or at this id) may wait on something outside, for its deadline."""
        ...

    def look(self, wait: float | None = None) -> Listing:
        """Its incidents (each with ``source`` set to its name) and problems; SourceDown when it cannot answer,
        SourceLoading when another request's look is still under way after ``wait`` seconds."""
        ...

    def find(self, incident_id: str) -> Incident | None:
        """The incident if this source serves the id (SourceDown, SourceLoading); None otherwise."""
        ...

    def own_log(self, incident_id: str) -> BinaryIO | None:
        """The incident's own log, or None when its service's configured log source is to be read."""
        ...

    def forget(self, incident_id: str | None = None) -> None:
        """Drop whatever it cached about this id (or everything), so the next look is fresh."""
        ...

    def silencer(self) -> AlertmanagerSource | None:
        """Where its incidents' silences are made; None for a source with nothing to silence."""
        ...

    def known_up(self) -> bool | None:
        """Whether it is up, if that is known without asking anyone; None leaves it to its last look."""
        ...

    def check(self) -> tuple[bool, str]:
        """Asked once, for ``doctor``: whether it answered, and what it said."""
        ...


def _same_looks(before: list[Listing | str], now: list[Listing | str]) -> bool:
    """Whether every source answered with the very listing it gave last time (a cache's answer), or is down for
    the same reason."""
    return len(before) == len(now) and all(
        a is b if isinstance(a, Listing) else a == b for a, b in zip(before, now, strict=True)
    )


class SourceUnavailable(LogUnavailable):
    """An incident whose source is down: named, so a client knows it is the source and not the id."""

    def __init__(self, incident_id: str, reason: str) -> None:
        super().__init__(incident_id, reason)
        self.args = (f"Incident {incident_id} cannot be served: {reason}",)

    def __str__(self) -> str:
        return str(self.args[0])


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
        extra: list[IncidentSource] | None = None,
    ) -> None:
        self.data = data
        self.root = data.root
        self.sources: list[IncidentSource] = []
        self._data_source: IncidentSource | None = None  # the source reading the data directory itself, if any
        for config in sources or [FolderSourceConfig()]:
            if isinstance(config, FolderSourceConfig):
                same = config.path is None or config.path == data.root
                folder = data if same else DataFolder(config.path or data.root, max_file_bytes=data.max_file_bytes)
                source: IncidentSource = FolderSource(config.name, folder)
                if same and self._data_source is None:
                    self._data_source = source
            else:
                source = AlertmanagerSource(config, functools.partial(secret, config.secret_name))
            self.sources.append(source)
        self.sources.extend(extra or [])
        self._only_the_data_directory = (
            len(self.sources) == 1 and self.sources[0] is self._data_source and self.sources[0].name == "folder"
        )
        self.spool = Spool(spool_max_bytes)  # its directory is made on first use
        self._answered: dict[str, bool] = {}  # each outside source: whether its last look succeeded
        self._merged: tuple[list[Listing | str], Listing] | None = None  # the last looks, and their merge
        slots = CommandSlots()  # every service's log commands share the desk's bound
        self.logs: dict[str, FilesLog | CommandLog] = {
            service: FilesLog(service, config, self.spool)
            if isinstance(config, FilesLogConfig)
            else CommandLog(service, config, self.spool, slots)
            for service, config in (logs or {}).items()
        }

    def listing(self, wait: float | None = None) -> Listing:
        """All sources' incidents, the data directory's runbooks, and every problem, each source asked once.

        Blocks (call it off the event loop) for at most a source's deadline, or ``wait`` seconds for a fetch
        another request has under way: a source still loading then is a problem that says so."""
        if self._only_the_data_directory:
            return self.data.listing()  # the default: exactly the folder layout's view, at its cost
        looks: list[Listing | str] = []  # each source's answer, or why it is down
        for source in self.sources:
            try:
                looks.append(source.look(wait))
                self._answered[source.name] = True
            except SourceDown as exc:
                self._answered[source.name] = False
                looks.append(str(exc))
        if self._data_source is None:
            looks.append(self.data.listing())
        merged = self._merged
        if merged is not None and _same_looks(merged[0], looks):
            return merged[1]  # nothing changed: the same view, so what was made of it (a sorted page) holds
        incidents: dict[str, Incident] = {}
        problems: list[Problem] = []
        data_listing: Listing | None = None
        for source, listed in zip(self.sources, looks, strict=False):
            if isinstance(listed, str):
                problems.append(Problem(f"source {source.name}", listed))
                continue
            if source is self._data_source:
                data_listing = listed
            problems.extend(listed.problems)
            for key, incident in listed.incidents.items():
                if key in incidents:
                    problems.append(Problem(f"{source.name}/{key}", f"id already served by {incidents[key].source}"))
                else:
                    incidents[key] = incident
        if data_listing is None:
            last = looks[-1]
            assert isinstance(last, Listing)
            data_listing = last
            problems.extend(data_listing.problems)
        current = Listing(incidents, data_listing.runbook_services, tuple(problems))
        self._merged = (looks, current)
        return current

    def waits_on_sources(self, incident_id: str | None = None) -> bool:
        """Whether a look (at everything, or at this incident) may wait on an outside source, for its deadline."""
        return any(source.may_wait(incident_id) for source in self.sources)

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
            try:
                served = source.find(incident_id)
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
            silencer = source.silencer() if source.name == incident.source else None
            if silencer is not None:
                return silencer
        return None

    def forget(self, incident_id: str | None = None) -> None:
        """Every source drops what it cached about the id (or everything): the next look asks again."""
        for source in self.sources:
            source.forget(incident_id)

    def open_log(self, incident_id: str) -> BinaryIO:
        """The incident's own log (folder) or its service's configured log source, as one readable file."""
        incident = self.incident(incident_id)
        for source in self.sources:
            handle = source.own_log(incident_id) if source.name == incident.source else None
            if handle is not None:
                return handle
        return self.service_log(incident_id, incident.service, incident.opened)

    def service_log(self, incident_id: str, service: str, opened: datetime) -> BinaryIO:
        log_source = self.logs.get(service)
        if log_source is None:
            raise LogUnavailable(
                incident_id, f"no log source is configured for service {service} ([services.{service}.logs])"
            )
        try:
            return log_source.open_for(incident_id, opened)
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
            state = source.known_up()
            if state is None:
                state = self._answered.get(source.name)
            if state is not None:
                states[source.name] = state
        return states

    def check(self) -> list[tuple[bool, str, str]]:
        """Each source asked once, for ``doctor``: (ok, what, detail)."""
        checks = []
        for source in self.sources:
            ok, detail = source.check()
            checks.append((ok, f"incident source {source.name}", detail))
        return checks
