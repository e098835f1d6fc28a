"""The desk as the feature modules see it: settings, data, journal, and the one async face of every read.

Features import this module, the core and ``client_features``; never the server factory and never each other.
Every read of incidents, logs, runbooks, sources and the journal a feature makes is an ``async`` method here,
which runs whatever blocks off the event loop and picks the worker threads: features never call blocking code
and never choose their own threading. A read that may wait on an outside source (an Alertmanager) runs in the
sources' own threads and never fills the default pool the stdio transport reads and writes through.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TypeVar

import anyio.to_thread
import structlog

from incident_desk.core import credentials
from incident_desk.core.acts import limits, runs
from incident_desk.core.acts.preview import SilenceTarget, covered_by_labels
from incident_desk.core.acts.service_actions import runbook_section
from incident_desk.core.incidents import (
    Incident,
    Listing,
    LogUnavailable,
    RunbookMissing,
    UnknownService,
)
from incident_desk.core.journal.activity import Event, Standing, state_of
from incident_desk.core.journal.audit import MAX_RECENT_DECISIONS, Decision, Journal
from incident_desk.core.journal.locks import Holder, Holding
from incident_desk.core.journal.memory import MemoryUnavailable, Postmortem, Remembered, Similar
from incident_desk.core.neighbours import metrics, outside
from incident_desk.core.search.sealed import LogPageRead, LogSearchRead
from incident_desk.core.sources import IncidentSources, silences
from incident_desk.core.sources.alertmanager import AlertmanagerSource
from incident_desk.memory_keeper import MemoryKeeper
from incident_desk.protocol.client_logging import ClientLogLevels
from incident_desk.settings.model import Settings, user_data_dir

if TYPE_CHECKING:
    from incident_desk.core.handoff.oncall import Calendars, OnCall
    from incident_desk.core.redaction.face import Redaction
    from incident_desk.core.search.cursors import CursorSeal
    from incident_desk.core.search.paging import TailWindow
    from incident_desk.core.sources.changes import ChangeRead

logger = structlog.get_logger(__name__)
# How to add the PostgreSQL journal's driver to an install made without it.
T = TypeVar("T")
# Logs up to this size are read on the caller's thread when the data directory's last look is fresh: reading and
# redacting them costs the loop about as much as a hop to a worker thread and back (docs/performance.md); beyond
# that the read dominates and a thread keeps the loop freer.
INLINE_LOG_MAX_BYTES = 4 * 1024
# What the first log read imports and compiles; until they are loaded, reads go to a worker thread.
_LOG_READERS = ("incident_desk.core.search.paging", "incident_desk.core.redaction.face")
# Reads that may wait on an outside source (each for at most its deadline) run in threads of their own: enough
# that every kind of request can wait at once (most only wait for one fetch already under way), never the
# default pool.
SOURCE_THREADS = 32
# Searches get their own threads, so a long one never holds the default pool the journal's writes use. RE2
# releases the interpreter lock while it scans, so these threads leave the event loop free.
SEARCH_THREADS = 2
# Change commands and files run in threads of their own, apart from the default pool and the outside calls'.
CHANGE_THREADS = 4
# How long a completion waits for a source another request is asking: a list to pick from must come quickly.
COMPLETION_WAIT_SECONDS = 0.5


class ApprovalStoreSlot(Protocol):
    """The out-of-band approvals' store (``approvals.out_of_band``), described here: importing it is a cycle."""

    base_url: str | None

    def page_base(self) -> str: ...


class NoSilences(Exception):
    """The incident has no Alertmanager: a folder incident has nothing to silence."""


@dataclass
class DeskApp:
    """What the feature modules share: settings, data, and the services built from them."""

    settings: Settings
    sources: IncidentSources
    journal: Journal
    sealing_keys: list[bytes] = field(default_factory=list)
    log_levels: ClientLogLevels = field(default_factory=ClientLogLevels)
    memory: MemoryKeeper | None = None
    # What "now" is for the handoff and the index watcher: tests fix it instead of sleeping.
    clock: Callable[[], datetime] = field(default=partial(datetime.now, UTC), repr=False, compare=False)
    # The out-of-band approvals pending on this desk (out_of_band.ApprovalStore), made on first use.
    approval_store: ApprovalStoreSlot | None = field(default=None, init=False, repr=False, compare=False)
    _readers_loaded: bool = field(default=False, init=False, repr=False)

    @property
    def desk_name(self) -> str:
        """Whose events the journal rows are: desks sharing a journal see only their own."""
        return self.journal.desk

    def has_alerts(self, incident: Incident) -> bool:
        """Whether the incident comes from an Alertmanager (a folder incident has nothing to silence)."""
        return self.sources.alertmanager_of(incident) is not None

    @property
    def data_root(self) -> Path:
        return self.sources.root

    def redactor(self, text: str) -> str:
        # Imported by the first log read, not at start: compiling the redaction rules would slow every start.
        from incident_desk.core.redaction.face import redact

        return redact(text) if self.settings.redact_secrets else text

    def load_search_stack(self) -> None:
        """Load what a first search or log read would: the redaction rules, RE2, the search engine, a pattern
        compiled and a small log searched, then numpy once nothing has run for a second (a search counts
        newlines with it where a line number needs them, and without it until it is loaded). Blocking: the stdio
        desk runs it in a thread once the client has its handshake answer
        (``server.LoadSearchStackAfterHandshake``), so the first call costs what the others do."""
        import tempfile

        from incident_desk.core.redaction.face import MASK
        from incident_desk.core.search import engine
        from incident_desk.core.search.pattern import compile_pattern

        with tempfile.TemporaryFile() as log:
            log.write(b"10:58:12 payments-api ERROR pool exhausted token=abc\n10:58:13 payments-api INFO ok\n" * 64)
            log.flush()
            for text, ignore_case in (("ERROR", False), ("pool|exhausted", True)):
                pattern = compile_pattern(text, ignore_case=ignore_case, mask=MASK)
                engine.search(log, pattern, limit=50, redaction=self.redaction, processes=0)
        self.redactor("warm: Authorization: Bearer abc.def.ghi")
        engine.load_numpy_when_quiet()

    @property
    def redaction(self) -> Redaction | None:
        """What searches redact before matching, with the triggers that let them skip clean lines."""
        from incident_desk.core.redaction.face import SECRETS

        return SECRETS if self.settings.redact_secrets else None

    @cached_property
    def cursors(self) -> CursorSeal:
        """Tags the log cursors this desk hands out, refuses any other: keyed by the shared sealing key when one
        is set, else by this installation's key in the user data dir (good across restarts)."""
        from incident_desk.core.search.cursors import CursorSeal, installation_key

        if self.sealing_keys:
            return CursorSeal(self.sealing_keys)
        try:
            return CursorSeal([installation_key(user_data_dir())])
        except OSError as exc:
            logger.warning("cursor key unavailable; cursors last as long as this process", problem=str(exc))
            return CursorSeal()

    @cached_property
    def calendars(self) -> Calendars:
        """The on-call calendars (``[oncall]`` and each service's), each read and cached on its own."""
        from incident_desk.core.handoff.oncall import Calendars

        return Calendars(self.settings.oncall, self.settings.service_oncall_calendar)

    async def on_call(self, at: datetime, services: list[str]) -> tuple[OnCall, list[tuple[str, OnCall]]]:
        """Who the desk's calendar has on call at ``at``, and each of ``services`` with a calendar of its own; each
        feed read in the outside calls' threads, for at most its deadline, all at once."""
        calendars = self.calendars
        own = [service for service in sorted(set(services)) if calendars.has_own(service)]
        found: dict[str | None, OnCall] = {}

        async def ask(service: str | None) -> None:
            found[service] = await self._outside(calendars.on_call, at, service)

        async with anyio.create_task_group() as group:
            for service in (None, *own):
                group.start_soon(ask, service)
        return found[None], [(service, found[service]) for service in own]

    async def journal_rows(self, limit: int) -> tuple[list[Event], list[Decision]]:
        """The newest ``limit`` incident events and restart or action decisions of this desk, oldest first."""

        def read() -> tuple[list[Event], list[Decision]]:
            return list(reversed(self.journal.activity(None, limit))), list(reversed(self.journal.recent(limit)))

        return await anyio.to_thread.run_sync(read)

    def services(self, wait: float | None = None) -> list[str]:
        return self.sources.services(extra=[*self.settings.services, *self.settings.service_actions], wait=wait)

    # The async face: every read a feature makes.

    async def listing(self, wait: float | None = None) -> Listing:
        """Every source's incidents, the runbooks, and every problem (a source down or still loading among them).
        The data directory's fresh view is served right here; a look at the disk or a source goes off the loop."""
        current = self.sources.cached_listing()
        if current is None:
            return await self._off_loop(self.sources.waits_on_sources(), self._listing_offered, wait)
        if self.memory is not None:
            self.memory.offer_listing(current.incidents)
        return current

    def _listing_offered(self, wait: float | None) -> Listing:
        """A fresh look, offered to the memory in the same worker thread: comparing 20,000 alerts with what was
        remembered of them is no work for the loop."""
        current = self.sources.listing(wait)
        if self.memory is not None:
            self.memory.offer_listing(current.incidents)
        return current

    async def incident(self, incident_id: str) -> Incident:
        """One incident (UnknownIncident, or SourceUnavailable when its source is down)."""
        found = await self._off_loop(self.sources.waits_on_sources(incident_id), self.sources.incident, incident_id)
        if self.memory is not None:
            self.memory.offer((found,))
        return found

    @staticmethod
    async def compute(func: Callable[[], T]) -> T:
        """CPU-bound work over many incidents (a listing of 20,000 alerts sorted and filtered) in a worker thread:
        it still holds the interpreter lock, but hands it back every few milliseconds, so the loop keeps answering
        (a ping) meanwhile."""
        return await anyio.to_thread.run_sync(func)

    async def known_services(self, wait: float | None = None) -> list[str]:
        return await self._off_loop(self.sources.waits_on_sources(), self.services, wait)

    async def runbook(self, service: str) -> str:
        """A service's runbook (UnknownService, RunbookMissing, RunbookUnavailable): a bounded read of the data
        directory, and, for a name without one, a look at the services (which may ask a source)."""
        return await self._off_loop(self.sources.waits_on_sources(), self._runbook, service)

    async def recent_decisions(self, limit: int) -> list[Decision]:
        return await anyio.to_thread.run_sync(self.journal.recent, limit)

    async def record_decision(self, decision: Decision) -> None:
        await anyio.to_thread.run_sync(self.journal.record, decision)

    async def record_event(self, event: Event) -> None:
        """Journal one act or note of an incident (``DuplicateApproval`` for an approval already used)."""
        await anyio.to_thread.run_sync(self.journal.record_event, event)
        if self.memory is not None:
            self.memory.acted_on(event.incident_id)

    def _keeper(self) -> MemoryKeeper:
        if self.memory is None:
            raise MemoryUnavailable("this desk keeps no incident memory")
        return self.memory

    async def remember_now(self, incident: Incident) -> Remembered:
        """Remember ``incident`` as it is now (off the loop) and return what the memory keeps of it."""
        return await anyio.to_thread.run_sync(self._keeper().remember_now, incident)

    async def similar_incidents(self, text: str, exclude: str | None, limit: int) -> list[Similar]:
        """Remembered incidents of this desk closest to ``text``, best first (MemoryUnavailable)."""
        return await anyio.to_thread.run_sync(self._keeper().memory.similar, text, exclude, limit)

    async def history_learnt(self, wait: float) -> int:
        """Wait up to ``wait`` seconds for the memory's start-up pass over every source (started now if it was
        not); how many incidents it has still to remember (0: the whole history is known)."""
        keeper = self._keeper()
        if await anyio.to_thread.run_sync(keeper.learnt, wait, abandon_on_cancel=True):
            return 0
        return max(keeper.pending, 1)

    async def past_incidents(self, text: str, exclude: str | None, limit: int) -> list[Similar]:
        """:meth:`similar_incidents` less every incident open now (listed open by its source and not resolved on
        this desk): an incident still open is not past, however alike (MemoryUnavailable, AuditError)."""
        current = await self.listing()
        standing = await self.standings()
        open_now = {
            key
            for key, incident in current.incidents.items()
            if incident.is_open and state_of(standing.get(key), silenced=False) != "resolved"
        }
        open_now.discard(exclude or "")
        found = await self.similar_incidents(text, exclude, limit + len(open_now))
        return [item for item in found if item.incident.incident_id not in open_now][:limit]

    async def save_postmortem(self, postmortem: Postmortem) -> None:
        await anyio.to_thread.run_sync(self._keeper().memory.save_postmortem, postmortem)

    async def postmortem(self, incident_id: str) -> Postmortem | None:
        return await anyio.to_thread.run_sync(self._keeper().memory.postmortem, incident_id)

    async def activity(self, incident_id: str, limit: int) -> list[Event]:
        """The incident's activity on this desk, oldest first."""
        events = await anyio.to_thread.run_sync(self.journal.activity, incident_id, limit)
        return list(reversed(events))

    async def action_runs(self, incident: Incident, events: Sequence[Event]) -> runs.ServiceRuns:
        """The runbook actions run on ``incident``'s service while it was open on this desk (from its opening to
        its last resolution here, as its ``events`` say), oldest first, masked (AuditError)."""
        limit = MAX_RECENT_DECISIONS
        read = partial(self.journal.recent, limit, service=incident.service, since=incident.opened)
        decisions = await anyio.to_thread.run_sync(read)
        found = await anyio.to_thread.run_sync(runs.action_runs, list(reversed(decisions)), self.redactor)
        kept = runs.between(found, incident.opened, runs.resolved_at(events))
        return runs.ServiceRuns(incident.service, kept, cut=len(decisions) >= limit)

    async def standings(self) -> Mapping[str, Standing]:
        """Who acknowledged and who resolved each incident, on this desk: read once per change of the journal, and
        told right here while it stands still (a hop cost more than the rest of a listing; docs/performance.md)."""
        kept = self.journal.standings_at_once()
        return kept if kept is not None else await anyio.to_thread.run_sync(self.journal.standings)

    async def silence(
        self, incident: Incident, ends: datetime, created_by: str, comment: str
    ) -> tuple[str, AlertmanagerSource]:
        """Make a silence of exactly this alert in its Alertmanager (SilenceError); its id. NoSilences for a
        folder incident."""
        source = self._alertmanager(incident)
        now = datetime.now(UTC)
        made = await self._outside(silences.create, source, incident.labels, now, ends, created_by, comment)
        return made, source

    async def expire_silence(self, incident: Incident, silence_id: str) -> None:
        await self._outside(silences.expire, self._alertmanager(incident), silence_id)

    async def silences_of(self, incident: Incident) -> list[silences.Silence]:
        """The silences muting the incident now, as its Alertmanager shows them (SilenceError)."""
        source = self._alertmanager(incident)
        return [await self._outside(silences.read, source, silence_id) for silence_id in incident.silenced_by]

    async def alerts_silenced_by_labels(self, incident: Incident) -> list[Incident]:
        """Every alert of the incident's Alertmanager that a silence of its labels would cover now."""
        listing = await self.listing()
        same_source = (found for found in listing.incidents.values() if found.source == incident.source)
        return covered_by_labels(incident.labels, same_source)

    async def silence_targets(self, incident: Incident) -> list[SilenceTarget]:
        """Each silence muting the incident now: who made it, when it ends, every alert it covers, and whether
        this desk made it for this incident (its journal's silence acts say so, not the silence's own words)."""
        muting = await self.silences_of(incident)
        listing = await self.listing()
        events = await self.activity(incident.id, 500)
        made_here = {
            event.text.split()[1]
            for event in events
            if event.act == "silence" and event.outcome == "done" and event.text.startswith("silence ")
        }
        return [
            SilenceTarget(
                silence_id=silence.id,
                created_by=silence.created_by,
                ends_at=silence.ends_at,
                covered=tuple(
                    sorted(
                        (found for found in listing.incidents.values() if silence.id in found.silenced_by),
                        key=lambda found: found.id,
                    )
                ),
                made_here=silence.id in made_here,
            )
            for silence in muting
        ]

    async def fresh_incident(self, incident_id: str) -> Incident:
        """The incident as its source shows it now (an Alertmanager is asked again, not its cache)."""
        self.sources.forget(incident_id)
        return await self.incident(incident_id)

    def _alertmanager(self, incident: Incident) -> AlertmanagerSource:
        source = self.sources.alertmanager_of(incident)
        if source is None:
            raise NoSilences(f"{incident.id} comes from a folder, which has no alerts to silence")
        return source

    @staticmethod
    async def _outside(func: Callable[..., T], *args: Any) -> T:
        """A call to a neighbour: in the outside calls' threads, abandoned when the request is cancelled (it ends
        by its own deadline)."""
        return await anyio.to_thread.run_sync(func, *args, limiter=outside.outside_threads(), abandon_on_cancel=True)

    async def limit_reached(
        self, act: str, person: str, service: str | None, spending: str | None = None
    ) -> limits.Counter | None:
        """The act limit (``[act_limits]``) that refuses ``person``'s ``act`` now, counted from the journal;
        ``spending``: the nonce of the approval about to be spent (``limits.reached``)."""
        settings, now = self.settings.act_limits, datetime.now(UTC)
        rows = await anyio.to_thread.run_sync(self.journal.counted_since, now - settings.window())
        return limits.reached(rows, settings, act=act, person=person, service=service, now=now, spending=spending)

    async def check_journal_writable(self) -> None:
        """AuditError when the journal cannot take a decision now (checked before a human is asked)."""
        await anyio.to_thread.run_sync(self.journal.check_writable)

    async def redacted(self, text: str) -> str:
        """``text`` masked like a log line, in a worker thread: a provider's answer can be long."""
        return await anyio.to_thread.run_sync(self.redactor, text)

    async def metric_series(
        self, service: str, queries: Mapping[str, str], window: metrics.Window, from_alert: str | None = None
    ) -> tuple[list[metrics.Series], list[metrics.QueryProblem]]:
        """Every named query of ``service`` over ``window``, asked at once, each in an outside call's thread with
        its deadline; MetricsUnavailable (named, bounded) when Prometheus cannot answer, or when the service has
        no ``[services.<name>.metrics]``. ``from_alert`` names the query an alert brought (held to tighter caps)."""
        config = self.settings.service_metrics.get(service)
        if config is None:
            raise metrics.MetricsUnavailable(f"{service} has no [services.{service}.metrics] (a Prometheus to ask)")
        return await metrics.fetch_all(
            config, service, source_secret(self.settings), queries, window, self.settings.metrics_max_points, from_alert
        )

    async def change_events(self, service: str, incident_id: str, start: datetime, end: datetime) -> ChangeRead:
        """The change sources' events for ``service`` in the window (files read, commands run, off the loop and
        each bounded by its deadline and cap)."""
        from incident_desk.core.sources.changes import read_changes

        cancel = threading.Event()
        call = partial(read_changes, self.settings.change_sources, service, incident_id, start, end, cancel)
        try:
            return await anyio.to_thread.run_sync(
                call, limiter=outside.worker_threads("changes", CHANGE_THREADS), abandon_on_cancel=True
            )
        finally:
            cancel.set()  # a cancelled request's command is killed, not left to run to its deadline

    async def provider_key(self) -> credentials.SecretLookup:
        """The model provider's API key: the environment, else the keychain (which may block)."""
        settings = self.settings
        return await anyio.to_thread.run_sync(
            credentials.resolve_secret,
            settings.provider_api_key,
            settings.keyring_service,
            credentials.PROVIDER_API_KEY,
        )

    async def read_page(self, incident_id: str, cursor: str | None, limit: int | None) -> LogPageRead:
        """One page of the log from ``cursor`` (a sealed cursor this desk handed out; None for the first line),
        redacted, with the next page's sealed cursor (CursorError, or the log's DataError)."""
        from incident_desk.core.search import paging

        start = self.cursors.decode(incident_id, cursor) if cursor else paging.START
        settings = self.settings
        page = await self.read_log_from_loop(
            incident_id,
            partial(
                paging.read_page,
                cursor=start,
                limit=limit or settings.page_lines,
                max_bytes=settings.page_max_bytes,
                redactor=self.redactor,
            ),
        )
        next_cursor = self.cursors.encode(incident_id, page.next_cursor) if page.next_cursor else None
        return LogPageRead(page.lines, next_cursor, page.total_bytes)

    async def search(
        self, incident_id: str, pattern: str, cursor: str | None, limit: int, *, ignore_case: bool = False
    ) -> LogSearchRead:
        """Matches of ``pattern`` (PatternError) from ``cursor`` (CursorError) within the desk's time budget, the
        log scanned in the search threads with its helper processes, and stopped when the request is cancelled."""
        from incident_desk.core.redaction.face import MASK
        from incident_desk.core.search import engine, paging
        from incident_desk.core.search.pattern import compile_pattern

        regex = compile_pattern(pattern, ignore_case=ignore_case, mask=MASK)
        start = self.cursors.decode(incident_id, cursor) if cursor else paging.START
        cancelled = threading.Event()
        reader = partial(
            engine.search,
            pattern=regex,
            cursor=start,
            limit=limit,
            time_budget=self.settings.search_time_budget_seconds,
            redaction=self.redaction,
            cancelled=cancelled,
            processes=self.settings.search_processes,
        )
        try:
            # Abandoned on cancellation, and told so: the scan checks the flag between windows and stops.
            found = await self.scan_log(incident_id, reader, search=True)
        finally:
            cancelled.set()
        next_cursor = self.cursors.encode(incident_id, found.next_cursor) if found.next_cursor else None
        return LogSearchRead(found.matches, next_cursor, found.scanned_bytes, found.total_bytes, found.stopped)

    def restart_lock(self, service: str, who: str) -> AbstractAsyncContextManager[Holding]:
        """Hold ``service``'s restart lock as ``who`` (ServiceBusy): features never reach into the journal."""
        return self.journal.locks.hold(service, who)

    async def restart_lock_holder(self, service: str) -> Holder | None:
        """Who holds ``service``'s restart lock now, if anyone."""
        return await self.journal.locks.holder(service)

    async def scan_log(self, incident_id: str, reader: Callable[[BinaryIO], T], *, search: bool = False) -> T:
        """Run a long ``reader`` (a search, a timeline pass) on an incident's log in a worker thread, abandoned
        when the request is cancelled (the reader must then stop on its own: its cancel flag). Searches run in
        their own few threads."""
        waits = self.sources.waits_on_sources(incident_id)
        limiter = outside.worker_threads("search", SEARCH_THREADS) if search else self._threads(waits)
        return await anyio.to_thread.run_sync(
            self.read_log, incident_id, reader, limiter=limiter, abandon_on_cancel=True
        )

    def _threads(self, waits_on_sources: bool) -> anyio.CapacityLimiter | None:
        return outside.worker_threads("sources", SOURCE_THREADS) if waits_on_sources else None

    async def _off_loop(self, waits_on_sources: bool, func: Callable[..., T], *args: Any) -> T:
        """``func`` in a worker thread; one that may wait on a source is abandoned when its request is cancelled
        (it ends by the source's deadline) and runs in the sources' own threads."""
        return await anyio.to_thread.run_sync(
            func, *args, limiter=self._threads(waits_on_sources), abandon_on_cancel=waits_on_sources
        )

    def _runbook(self, service: str) -> str:
        """The service's runbook; a service the desk knows without one is told apart from an unknown name."""
        try:
            markdown = self.sources.runbook(service)
        except UnknownService:
            if service in self.services():
                raise RunbookMissing(service) from None
            raise
        actions = self.settings.service_actions.get(service)
        return markdown.rstrip("\n") + runbook_section(actions) if actions else markdown

    def read_log(self, incident_id: str, reader: Callable[[BinaryIO], T]) -> T:
        """Run ``reader`` on an incident's log, opened safely once and read only through that handle (a path
        opened again could lead somewhere else by then); a log that vanished or cannot be read is a named
        domain error."""
        with self.sources.open_log(incident_id) as handle:
            return _read(incident_id, handle, reader)

    async def read_log_from_loop(self, incident_id: str, reader: Callable[[BinaryIO], T]) -> T:
        """:meth:`read_log` for a caller on the event loop. A log of at most ``INLINE_LOG_MAX_BYTES`` that the data
        directory's fresh view lists is opened and read right here, once the log reader and the redaction rules
        are loaded (the first read loads them in a worker thread, because compiling the rules takes a while): the
        open never blocks and lists nothing, and a hop to a worker thread would cost about as much as the read.
        Any other log is read in a worker thread, through the handle already opened when there is one."""
        if not self._readers_loaded:
            self._readers_loaded = all(
                getattr(sys.modules.get(name), "IMPORT_FINISHED", False) for name in _LOG_READERS
            )
        handle = self.sources.open_listed_log(incident_id) if self._readers_loaded else None
        if handle is None:
            return await self._off_loop(self.sources.waits_on_sources(incident_id), self.read_log, incident_id, reader)
        try:
            small = os.fstat(handle.fileno()).st_size <= INLINE_LOG_MAX_BYTES
            if small:
                return _read(incident_id, handle, reader)
            # Shielded: when the request is cancelled this waits for the read, so the handle closes after it.
            return await anyio.to_thread.run_sync(_read, incident_id, handle, reader)
        except OSError as exc:
            raise LogUnavailable(incident_id, exc.strerror or exc.__class__.__name__) from None
        finally:
            handle.close()

    async def bounded_log_from_loop(self, incident_id: str) -> str:
        """The tail window of an incident's log, with a note when older lines were left out."""
        return self._noted(await self.read_log_from_loop(incident_id, self._tail_window))

    def _tail_window(self, handle: BinaryIO) -> TailWindow:
        # Imported by the first log read: the log reader is not needed before the first answer.
        from incident_desk.core.search.paging import read_tail

        settings = self.settings
        return read_tail(
            handle, max_lines=settings.log_window_lines, max_bytes=settings.log_window_bytes, redactor=self.redactor
        )

    @staticmethod
    def _noted(window: TailWindow) -> str:
        if not window.truncated:
            return window.text
        return (
            f"[incident-desk: showing the last {window.shown_lines} lines ({window.shown_bytes} of "
            f"{window.total_bytes} bytes); page or search the rest with read_incident_log]\n{window.text}"
        )


def _read(incident_id: str, handle: BinaryIO, reader: Callable[[BinaryIO], T]) -> T:
    """``reader`` on an opened log; a read that fails is the named domain error."""
    try:
        return reader(handle)
    except OSError as exc:
        raise LogUnavailable(incident_id, exc.strerror or exc.__class__.__name__) from None


def source_secret(settings: Settings) -> Callable[[str], str | None]:
    """An incident source's password or token: its INCIDENT_DESK_SOURCE_<NAME> variable, else the keychain."""

    def lookup(name: str) -> str | None:
        from pydantic import SecretStr

        from incident_desk.core import credentials

        value = os.environ.get(credentials.env_var_name(name).replace(".", "_"))
        return credentials.resolve_secret(SecretStr(value) if value else None, settings.keyring_service, name).value

    return lookup
