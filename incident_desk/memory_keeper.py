"""Keeps the incident memory up to date without ever holding up a call.

Every incident the desk serves is handed to :meth:`MemoryKeeper.offer` on the event loop, which only compares it
with what was last remembered of it (a dictionary look-up) and queues it when it is new or changed; one worker
thread of its own reads the log's head for the error signature, the journal for what was done, and writes the
memory. A journal act on an incident queues it again, so its resolution and notes are remembered too.

The desk's history is learnt once, in the background, when a served desk gets its first request after the handshake
(a client's ``initialize`` never shares the machine with it): every incident of the data folder and the sources
(at most ``LEARN_MAX``, the newest) is offered, so ``find_similar_incidents`` knows it on a fresh desk's first
call, which starts that pass if need be and waits for it (bounded) before it answers.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import BinaryIO

import structlog

from incident_desk.core.incidents import Incident
from incident_desk.core.journal.activity import Act, Event
from incident_desk.core.journal.audit import Decision, Journal
from incident_desk.core.journal.memory import SIGNATURE_HEAD_BYTES, Memory, Remembered, signature_of
from incident_desk.core.outcomes import Outcome

logger = structlog.get_logger(__name__)

LogReader = Callable[[str, Callable[[BinaryIO], bytes]], bytes]
# Restarts looked at when counting those done for an incident: the journal's newest decisions.
RESTARTS_LOOKED_AT = 500
# Incidents remembered in one write (one transaction, one sync to disk).
BATCH = 100
# The most incidents the start-up pass offers: the newest first (an Alertmanager of 20,000 alerts is not read in
# full before the first answer); the rest are remembered as the desk serves them.
LEARN_MAX = 5_000
# How long an idle worker waits for more before it ends (``stop`` wakes it at once).
IDLE_SECONDS = 0.5
_WAKE = None  # queued by ``stop``: an idle worker looks at the stop at once rather than when its wait ends
Look = Callable[[], Mapping[str, Incident]]
_RESTARTED = frozenset({Outcome.EXECUTED, Outcome.SIMULATED})


def _head(handle: BinaryIO) -> bytes:
    return handle.read(SIGNATURE_HEAD_BYTES)


class MemoryKeeper:
    """The memory, and the one thread that writes what the desk served into it."""

    def __init__(
        self,
        memory: Memory,
        journal: Journal,
        read_log: LogReader,
        redact: Callable[[str], str],
        look: Look | None = None,
    ) -> None:
        self.memory = memory
        self._look = look
        self._learning: threading.Thread | None = None
        self._learnt = threading.Event()
        self._redact = redact
        self._journal = journal
        self._read_log = read_log
        self._offered: dict[str, Incident] = {}
        self._queue: queue.Queue[Incident | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._last_listing: dict[str, Incident] | None = None

    def offer_listing(self, incidents: dict[str, Incident]) -> None:
        """:meth:`offer` a listing's incidents, once per listing: a fresh listing is the same object again."""
        if incidents is self._last_listing:
            return
        self._last_listing = incidents
        self.offer(incidents.values())

    def offer(self, incidents: Iterable[Incident]) -> None:
        """Queue each incident not yet remembered as it is now (cheap: called on the event loop)."""
        for incident in incidents:
            if self._offered.get(incident.id) != incident:
                self._offered[incident.id] = incident
                self._queue.put(incident)
        self._start()

    def learn(self) -> None:
        """Start the start-up pass (once): look at every source in a thread of its own and offer what it lists."""
        with self._lock:
            if self._learning is not None or self._look is None or self._stopping.is_set():
                return
            self._learning = threading.Thread(target=self._learn, name="incident-memory-learn", daemon=True)
            self._learning.start()

    def learnt(self, timeout: float) -> bool:
        """Start the start-up pass if need be and wait up to ``timeout`` seconds for it: whether every incident it
        offered is remembered (True at once for a keeper with nothing to look at)."""
        if self._look is None:
            return True
        self.learn()
        return self._learnt.wait(timeout)

    def _learn(self) -> None:
        assert self._look is not None
        try:
            found = self._look()
        except Exception as exc:  # a source that cannot answer now is remembered when it is next served
            logger.warning("incident history not looked at", problem=str(exc))
            self._learnt.set()
            return
        newest = sorted(found.values(), key=lambda incident: (incident.opened, incident.id), reverse=True)
        self.offer(newest[:LEARN_MAX])
        if self._drained():
            self._learnt.set()

    def _drained(self) -> bool:
        """Wait until everything queued is remembered; False once the keeper is stopping, whose worker leaves the
        rest queued (``Queue.join`` would then wait for ever)."""
        done = self._queue.all_tasks_done
        with done:
            while self._queue.unfinished_tasks:
                if self._stopping.is_set():
                    return False
                done.wait(0.1)
        return True

    def acted_on(self, incident_id: str) -> None:
        """The journal changed for ``incident_id``: remember it again (its notes, silences, resolution)."""
        incident = self._offered.get(incident_id)
        if incident is not None:
            self._queue.put(incident)
            self._start()

    @property
    def pending(self) -> int:
        """Incidents queued and not yet remembered."""
        return self._queue.unfinished_tasks

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until everything queued is remembered (tests and the bench); False on timeout."""
        done = threading.Event()

        def drained() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=drained, daemon=True).start()
        return done.wait(timeout)

    def remember_now(self, incident: Incident) -> Remembered:
        """Remember ``incident`` in the calling (worker) thread and return what was kept."""
        self._offered[incident.id] = incident
        remembered = self._build(incident, self._restart_decisions([incident]))
        self.memory.remember(remembered)
        return self.memory.recall(incident.id) or remembered

    def stop(self, timeout: float = 10.0) -> bool:
        """End the worker once the incident it is building is written, and wait for it (at most ``timeout``).

        The desk calls this before it exits: a daemon thread still inside the redactor's RE2 when the interpreter
        shuts down is unwound through C++ that forbids it, and the process aborts (SIGABRT) instead of exiting.
        What is still queued is remembered the next time the desk serves it. False if the worker outlived
        ``timeout``."""
        with self._lock:
            self._stopping.set()
            worker = self._worker
            if worker is not None:
                self._queue.put(_WAKE)
        if worker is None:
            return True
        worker.join(timeout)
        return not worker.is_alive()

    def _start(self) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="incident-memory", daemon=True)
                self._worker.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                incident = self._queue.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._worker = None
                        return
                continue
            if incident is _WAKE:
                self._queue.task_done()
                continue
            batch = [incident]
            while len(batch) < BATCH and not self._stopping.is_set():
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _WAKE:
                    self._queue.task_done()
                    break
                batch.append(more)
            try:
                self._remember(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()

    def _remember(self, batch: list[Incident]) -> None:
        """One write for the batch; when it fails, each incident alone, so one bad row stops no other. The journal's
        last restart decisions are read once for the batch, not once per incident."""
        try:
            decisions = self._restart_decisions(batch)
            built = []
            for incident in batch:
                if self._stopping.is_set():
                    return  # the desk is exiting: what is left is remembered when it is next served
                built.append(self._build(incident, decisions))
            self.memory.remember_many(built)
            return
        except Exception as exc:
            if len(batch) == 1:
                logger.warning("incident not remembered", incident=batch[0].id, problem=str(exc))
                return
        for incident in batch:
            self._remember([incident])

    def _restart_decisions(self, incidents: list[Incident]) -> list[Decision]:
        """The journal's last restart decisions, which tell how often each incident's service was restarted."""
        return self._journal.recent(RESTARTS_LOOKED_AT) if any(incident.service for incident in incidents) else []

    def _build(self, incident: Incident, decisions: list[Decision]) -> Remembered:
        try:
            # Redacted like every log line that leaves the desk: the signature is shown in answers.
            head = self._redact(self._read_log(incident.id, _head).decode("utf-8", "replace"))
            signature = signature_of(head.encode("utf-8"))
        except Exception:  # a log that is gone or unreadable leaves the signature empty, not the memory
            signature = ""
        events: list[Event] = list(reversed(self._journal.activity(incident.id, 500)))
        done = [event for event in events if event.took_effect]
        notes = " ".join(event.text for event in done if event.act in (Act.NOTE, Act.ACKNOWLEDGE) and event.text)
        resolves = [event for event in done if event.act == Act.RESOLVE]
        resolution = resolves[-1].text if resolves else incident.resolution
        resolved = resolves[-1].time if resolves else None
        return Remembered(
            incident_id=incident.id,
            title=incident.title,
            service=incident.service,
            source=incident.source,
            opened=incident.opened,
            status="resolved" if resolves else incident.status,
            labels=" ".join(f"{name}={value}" for name, value in incident.labels),
            signature=signature,
            notes=notes,
            resolution=resolution,
            resolved=resolved,
            restarts=sum(1 for decision in decisions if incident.service and _restarted(decision, incident, resolved)),
            silences=sum(1 for event in done if event.act == Act.SILENCE),
        )


def _restarted(decision: Decision, incident: Incident, resolved: datetime | None) -> bool:
    """A restart of the incident's service done while it was open."""
    if decision.service != incident.service or decision.outcome not in _RESTARTED:
        return False
    return decision.time >= incident.opened and (resolved is None or decision.time <= resolved)
