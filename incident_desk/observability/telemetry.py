"""The desk's own telemetry: Prometheus metrics for ``/metrics`` and a log line for each slow call.

Written out by hand rather than with ``prometheus_client``: a handful of counters and histograms in the text
exposition format is about a hundred lines, and the desk gains no dependency (nor its import at start). Only the
HTTP desk, or a stdio desk whose operator set ``slow_call_seconds``, installs :class:`CallTelemetry`; a stdio desk
left as it is never imports this module.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import structlog
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.methods import SPEC_CLIENT_METHODS, SPEC_CLIENT_NOTIFICATION_METHODS
from pydantic import BaseModel

from incident_desk import __version__

logger = structlog.get_logger(__name__)

PREFIX = "incident_desk_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: a ping answers in a millisecond, a restart may wait minutes for a human.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
RESTART_TOOL = "restart_service"
# Label values come from the client: only names the protocol or the desk defines become series, so a client
# sending made-up methods or tool names cannot grow the desk's memory or a Prometheus server's.
KNOWN_METHODS = SPEC_CLIENT_METHODS | SPEC_CLIENT_NOTIFICATION_METHODS | {"logging/setLevel"}
OTHER = "other"
Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: Labels = ()) -> str:
    pairs = labels + extra
    if not pairs:
        return ""
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs) + "}"


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Metrics:
    """Counters and histograms by label set, safe to update from worker threads, rendered in text format."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = {}
        self._histograms: dict[str, dict[Labels, list[float]]] = {}  # bucket counts..., sum, count
        self._help: dict[str, str] = {}

    def describe(self, name: str, text: str) -> None:
        self._help[name] = text

    def count(self, name: str, labels: Labels, amount: float = 1.0) -> None:
        with self._lock:
            series = self._counters.setdefault(name, {})
            series[labels] = series.get(labels, 0.0) + amount

    def observe(self, name: str, labels: Labels, value: float) -> None:
        with self._lock:
            series = self._histograms.setdefault(name, {})
            state = series.get(labels)
            if state is None:
                state = series[labels] = [0.0] * (len(LATENCY_BUCKETS) + 2)
            for index, bound in enumerate(LATENCY_BUCKETS):
                if value <= bound:
                    state[index] += 1
            state[-2] += value
            state[-1] += 1

    def render(self, gauges: Iterable[tuple[str, Labels, float]] = ()) -> str:
        lines: list[str] = []
        with self._lock:
            counters = {name: dict(series) for name, series in self._counters.items()}
            histograms = {name: {k: list(v) for k, v in series.items()} for name, series in self._histograms.items()}
        for name in sorted(counters):
            self._header(lines, name, "counter")
            for labels, value in sorted(counters[name].items()):
                lines.append(f"{name}{_labels(labels)} {_number(value)}")
        for name in sorted(histograms):
            self._header(lines, name, "histogram")
            for labels, state in sorted(histograms[name].items()):
                for index, bound in enumerate(LATENCY_BUCKETS):
                    lines.append(f"{name}_bucket{_labels(labels, (('le', _number(bound)),))} {_number(state[index])}")
                lines.append(f"{name}_bucket{_labels(labels, (('le', '+Inf'),))} {_number(state[-1])}")
                lines.append(f"{name}_sum{_labels(labels)} {_number(state[-2])}")
                lines.append(f"{name}_count{_labels(labels)} {_number(state[-1])}")
        by_gauge: dict[str, list[tuple[Labels, float]]] = {}
        for name, labels, value in gauges:
            by_gauge.setdefault(name, []).append((labels, value))
        for name in sorted(by_gauge):
            self._header(lines, name, "gauge")
            lines.extend(f"{name}{_labels(labels)} {_number(value)}" for labels, value in by_gauge[name])
        return "\n".join(lines) + "\n"

    def _header(self, lines: list[str], name: str, kind: str) -> None:
        if name in self._help:
            lines.append(f"# HELP {name} {self._help[name]}")
        lines.append(f"# TYPE {name} {kind}")


REQUESTS = PREFIX + "requests_total"
DURATION = PREFIX + "request_duration_seconds"
APPROVALS = PREFIX + "approvals_total"
SCAN_BYTES = PREFIX + "scan_bytes_total"
SLOW_CALLS = PREFIX + "slow_calls_total"
SOURCE_UP = PREFIX + "source_up"
INFO = PREFIX + "build_info"


def _structured(result: HandlerResult) -> Mapping[str, Any] | None:
    """A tool result's structured content, whichever shape the handler returned it in."""
    if isinstance(result, BaseModel):
        content = getattr(result, "structured_content", None)
    elif isinstance(result, dict):
        content = result.get("structuredContent")
    else:
        content = None
    return content if isinstance(content, Mapping) else None


def _outcome(result: HandlerResult) -> str:
    if isinstance(result, BaseModel):
        if getattr(result, "is_error", False):
            return "tool_error"
        if type(result).__name__ == "InputRequiredResult":
            return "input_required"
    elif isinstance(result, dict) and result.get("isError") is True:
        return "tool_error"
    return "ok"


class CallTelemetry:
    """Server middleware: count and time every request, note approvals and bytes scanned, log slow calls.

    ``slow_call_seconds`` of None logs nothing; ``metrics`` of False keeps no series (the slow-call log only).
    """

    def __init__(
        self,
        *,
        metrics: bool,
        slow_call_seconds: float | None,
        target_names: Callable[[], Awaitable[frozenset[str]]] | None = None,
    ) -> None:
        self.metrics = Metrics() if metrics else None
        self.slow_call_seconds = slow_call_seconds
        self._target_names = target_names
        self._targets: frozenset[str] | None = None
        if self.metrics is not None:
            for name, text in (
                (REQUESTS, "MCP requests answered, by method, tool (or prompt) and outcome."),
                (DURATION, "Seconds from a request reaching the desk to its answer, by method and tool."),
                (APPROVALS, "restart_service decisions as journalled, by outcome."),
                (SCAN_BYTES, "Log bytes read by searches and timelines, by tool."),
                (SLOW_CALLS, "Requests slower than slow_call_seconds, by method and tool."),
                (SOURCE_UP, "1 when an incident source answered its last look, 0 when it did not."),
                (INFO, "Always 1; the desk's version as a label."),
            ):
                self.metrics.describe(name, text)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        started = time.perf_counter()
        target = await self._target(ctx)
        outcome = "error"
        result: HandlerResult = None
        try:
            result = await call_next(ctx)
            outcome = _outcome(result)
            return result
        except MCPError:
            outcome = "protocol_error"
            raise
        finally:
            elapsed = time.perf_counter() - started
            self._record(ctx.method if ctx.method in KNOWN_METHODS else OTHER, target, outcome, elapsed, result)

    async def _target(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The tool or prompt a request names, when the desk has one by that name; else "other" (or "")."""
        if ctx.method not in ("tools/call", "prompts/get"):
            return ""
        name = ctx.params.get("name") if ctx.params else None
        if self._targets is None and self._target_names is not None:
            self._targets = await self._target_names()  # the desk's tools and prompts never change while it runs
        return name if isinstance(name, str) and self._targets is not None and name in self._targets else OTHER

    def _record(self, method: str, target: str, outcome: str, elapsed: float, result: HandlerResult) -> None:
        slow = self.slow_call_seconds is not None and elapsed >= self.slow_call_seconds
        if slow:
            logger.warning("slow call", method=method, tool=target or None, seconds=round(elapsed, 3), outcome=outcome)
        metrics = self.metrics
        if metrics is None:
            return
        base = (("method", method), ("tool", target))
        metrics.count(REQUESTS, (*base, ("outcome", outcome)))
        metrics.observe(DURATION, base, elapsed)
        if slow:
            metrics.count(SLOW_CALLS, base)
        if method != "tools/call":
            return
        structured = _structured(result)
        if structured is None:
            return
        scanned = structured.get("scanned_bytes")
        if isinstance(scanned, int) and not isinstance(scanned, bool):
            metrics.count(SCAN_BYTES, (("tool", target),), scanned)
        decided = structured.get("outcome")
        if target == RESTART_TOOL and isinstance(decided, str):
            metrics.count(APPROVALS, (("outcome", decided),))

    def exposition(self, source_health: Callable[[], Mapping[str, bool]]) -> str:
        """The text a Prometheus scrape gets; source health is read when scraped, never looked up for it."""
        if self.metrics is None:
            return ""
        gauges: list[tuple[str, Labels, float]] = [(INFO, (("version", __version__),), 1.0)]
        gauges.extend((SOURCE_UP, (("source", source),), 1.0 if up else 0.0) for source, up in source_health().items())
        return self.metrics.render(gauges)
