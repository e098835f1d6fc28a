"""The watcher behind ``incident://index`` subscriptions: while anyone is subscribed, re-read the incident sources
every ``watch_interval_seconds`` (off the event loop) and tell the subscribers when the index changed or a silence
is about to end. With nobody subscribed it waits and reads nothing.

The diffing is ``core.sources.watch``; the telling is ``protocol.push``. A source that is down is logged when it
goes down and when it is back, not on every look.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import anyio
import structlog

from incident_desk.app import DeskApp
from incident_desk.core.incidents import Listing
from incident_desk.core.sources.silences import SilenceError
from incident_desk.core.sources.watch import IndexWatch
from incident_desk.protocol.push import IndexPush

logger = structlog.get_logger(__name__)


class IndexWatcher:
    def __init__(self, app: DeskApp, push: IndexPush) -> None:
        self.app = app
        self.push = push
        self.watch = IndexWatch()
        self.looks = 0
        self._lock = anyio.Lock()
        self._serving = False
        push.on_subscribe = self.baseline

    @asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: the watcher (idle until someone subscribes) and the senders run in it. Entered
        once per server over HTTP and stdio; an in-process server entered again by a second client shares the
        first one's watcher."""
        if self._serving:
            yield {}
            return
        self._serving = True
        try:
            async with self.push.serving() as group:
                group.start_soon(self.run)
                yield {}
        finally:
            self._serving = False

    async def baseline(self) -> None:
        """Take the first look before a subscription is answered, so what changes after the answer is told."""
        async with self._lock:
            if not self.watch.has_baseline:
                await self._look_and_tell()

    async def run(self) -> None:
        interval = self.app.settings.watch_interval_seconds
        while True:
            if not self.push.subscribed:
                self.watch.reset()  # a later subscriber starts from the index as it is then
                await self.push.wait_for_subscriber()
            await anyio.sleep(interval)
            if self.push.subscribed:
                async with self._lock:
                    await self._look_and_tell()

    async def _look_and_tell(self) -> None:
        try:
            listing = await self._look()
            ends = await self._silence_ends(listing)
        except Exception:  # the watcher outlives any one bad look; the next look tries again
            logger.exception("index watch look failed")
            return
        step = self.watch.step(listing, ends, self.app.clock())
        for name, reason in sorted(step.went_down.items()):
            logger.warning("incident source down", source=name, reason=reason)
        for name in step.came_back:
            logger.info("incident source back", source=name)
        if step.changed:
            logger.info("incident index changed", changes=list(step.changes))
            await self.push.index_updated()

    async def _look(self) -> Listing:
        """A fresh look at every source: what a source cached for other readers is dropped first."""
        self.looks += 1
        self.app.sources.forget()
        return await self.app.listing()

    async def _silence_ends(self, listing: Listing) -> dict[str, datetime]:
        ends: dict[str, datetime] = {}
        for silence_id, incident in self.watch.unknown_silences(listing).items():
            try:
                for silence in await self.app.silences_of(incident):
                    ends[silence.id] = silence.ends_at
            except SilenceError as exc:
                logger.debug("silence end unreadable", silence=silence_id, reason=str(exc))
        return ends
