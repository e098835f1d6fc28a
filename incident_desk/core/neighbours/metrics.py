"""Metrics around an incident from Prometheus: range queries over the incident's window, cut to a bounded number of
points per series (with a note when cut), summarised as min, max, last and a text sparkline.

Each query is one exchange through :mod:`core.outside` (a total deadline of ``timeout_seconds``, a body of at most
``max_response_bytes``), so a Prometheus that is down, hangs or drips gives a named :class:`MetricsUnavailable`
within the deadline. Label names and values are untrusted text, made one visible, capped line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from incident_desk.core import errors
from incident_desk.core.neighbours.untrusted import one_line

if TYPE_CHECKING:  # the HTTP client is imported by the first query, not by loading the settings
    from incident_desk.core.neighbours import outside

SecretReader = Callable[[str], str | None]
MAX_QUERY_CHARS = 4000
MAX_LABEL_CHARS = 200
MAX_SERIES_PER_QUERY = 20
ALERT_QUERY_NAME = "alert"
# An alert's own expression is written by whoever raised the alert, not by this desk's operator: when the operator
# lets the desk ask it at all (``alert_expression_queries``), its answer is held to tighter caps.
ALERT_MAX_SERIES = 5
ALERT_MAX_POINTS = 120
ALERT_MAX_RESPONSE_BYTES = 1024 * 1024
# Prometheus refuses a range query of more than 11,000 points per series; the step is widened to stay below.
PROMETHEUS_MAX_POINTS = 11_000
_SPARK = "▁▂▃▄▅▆▇█"


class MetricsConfig(BaseModel):
    """``[services.<name>.metrics]``: a Prometheus and the named PromQL queries to draw for the service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prometheus: Annotated[str, Field(pattern=r"^https?://[^\s/@]+(/\S*)?$")]
    queries: dict[str, Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]] = Field(default_factory=dict)
    step_seconds: Annotated[float, Field(ge=1, le=3600)] = 60.0
    auth: Literal["none", "basic", "bearer"] = "none"
    username: str | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=120)] = 5.0
    max_response_bytes: Annotated[int, Field(ge=1024, le=1024**3)] = 8 * 1024 * 1024

    @field_validator("queries")
    @classmethod
    def _names_are_plain(cls, queries: dict[str, str]) -> dict[str, str]:
        for name in queries:
            if not name or not all(c.isalnum() or c in "_-." for c in name) or len(name) > 64:
                raise ValueError(f"query name {name!r} is not valid: use letters, digits, . _ - (at most 64)")
        return queries

    @model_validator(mode="after")
    def _basic_needs_a_user(self) -> MetricsConfig:
        if self.auth == "basic" and not self.username:
            raise ValueError("metrics auth = 'basic' needs a username")
        return self


def secret_name(service: str) -> str:
    """The keychain entry (and, upper-cased, the INCIDENT_DESK_* variable) with a service's Prometheus secret."""
    return f"metrics-{service}"


class MetricsUnavailable(errors.Unavailable):
    """Prometheus gave no usable answer; the message names it and why, never a secret."""


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    step_seconds: float


@dataclass(frozen=True)
class Point:
    time: datetime
    value: float


@dataclass(frozen=True)
class Series:
    """One series of one named query: its points (at most the cap) and how many Prometheus answered."""

    name: str
    query: str
    labels: dict[str, str]
    points: list[Point]
    total_points: int

    @property
    def cut(self) -> bool:
        return self.total_points > len(self.points)

    def finite(self) -> list[float]:
        return [p.value for p in self.points if math.isfinite(p.value)]


@dataclass(frozen=True)
class QueryProblem:
    name: str
    reason: str


def alert_expression(generator_url: str | None) -> str | None:
    """The PromQL expression of an alert, from its generator URL's ``g0.expr`` (None when it has none)."""
    if not generator_url:
        return None
    try:
        found = parse_qs(urlsplit(generator_url[: MAX_QUERY_CHARS * 4]).query).get("g0.expr")
    except ValueError:
        return None
    if not found or not found[0].strip():
        return None
    return found[0][:MAX_QUERY_CHARS]


def incident_window(
    opened: datetime, now: datetime, minutes_before: float, minutes_after: float | None, step_seconds: float
) -> Window:
    """From ``minutes_before`` before the incident opened to ``minutes_after`` after it (never past now); the step
    is widened when the span would need more points than Prometheus answers."""
    start = opened - timedelta(minutes=minutes_before)
    end = now if minutes_after is None else min(now, opened + timedelta(minutes=minutes_after))
    end = max(end, start + timedelta(seconds=step_seconds))
    span = (end - start).total_seconds()
    step = max(step_seconds, math.ceil(span / (PROMETHEUS_MAX_POINTS - 1)))
    return Window(start.astimezone(UTC), end.astimezone(UTC), float(step))


@dataclass(frozen=True)
class Caps:
    """How much of one query's answer the desk takes: series, points per series, bytes of the response."""

    series: int
    points: int
    response_bytes: int


def caps_for(config: MetricsConfig, max_points: int, *, from_alert: bool) -> Caps:
    """The desk's caps for a named query; tighter for the expression an alert brought."""
    if from_alert:
        return Caps(
            ALERT_MAX_SERIES,
            min(max_points, ALERT_MAX_POINTS),
            min(config.max_response_bytes, ALERT_MAX_RESPONSE_BYTES),
        )
    return Caps(MAX_SERIES_PER_QUERY, max_points, config.max_response_bytes)


def range_request(
    config: MetricsConfig, service: str, secret: SecretReader, query: str, window: Window, max_bytes: int | None = None
) -> outside.Request:
    """The ``/api/v1/query_range`` exchange for one query (MetricsUnavailable when its secret is missing)."""
    from incident_desk.core.neighbours import outside

    headers = {"accept": "application/json"}
    basic: tuple[str, str] | None = None
    if config.auth != "none":
        value = secret(secret_name(service))
        if not value:
            variable = "INCIDENT_DESK_" + secret_name(service).upper().replace("-", "_").replace(".", "_")
            raise MetricsUnavailable(
                f"{describe(config, service)} needs a {'password' if config.auth == 'basic' else 'token'}: set it "
                f"with `incident-desk key set --metrics {service}` or {variable}"
            )
        if config.auth == "basic":
            basic = (config.username or "", value)
        else:
            headers["Authorization"] = f"Bearer {value}"
    return outside.Request(
        "GET",
        config.prometheus.rstrip("/") + "/api/v1/query_range",
        what=describe(config, service),
        deadline_seconds=config.timeout_seconds,
        max_bytes=config.max_response_bytes if max_bytes is None else max_bytes,
        params={
            "query": query,
            "start": _stamp(window.start),
            "end": _stamp(window.end),
            "step": f"{window.step_seconds:g}",
        },
        headers=headers,
        auth=basic,
    )


def describe(config: MetricsConfig, service: str) -> str:
    return f"prometheus for {service} at {config.prometheus}"


def _stamp(moment: datetime) -> str:
    return f"{moment.timestamp():.3f}"


async def fetch_all(
    config: MetricsConfig,
    service: str,
    secret: SecretReader,
    queries: Mapping[str, str],
    window: Window,
    max_points: int,
    from_alert: str | None = None,
) -> tuple[list[Series], list[QueryProblem]]:
    """Every named query over the window, asked at once, each in an outside call's thread with its deadline and
    abandoned when the request is cancelled; MetricsUnavailable (the first query's) when Prometheus cannot answer,
    a QueryProblem for each query it refuses. Series and problems come in the queries' order. ``from_alert`` names
    the query an alert brought, held to the alert's caps."""
    import functools

    import anyio.to_thread

    from incident_desk.core.neighbours import outside

    answers: dict[str, list[Series] | QueryProblem | MetricsUnavailable] = {}

    async def ask(name: str, query: str) -> None:
        caps = caps_for(config, max_points, from_alert=name == from_alert)
        call = functools.partial(fetch_series, config, service, secret, name, query, window, caps)
        try:
            answers[name] = await anyio.to_thread.run_sync(
                call, limiter=outside.outside_threads(), abandon_on_cancel=True
            )
        except MetricsUnavailable as exc:
            answers[name] = exc

    async with anyio.create_task_group() as group:
        for name, query in queries.items():
            group.start_soon(ask, name, query)
    series: list[Series] = []
    problems: list[QueryProblem] = []
    for name in queries:
        answer = answers[name]
        if isinstance(answer, MetricsUnavailable):
            raise answer
        if isinstance(answer, QueryProblem):
            problems.append(answer)
        else:
            series.extend(answer)
    return series, problems


def fetch_series(
    config: MetricsConfig, service: str, secret: SecretReader, name: str, query: str, window: Window, caps: Caps
) -> list[Series] | QueryProblem:
    """One named query over the window (blocks for at most its deadline: call it off the event loop).

    A Prometheus that cannot answer raises MetricsUnavailable; one that refuses this query (bad PromQL) is a
    QueryProblem for it alone.
    """
    from incident_desk.core.neighbours import outside

    request = range_request(config, service, secret, query, window, caps.response_bytes)
    try:
        response = outside.exchange(request)
    except outside.OutsideError as exc:
        raise MetricsUnavailable(str(exc)) from None
    if response.status_code in (401, 403):
        raise MetricsUnavailable(f"{request.what} refused the credentials (HTTP {response.status_code})")
    try:
        body = response.json()
    except ValueError:
        raise MetricsUnavailable(f"{request.what} answered HTTP {response.status_code}, not JSON") from None
    if not isinstance(body, dict):
        raise MetricsUnavailable(f"{request.what} answered JSON that is not an object")
    if body.get("status") != "success":
        if response.status_code in (400, 422):
            return QueryProblem(name, one_line(body.get("error") or f"HTTP {response.status_code}", 300))
        raise MetricsUnavailable(f"{request.what} answered HTTP {response.status_code}")
    data = body.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise MetricsUnavailable(f"{request.what} answered without a result list")
    return [
        series
        for raw in data["result"][: caps.series]
        if (series := _series(name, query, raw, caps.points)) is not None
    ]


def _series(name: str, query: str, raw: Any, max_points: int) -> Series | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("values"), list):
        return None
    metric = raw.get("metric")
    if not isinstance(metric, dict):
        metric = {}
    labels = {one_line(k, MAX_LABEL_CHARS): one_line(v, MAX_LABEL_CHARS) for k, v in sorted(metric.items())}
    points: list[Point] = []
    for pair in raw["values"]:
        point = _point(pair)
        if point is not None:
            points.append(point)
    total = len(points)
    # The cap keeps the points nearest the end of the window: the newest state is what a responder reads first.
    return Series(name, query, labels, points[-max_points:] if total > max_points else points, total)


def _point(pair: Any) -> Point | None:
    if not isinstance(pair, list) or len(pair) != 2:
        return None
    try:
        return Point(datetime.fromtimestamp(float(pair[0]), UTC), float(pair[1]))
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def sparkline(values: list[float], width: int = 60) -> str:
    """One block per value (or per group of values averaged, past ``width``), scaled between the min and max."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return ""
    group = max(1, math.ceil(len(finite) / width))
    columns = [sum(finite[i : i + group]) / len(finite[i : i + group]) for i in range(0, len(finite), group)]
    low, high = min(columns), max(columns)
    if high <= low:
        return _SPARK[0] * len(columns)
    steps = len(_SPARK) - 1
    return "".join(_SPARK[round((v - low) / (high - low) * steps)] for v in columns)


def number(value: float) -> str:
    """A metric value as people read it: up to 4 significant digits."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def queries_for(config: MetricsConfig | None, alert_query: str | None) -> Mapping[str, str]:
    """The named queries of a service, plus its alert's own expression as ``alert`` when one is given (the caller
    gives it only when the operator lets the desk ask an alert's expression)."""
    queries = dict(config.queries) if config is not None else {}
    if alert_query and ALERT_QUERY_NAME not in queries:
        queries[ALERT_QUERY_NAME] = alert_query
    return queries


def check(config: MetricsConfig, service: str, secret: SecretReader) -> tuple[bool, str]:
    """For ``doctor``: whether the service's Prometheus answers an instant query with these credentials."""
    from incident_desk.core.neighbours import outside

    try:
        request = range_request(
            config,
            service,
            secret,
            "vector(1)",
            incident_window(datetime.now(UTC), datetime.now(UTC), 1, 0, config.step_seconds),
        )
        response = outside.exchange(request)
    except MetricsUnavailable as exc:
        return False, str(exc)
    except outside.OutsideError as exc:
        return False, str(exc)
    if response.status_code in (401, 403):
        return False, f"{request.what} refused the credentials (HTTP {response.status_code})"
    if response.status_code != 200:
        return False, f"{request.what} answered HTTP {response.status_code}"
    return True, f"{config.prometheus} answers ({len(config.queries)} named queries)"
