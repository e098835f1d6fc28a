"""The server factory: build one MCPServer for a desk and register the thin feature modules on it.

Only the transports and ``doctor`` import this module; features never do.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from importlib import resources
from typing import Any

import anyio
import structlog
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resources import FunctionResource, Resource, ResourceTemplate
from mcp.server.request_state import RequestStateSecurity
from mcp_types import InputRequiredResult
from pydantic import ConfigDict

from incident_desk import __version__
from incident_desk.app import DeskApp
from incident_desk.core.activity import ACTIVITY, main_thread_finished
from incident_desk.features import completions, skills, tool_catalog
from incident_desk.index_watcher import IndexWatcher
from incident_desk.observability.lean_structlog import rich_absent
from incident_desk.protocol.client_features import AppsAdvertised, HideAppViewsFromPlainClients
from incident_desk.protocol.client_logging import RequestLogContext, serve_set_level
from incident_desk.protocol.eras import DeclareOnTheHandshake
from incident_desk.protocol.library_hooks import sdk_resource_templates
from incident_desk.protocol.push import IndexPush
from incident_desk.protocol.tool_arguments import CappedUriEchoes, DeskWordsForArgumentErrors
from incident_desk.protocol.tool_selection import AnswerTurnedOffTools, check_names, instructions_note, tools_off

logger = structlog.get_logger(__name__)

SERVER_NAME = "incident-desk"
# Requests a desk with deferred features answers without them.
_ANSWERED_WITHOUT_FEATURES = frozenset({"initialize", "server/discover", "ping"})
# What a client asks right after its handshake, before its first call: background work waits for these answers.
_LISTINGS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})


def instructions(app: DeskApp | None = None) -> str:
    """The desk's instructions, with what its operator turned off."""
    text = (resources.files("incident_desk") / "data" / "instructions.md").read_text(encoding="utf-8")
    if app is None:
        return text
    note = instructions_note(_tools_off(app), read_only=app.settings.read_only)
    return text.rstrip("\n") + ("\n" + note + "\n" if note else "\n")


def _tools_off(app: DeskApp) -> dict[str, str]:
    settings = app.settings
    if not settings.read_only and settings.enabled_tools is None and not settings.disabled_tools:
        return {}  # every tool on: the catalogue (every feature module) is not imported before it is needed
    catalog = tool_catalog()
    check_names(catalog, enabled=settings.enabled_tools, disabled=settings.disabled_tools)
    return tools_off(
        catalog, read_only=settings.read_only, enabled=settings.enabled_tools, disabled=settings.disabled_tools
    )


def build_server(app: DeskApp, *, defer_features: bool = False, learn_history: bool = False) -> MCPServer:
    """The desk's server. With ``defer_features`` the listed features are imported and registered by the first
    request that may need them instead of before the first answer: a client spawning the desk over stdio gets
    its ``initialize`` answer sooner (docs/performance.md), and sees the same lists in the same order. With
    ``learn_history`` (a served desk) the first request after the handshake starts the memory's background pass
    over every incident of the desk (``MemoryKeeper.learn``)."""
    # The sealed 2026 round-trip state must outlive the longest wait for a human, or a slow approval would
    # fail with the SDK's bare "expired requestState" instead of the desk's own timeout text.
    ttl = max(app.settings.approval_timeout_seconds, app.settings.sampling_timeout_seconds) + 120
    sealing = (
        RequestStateSecurity(keys=app.sealing_keys, ttl=ttl)
        if app.sealing_keys
        else RequestStateSecurity.ephemeral(ttl=ttl)
    )
    log_context = RequestLogContext()
    served_skills = skills.extension()
    push = IndexPush()
    watcher = IndexWatcher(app, push)
    with rich_absent():  # the SDK's own logging set-up, which the desk's handler on the root logger replaces
        server = MCPServer(
            SERVER_NAME,
            version=__version__,
            title="Incident desk",
            instructions=instructions(app),
            request_state_security=sealing,
            middleware=[log_context, HideAppViewsFromPlainClients(), DeclareOnTheHandshake([served_skills])],
            extensions=[AppsAdvertised(), served_skills],
            subscriptions=push.bus,
            lifespan=watcher.lifespan,
        )
    push.register(server)
    server.middleware.append(DeskWordsForArgumentErrors(server))
    server.middleware.append(CappedUriEchoes())
    if off := _tools_off(app):
        server.middleware.append(AnswerTurnedOffTools(off))
    _install_telemetry(server, app, after=log_context)
    serve_set_level(server, app.log_levels)
    completions.register(server, app)
    if defer_features:
        server.middleware.insert(server.middleware.index(log_context), RegisterFeaturesOnFirstUse(server, app))
        server.middleware.insert(0, LoadSearchStackAfterHandshake(server, app))
        server.middleware.insert(0, CountRequestsUnderWay())
    else:
        register_listed_features(server, app)
    if learn_history and app.memory is not None:
        server.middleware.insert(0, LearnHistoryOnFirstUse(server, app))
    return server


def data_directory_counts(app: DeskApp) -> dict[str, int]:
    """The data directory's incidents and skipped entries, for the log; read now unless its last look is fresh.
    Opens nothing that can block (see core.datafiles), so a FIFO in the data directory cannot stall the desk."""
    listing = app.sources.data.listing()
    return {"incidents": len(listing.incidents), "skipped_entries": len(listing.problems)}


# Over HTTP a call slower than this is logged unless the operator chose another threshold.
HTTP_SLOW_CALL_SECONDS = 10.0


def _install_telemetry(server: MCPServer, app: DeskApp, *, after: object) -> None:
    """Metrics and the slow-call log on the HTTP desk; over stdio the slow-call log only when asked for, so a
    stdio desk left as it is imports and runs none of it."""
    settings = app.settings
    http = settings.transport == "http"
    slow = settings.slow_call_seconds
    if not http and slow is None:
        return
    from incident_desk.observability.telemetry import CallTelemetry

    async def target_names() -> frozenset[str]:
        tools = await server.list_tools()
        prompts = await server.list_prompts()
        return frozenset(tool.name for tool in tools) | frozenset(prompt.name for prompt in prompts)

    telemetry = CallTelemetry(
        metrics=http and settings.metrics,
        slow_call_seconds=slow if slow is not None else HTTP_SLOW_CALL_SECONDS,
        target_names=target_names,
    )
    server.middleware.insert(server.middleware.index(after) + 1, telemetry)  # type: ignore[arg-type]


def register_listed_features(server: MCPServer, app: DeskApp) -> None:
    """The tools, resources and prompts, which the initialize answer does not show. (Completions register with
    the server: their handler is what advertises the ``completions`` capability.)"""
    from incident_desk.features import (
        approved_acts,
        handoff,
        incident_acts,
        investigate,
        memory,
        metrics,
        prompts,
        read_tools,
        restart,
        service_actions,
        summarize,
        timeline,
    )
    from incident_desk.features import resources as desk_resources  # importlib's ``resources`` is in use here

    for feature in (
        timeline,
        desk_resources,
        prompts,
        read_tools,
        summarize,
        restart,
        service_actions,
        metrics,
        incident_acts,
        approved_acts,
        memory,
        investigate,
        handoff,
    ):
        feature.register(server, app)
    for name in _tools_off(app):
        server.remove_tool(name)
    _serve_template_results_in_hand(server)


def _serve_template_results_in_hand(server: MCPServer) -> None:
    """Make every registered resource template a :class:`ResultInHandTemplate`.

    The SDK's template table is private (``library_hooks.sdk_resource_templates``); ``tests/test_overhead.py``
    counts the thread hops of a log read and fails if this stops taking effect. Revisit when the SDK reads a
    template's result without the hop.
    """
    templates = sdk_resource_templates(server)
    if templates is None:
        return
    for key, template in templates.items():
        templates[key] = ResultInHandTemplate.model_construct(**dict(template))


class ResultInHandTemplate(ResourceTemplate):
    """A resource template whose function's result is handed back as it is.

    The SDK wraps what a template's function returned in a ``FunctionResource`` around a plain lambda, and reading
    that hops to a worker thread only to return the value already computed, a cost paid by every log or runbook
    read (docs/performance.md). The function did its work already (off the loop where it blocks), so
    its value is served from an async function instead.
    """

    # Made with model_construct once the features are registered: its validator is not built before the
    # handshake's answer (2 ms of a start).
    model_config = ConfigDict(defer_build=True)

    async def create_resource(
        self, uri: str, params: dict[str, Any], context: Context[Any, Any]
    ) -> Resource | InputRequiredResult:
        created = await super().create_resource(uri, params, context)
        if not isinstance(created, FunctionResource):
            return created
        value = created.fn()

        async def in_hand() -> Any:
            return value

        created.fn = in_hand
        return created


def _is_notification(method: str) -> bool:
    """Notifications pass through the middleware too: ``notifications/initialized`` ends the handshake, it is no
    request of the client's own."""
    return method.startswith("notifications/")


class CountRequestsUnderWay:
    """Server middleware: every request but a ping counts as work under way (``core.activity``), so what the search
    stack's loader imports last (numpy, whose import holds the interpreter lock) waits until the client has gone
    quiet, not only its searches: a client firing every tool at once is not stalled by it. A call waiting on a
    person (an approval, a sampled summary) counts too; searches meanwhile count lines without numpy."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "ping" or _is_notification(ctx.method):
            return await call_next(ctx)
        with ACTIVITY.busy():
            return await call_next(ctx)


class LoadSearchStackAfterHandshake:
    """Server middleware: once the client's start-up is answered (the handshake and the first request after it,
    its ``tools/list``, which registers the features; a first call instead starts it at once), load the search
    stack (``DeskApp.load_search_stack``) in a thread while the client is still starting, then leave the chain.
    The thread loads nothing while a request is under way: a call that came first loads what it needs itself.

    A client that lists nothing after its handshake gets it ``IDLE_SECONDS`` after the handshake answer; one that
    sends nothing at all (a 2026 client needs no handshake) ``IDLE_SECONDS`` after the desk started serving
    (``after_start``, which the stdio transport runs). Each start comes a moment after an answer is handed back,
    so the answer is written first: the thread holds the interpreter lock for most of its work, and neither
    ``initialize`` nor the first ``tools/list`` shares it with the thread (bench/bench_stdio.py), while the
    client's first search no longer pays for the imports.
    """

    AFTER_SECONDS = 0.01
    IDLE_SECONDS = 0.5
    QUIET_SECONDS = 0.001  # no request under way (``CountRequestsUnderWay``)

    def __init__(self, server: MCPServer, app: DeskApp) -> None:
        self._server = server
        self._app = app
        self._asked = False
        self._started = False

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if self not in self._server.middleware or _is_notification(ctx.method):
            return await call_next(ctx)
        handshake = ctx.method in _ANSWERED_WITHOUT_FEATURES
        self._asked = True
        if not handshake:
            self._server.middleware.remove(self)
            if ctx.method not in _LISTINGS:  # started now, it loads once this first call is answered
                self._start()
                return await call_next(ctx)
        try:
            return await call_next(ctx)
        finally:
            later = self.IDLE_SECONDS if handshake else self.AFTER_SECONDS
            asyncio.get_running_loop().call_later(later, self._start)

    async def after_start(self) -> None:
        await anyio.sleep(self.IDLE_SECONDS)
        if not self._asked:
            self._start()

    def _start(self) -> None:
        if not self._started:
            self._started = True
            # Not a daemon: the interpreter waits for it at exit. A daemon thread still compiling RE2 (C++) when
            # the interpreter finalizes is unwound through frames that forbid it, and the desk aborts: 24 of 60
            # stdio desks asked one search and closed right after exited with SIGABRT. Once the main thread has
            # finished the loader skips numpy, so the exit waits at most for the step under way.
            threading.Thread(target=self._load, name="incident-desk-search-stack", daemon=False).start()

    def _load(self) -> None:
        # A call that came first loads what it needs itself; loading beside it would only take the interpreter lock
        # from it (a first whole-file search took 20 ms longer), so the thread waits for it to be answered.
        if not ACTIVITY.wait_until_quiet(self.QUIET_SECONDS, unless=main_thread_finished):
            return
        began = time.perf_counter()
        try:
            self._app.load_search_stack()
        except Exception as exc:  # the first search loads what is missing, and says what fails
            logger.warning("search stack not loaded ahead", error=str(exc))
            return
        logger.debug("search stack loaded", seconds=round(time.perf_counter() - began, 3))


class LearnHistoryOnFirstUse:
    """Server middleware: the first request other than ``initialize`` or ``ping`` starts the memory's background
    pass over the desk's whole history (once answered when it is a listing), then leaves the chain. After the
    handshake and after a first listing's answer, so neither a client's ``initialize`` nor its first ``tools/list``
    shares the machine with it."""

    def __init__(self, server: MCPServer, app: DeskApp) -> None:
        self._server = server
        self._app = app

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if (
            ctx.method in _ANSWERED_WITHOUT_FEATURES
            or _is_notification(ctx.method)
            or self not in self._server.middleware
        ):
            return await call_next(ctx)
        self._server.middleware.remove(self)
        if ctx.method not in _LISTINGS and self._app.memory is not None:  # a call first: nothing to keep clear
            self._app.memory.learn()
            return await call_next(ctx)
        try:
            return await call_next(ctx)
        finally:
            if self._app.memory is not None:
                asyncio.get_running_loop().call_later(
                    LoadSearchStackAfterHandshake.AFTER_SECONDS, self._app.memory.learn
                )


class RegisterFeaturesOnFirstUse:
    """Server middleware: before the first request other than ``initialize`` or ``ping`` reaches its handler,
    register the listed features and take the desk's first look at its data directory, then leave the middleware
    chain, so later requests pay nothing for it.

    Registering never awaits, so no concurrent request can see half of the features; a request that comes while
    the data directory is read waits for that look instead of taking its own beside it.
    """

    def __init__(self, server: MCPServer, app: DeskApp) -> None:
        self._server = server
        self._app = app
        self._looked: anyio.Event | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method in _ANSWERED_WITHOUT_FEATURES or self not in self._server.middleware:
            return await call_next(ctx)
        if self._looked is not None:
            await self._looked.wait()
            return await call_next(ctx)
        # The feature modules' objects and the redaction rules live as long as the process, like those the start
        # froze: no collection while they are made, and frozen once they are (a first search took 20 ms longer
        # with the rules left to the collector).
        collecting = gc.isenabled()
        gc.disable()
        try:
            register_listed_features(self._server, self._app)
            self._looked = anyio.Event()
            try:
                # The first look, which every first call needs: it masks each title, so it loads the redaction
                # rules (17 ms). Here, in a worker thread, rather than before the handshake's answer; over HTTP the
                # desk reads the directory before it listens.
                counts = await anyio.to_thread.run_sync(data_directory_counts, self._app)
            finally:
                self._server.middleware.remove(self)
                self._looked.set()
            gc.freeze()
        finally:
            if collecting:
                gc.enable()
        logger.info("data directory read", **counts)
        return await call_next(ctx)
