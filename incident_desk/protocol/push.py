"""Who is subscribed to ``incident://index``, in both protocol eras, and telling them it changed.

- 2025-11-25: ``resources/subscribe`` and ``resources/unsubscribe`` (MCPServer registers neither; the low-level
  hook in ``library_hooks`` does, which also makes the server declare ``resources.subscribe``), answered by
  ``notifications/resources/updated`` on the subscriber's session.
- 2026-07-28: ``subscriptions/listen`` streams that ask for ``incident://index``: the SDK's ``ListenHandler`` over
  the desk's ``SubscriptionBus``, wrapped here only to count who asked for the index.

Telling never waits on a client: a 2026 stream is fed by the bus without blocking (the SDK ends a stream whose
backlog is full), and each 2025 subscriber has a sender task of its own with a one-update mailbox (a pending
update already says "read it again"), whose send gives up after ``SEND_SECONDS`` and drops a client that is gone.
Nobody subscribed costs nothing: :meth:`IndexPush.wait_for_subscriber` just waits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import structlog
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)

from incident_desk.protocol.client_features import can_be_notified
from incident_desk.protocol.eras import ERA_2025, ERA_2026
from incident_desk.protocol.library_hooks import sdk_add_request_handler, sdk_connection

logger = structlog.get_logger(__name__)

INDEX_URI = "incident://index"
NO_CHANNEL = (
    f"stateless HTTP cannot send updates to a {ERA_2025} client (no back-channel): read {INDEX_URI} again when "
    f"you need it, or subscribe with {ERA_2026} subscriptions/listen"
)
# How long one notification to a 2025 subscriber may take before the client is taken for gone.
SEND_SECONDS = 5.0


class _Legacy:
    """One 2025 session subscribed to the index, and its mailbox."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.send, self.receive = anyio.create_memory_object_stream[str](1)


class IndexPush:
    """The subscribers of ``incident://index`` in both eras; ``on_subscribe`` runs before a subscription is
    answered (the watcher takes its baseline there, so a change after the answer is never missed)."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._legacy: dict[int, _Legacy] = {}
        self._listeners = 0
        self._wanted = anyio.Event()
        self._group: anyio.abc.TaskGroup | None = None
        self.on_subscribe: Callable[[], Awaitable[None]] | None = None
        self.sent = 0

    @property
    def subscribed(self) -> bool:
        return bool(self._legacy) or self._listeners > 0

    def register(self, server: Any) -> bool:
        """Serve the subscription requests of both eras on ``server`` (an MCPServer built with ``self.bus``)."""
        served = sdk_add_request_handler(server, "resources/subscribe", SubscribeRequestParams, self._subscribe)
        served = served and sdk_add_request_handler(
            server, "resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe
        )
        return served and sdk_add_request_handler(
            server, "subscriptions/listen", SubscriptionsListenRequestParams, self._listen_stream
        )

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[anyio.abc.TaskGroup]:
        """The task group the senders (and the watcher) run in, for as long as the server runs."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield group
            finally:
                self._group = None
                for subscriber in list(self._legacy.values()):
                    self._drop(subscriber)
                group.cancel_scope.cancel()

    async def wait_for_subscriber(self) -> None:
        while not self.subscribed:
            self._wanted = anyio.Event()
            await self._wanted.wait()

    async def index_updated(self) -> None:
        """Tell every subscriber the index changed; returns at once whatever the clients do."""
        await self.bus.publish(ResourceUpdated(uri=INDEX_URI))
        for subscriber in list(self._legacy.values()):
            try:
                subscriber.send.send_nowait(INDEX_URI)
            except anyio.WouldBlock:
                pass  # an update is already waiting for this client: it says the same
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._drop(subscriber)

    async def _subscribed(self) -> None:
        if self.on_subscribe is not None:
            await self.on_subscribe()
        self._wanted.set()

    async def _subscribe(self, ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        if str(params.uri) != INDEX_URI:
            raise MCPError(INVALID_PARAMS, f"only {INDEX_URI} can be subscribed to on this desk, not {params.uri}")
        if self._group is None:
            raise MCPError(INTERNAL_ERROR, "the desk is not serving subscriptions yet; subscribe again")
        if not can_be_notified(ctx.session):
            raise MCPError(INVALID_REQUEST, NO_CHANNEL)
        key = id(sdk_connection(ctx.session))
        if key not in self._legacy:
            await self._subscribed()
            subscriber = self._legacy[key] = _Legacy(ctx.session)
            self._group.start_soon(self._deliver, subscriber)
        return EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        subscriber = self._legacy.get(id(sdk_connection(ctx.session)))
        if str(params.uri) == INDEX_URI and subscriber is not None:
            self._drop(subscriber)
        return EmptyResult()

    async def _listen_stream(self, ctx: Any, params: SubscriptionsListenRequestParams) -> SubscriptionsListenResult:
        wants_index = INDEX_URI in (params.notifications.resource_subscriptions or ())
        if not wants_index:
            return await self._listen(ctx, params)
        await self._subscribed()
        self._listeners += 1
        try:
            return await self._listen(ctx, params)
        finally:
            self._listeners -= 1

    def _drop(self, subscriber: _Legacy) -> None:
        for key, found in list(self._legacy.items()):
            if found is subscriber:
                del self._legacy[key]
        subscriber.send.close()

    async def _deliver(self, subscriber: _Legacy) -> None:
        async with subscriber.receive:
            async for uri in subscriber.receive:
                try:
                    with anyio.fail_after(SEND_SECONDS):
                        await subscriber.session.send_resource_updated(uri)
                    self.sent += 1
                except Exception as exc:  # a client gone, stuck or refusing: it gets no more, the rest do
                    logger.info("index subscriber dropped", reason=type(exc).__name__)
                    self._drop(subscriber)
                    return
