"""query_incident_metrics against a real Prometheus with backfilled history, both eras: the series equal a direct
query of the same API, the point cap cuts and says so, an alert's own expression is asked, and a Prometheus that is
down, hangs or drips gives a named failure within its deadline while the desk keeps answering pings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from mcp import Client

from incident_desk.core.neighbours.metrics import ALERT_MAX_POINTS, ALERT_MAX_SERIES
from incident_desk.server import build_server
from tests.alertmanager import alert, needs_alertmanager, running_alertmanager
from tests.faulty_neighbour import Fault, faulty_neighbour
from tests.helpers import AppFactory, connect, free_port, pinging, text_of
from tests.prometheus import Prometheus, Sample, needs_prometheus, openmetrics, running_prometheus

pytestmark = pytest.mark.anyio

SERVICE = "payments-api"
ERRORS = f'sum(rate(http_requests_total{{job="{SERVICE}",code=~"5.."}}[5m]))'
LATENCY = f'request_latency_seconds{{job="{SERVICE}"}}'
PING_WITHIN = 0.5


def _now_minute() -> datetime:
    return datetime.now(UTC).replace(second=0, microsecond=0)


OPENED = _now_minute() - timedelta(hours=3)


def history() -> str:
    """Four hours of a payments service, one sample a minute: 5xx climb after the incident opens; latency too."""
    samples: list[Sample] = []
    total = 0.0
    start = OPENED - timedelta(hours=2)
    for minute in range(4 * 60):
        at = start + timedelta(minutes=minute)
        failing = OPENED <= at < OPENED + timedelta(minutes=40)
        total += 300.0 if failing else 6.0
        samples.append(Sample("http_requests_total", {"job": SERVICE, "code": "503"}, at, total))
        for route, base in (("/pay", 0.12), ("/refund", 0.3)):
            value = base * (8 if failing else 1) + (minute % 7) / 100
            samples.append(Sample("request_latency_seconds", {"job": SERVICE, "route": route}, at, value))
    return openmetrics(samples, {"http_requests_total": "counter"})


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    with running_prometheus(tmp_path_factory.mktemp("prometheus"), history()) as server:
        yield server


def incident_desk(root: Path, opened: datetime = OPENED) -> Path:
    entry = root / "incidents" / "INC-7001"
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        f'title="payments 503s"\nservice="{SERVICE}"\nseverity="SEV2"\nstatus="open"\n'
        f"opened={opened.isoformat().replace('+00:00', 'Z')}\n",
        encoding="utf-8",
    )
    (entry / "log.txt").write_text(
        f"{opened:%H:%M:%S} {SERVICE} ERROR upstream 503\n{opened:%H:%M:%S} {SERVICE} INFO retrying\n",
        encoding="utf-8",
    )
    return root


def metrics_config(url: str, **extra: Any) -> dict[str, Any]:
    return {SERVICE: {"metrics": {"prometheus": url, "queries": {"error_rate": ERRORS, "latency": LATENCY}, **extra}}}


def _points(series: dict[str, Any]) -> list[tuple[float, float]]:
    return [(datetime.fromisoformat(p["time"]).timestamp(), p["value"]) for p in series["points"]]


def _direct(prometheus: Prometheus, query: str, answer: dict[str, Any]) -> dict[str, list[tuple[float, float]]]:
    start = datetime.fromisoformat(answer["start"]).timestamp()
    end = datetime.fromisoformat(answer["end"]).timestamp()
    found = prometheus.query_range(query, start, end, answer["step_seconds"])
    return {str(sorted(s["metric"].items())): [(float(t), float(v)) for t, v in s["values"]] for s in found}


def _returned(answer: dict[str, Any], name: str) -> dict[str, list[tuple[float, float]]]:
    return {str(sorted(s["labels"].items())): _points(s) for s in answer["series"] if s["name"] == name}


@needs_prometheus
async def test_the_series_equal_a_direct_query(
    prometheus: Prometheus, make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    app = make_app(data_dir=incident_desk(tmp_path / "desk"), services=metrics_config(prometheus.url))
    async with connect(build_server(app), era) as client:
        result = await client.call_tool(
            "query_incident_metrics", {"incidentId": "INC-7001", "minutes_before": 60, "minutes_after": 90}
        )
    assert not result.is_error, text_of(result)
    answer = result.structured_content
    assert answer is not None
    assert answer["step_seconds"] == 60
    assert datetime.fromisoformat(answer["start"]) == OPENED - timedelta(minutes=60)
    assert datetime.fromisoformat(answer["end"]) == OPENED + timedelta(minutes=90)
    for name, query in (("error_rate", ERRORS), ("latency", LATENCY)):
        returned = _returned(answer, name)
        direct = _direct(prometheus, query, answer)
        assert returned == direct, name
        assert all(len(points) > 100 for points in returned.values())
    assert len(_returned(answer, "latency")) == 2  # one series per route
    errors = next(s for s in answer["series"] if s["name"] == "error_rate")
    values = [p["value"] for p in errors["points"]]
    assert (errors["min"], errors["max"], errors["last"]) == (min(values), max(values), values[-1])
    assert errors["max"] > 10 * errors["min"] > 0  # the climb after the incident opened is in the data
    assert not errors["cut"]
    text = text_of(result)
    assert f"INC-7001 {SERVICE}: metrics" in text
    line = next(line for line in text.splitlines() if line.startswith("error_rate"))
    assert "█" in line and "▁" in line
    assert f"max {errors['max']:.4g}" in line and f"last {errors['last']:.4g}" in line


@needs_prometheus
async def test_one_query_by_name_and_a_bad_query_named(
    prometheus: Prometheus, make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    config = metrics_config(prometheus.url)
    config[SERVICE]["metrics"]["queries"]["broken"] = "sum(rate(http_requests_total[5m]"
    app = make_app(data_dir=incident_desk(tmp_path / "desk"), services=config)
    async with connect(build_server(app), era) as client:
        one = await client.call_tool("query_incident_metrics", {"incidentId": "INC-7001", "name": "latency"})
        every = await client.call_tool("query_incident_metrics", {"incidentId": "INC-7001"})
        unknown = await client.call_tool("query_incident_metrics", {"incidentId": "INC-7001", "name": "nope"})
    assert one.structured_content is not None
    assert {s["name"] for s in one.structured_content["series"]} == {"latency"}
    assert every.structured_content is not None
    assert [p.split(":")[0] for p in every.structured_content["problems"]] == ["broken"]
    assert "query broken: " in text_of(every)
    assert {s["name"] for s in every.structured_content["series"]} == {"error_rate", "latency"}
    assert unknown.is_error
    assert text_of(unknown) == f"{SERVICE} has no query named 'nope' (its queries: broken, error_rate, latency)"


@needs_prometheus
async def test_the_point_cap_cuts_and_says_so(
    prometheus: Prometheus, make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    app = make_app(
        data_dir=incident_desk(tmp_path / "desk"), services=metrics_config(prometheus.url), metrics_max_points=25
    )
    async with connect(build_server(app), era) as client:
        result = await client.call_tool(
            "query_incident_metrics",
            {"incidentId": "INC-7001", "name": "error_rate", "minutes_before": 60, "minutes_after": 60},
        )
    answer = result.structured_content
    assert answer is not None
    [series] = answer["series"]
    [direct] = _direct(prometheus, ERRORS, answer).values()
    assert series["cut"] is True
    assert series["total_points"] == len(direct) == 121
    assert _points(series) == direct[-25:]  # the newest points, unchanged
    assert "cut: showing the newest 25 of 121 points (metrics_max_points = 25)" in text_of(result)


async def _metrics_of_an_alert(
    prometheus: Prometheus,
    make_app: AppFactory,
    tmp_path: Path,
    era: str,
    expression: str,
    minutes_after: int = 60,
    **settings: Any,
) -> Any:
    """query_incident_metrics for an Alertmanager alert whose generator URL carries ``expression``."""
    with running_alertmanager(tmp_path) as manager:
        firing = alert("PaymentsSlow", starts=OPENED, service=SERVICE, summary="payments slow")
        firing["generatorURL"] = f"{prometheus.url}/graph?g0.expr={quote(expression)}&g0.tab=1"
        manager.post(firing)
        app = make_app(
            incident_sources=[{"kind": "alertmanager", "name": "am", "url": manager.url}],
            services={SERVICE: {"metrics": {"prometheus": prometheus.url, "queries": {"errors": ERRORS}}}},
            **settings,
        )
        async with connect(build_server(app), era) as client:
            listed = await client.call_tool("list_incidents", {})
            assert listed.structured_content is not None
            [incident] = [i for i in listed.structured_content["incidents"] if i["source"] == "am"]
            return await client.call_tool(
                "query_incident_metrics",
                {"incidentId": incident["id"], "minutes_before": 10, "minutes_after": minutes_after},
            )


@needs_prometheus
@needs_alertmanager
async def test_an_alerts_own_expression_is_not_asked_by_default(
    prometheus: Prometheus, make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    """Whoever raises an alert writes its g0.expr; the desk would send it to Prometheus with its credentials."""
    expression = f'request_latency_seconds{{job="{SERVICE}",route="/pay"}} > 0.5'
    result = await _metrics_of_an_alert(prometheus, make_app, tmp_path, era, expression)
    assert not result.is_error, text_of(result)
    answer = result.structured_content
    assert answer is not None
    assert {s["name"] for s in answer["series"]} == {"errors"}, "only the desk's own queries are asked"
    assert any("alert_expression_queries = true" in note for note in answer["notes"])


@needs_prometheus
@needs_alertmanager
async def test_an_alert_brings_its_own_expression_when_the_desk_allows_it(
    prometheus: Prometheus, make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    expression = f'request_latency_seconds{{job="{SERVICE}",route="/pay"}} > 0.5'
    result = await _metrics_of_an_alert(prometheus, make_app, tmp_path, era, expression, alert_expression_queries=True)
    assert not result.is_error, text_of(result)
    answer = result.structured_content
    assert answer is not None
    assert {(s["name"], s["query"]) for s in answer["series"]} == {("errors", ERRORS), ("alert", expression)}
    assert _returned(answer, "alert") == _direct(prometheus, expression, answer)
    assert next(s for s in answer["series"] if s["name"] == "alert")["points"], "the expression held in the incident"
    said = 'note: "alert" came from the alert: its own expression'
    assert said in text_of(result)


@needs_prometheus
@needs_alertmanager
async def test_an_alerts_expression_is_held_to_its_own_caps(
    prometheus: Prometheus, make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    """Six dense series over three hours (two routes, three copies): the alert gets 5 series of 120 points."""
    latency = f'request_latency_seconds{{job="{SERVICE}"}}'
    expression = " or ".join(f'label_replace({latency}, "copy", "{n}", "", "")' for n in range(3))
    result = await _metrics_of_an_alert(
        prometheus, make_app, tmp_path, era, expression, minutes_after=170, alert_expression_queries=True
    )
    assert not result.is_error, text_of(result)
    answer = result.structured_content
    assert answer is not None
    direct = _direct(prometheus, expression, answer)
    assert len(direct) > ALERT_MAX_SERIES, "the expression answers more series than the cap"
    from_alert = [s for s in answer["series"] if s["name"] == "alert"]
    assert len(from_alert) == ALERT_MAX_SERIES
    for series in from_alert:
        answered = direct[str(sorted(series["labels"].items()))]
        assert len(answered) > ALERT_MAX_POINTS
        assert series["total_points"] == len(answered)
        assert _points(series) == answered[-ALERT_MAX_POINTS:], "the newest points, cut at the alert's cap"
    [errors] = [s for s in answer["series"] if s["name"] == "errors"]
    assert len(errors["points"]) == errors["total_points"] > ALERT_MAX_POINTS, "the desk's own query is not cut"


@pytest.mark.timing
@pytest.mark.parametrize("fault", ["hang", "drip", "down"])
async def test_prometheus_down_or_slow_is_a_named_bounded_failure(
    fault: str, make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    with _neighbour(fault) as url:
        app = make_app(data_dir=incident_desk(tmp_path / "desk"), services=metrics_config(url, timeout_seconds=1.0))
        async with connect(build_server(app), era) as client:
            # Something trivial: a ping where the era has one, else the tool list.
            ask = client.send_ping if era == "legacy" else client.list_tools
            async with pinging(client, asks=(ask,)) as latencies:
                began = time.monotonic()
                result = await client.call_tool("query_incident_metrics", {"incidentId": "INC-7001"})
                took = time.monotonic() - began
    assert result.is_error
    reason = "cannot be reached: connection refused" if fault == "down" else "did not answer within 1s"
    assert text_of(result) == f"prometheus for {SERVICE} at {url} {reason}"
    assert took < 5, f"{fault}: the call took {took:.1f}s"
    assert latencies, "the pings did not run"
    assert max(latencies) < PING_WITHIN, f"{fault}: slowest ping {max(latencies):.2f}s"


def _neighbour(fault: str) -> Any:
    @contextmanager
    def nothing_listening() -> Iterator[str]:
        yield f"http://127.0.0.1:{free_port()}"

    @contextmanager
    def misbehaving(kind: Fault) -> Iterator[str]:
        with faulty_neighbour(kind) as neighbour:
            yield neighbour.url

    return nothing_listening() if fault == "down" else misbehaving(fault)  # type: ignore[arg-type]


async def test_a_service_without_metrics_is_told_what_to_configure(make_server: Any, era: str) -> None:
    async with connect(make_server(), era) as client:
        result = await client.call_tool("query_incident_metrics", {"incidentId": "INC-1042"})
    assert result.is_error
    assert text_of(result) == (
        "payments-api has no metrics: add [services.payments-api.metrics] with a prometheus URL and named queries"
    )


async def test_basic_auth_secret_missing_is_named(make_app: AppFactory, tmp_path: Path, era: str) -> None:
    config = metrics_config("http://127.0.0.1:9", auth="basic", username="desk")
    app = make_app(data_dir=incident_desk(tmp_path / "desk"), services=config)
    async with connect(build_server(app), era) as client:
        result = await client.call_tool("query_incident_metrics", {"incidentId": "INC-7001"})
    assert result.is_error
    assert text_of(result) == (
        f"prometheus for {SERVICE} at http://127.0.0.1:9 needs a password: set it with "
        f"`incident-desk key set --metrics {SERVICE}` or INCIDENT_DESK_METRICS_PAYMENTS_API"
    )


@needs_prometheus
async def test_basic_auth_from_the_environment(
    make_app: AppFactory, tmp_path: Path, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_prometheus(tmp_path, history(), basic_auth=("desk", "s3cret-prom")) as guarded:
        config = metrics_config(guarded.url, auth="basic", username="desk")
        app = make_app(data_dir=incident_desk(tmp_path / "desk"), services=config)
        arguments = {"incidentId": "INC-7001", "name": "latency", "minutes_before": 5, "minutes_after": 5}
        async with connect(build_server(app), era) as client:
            monkeypatch.setenv("INCIDENT_DESK_METRICS_PAYMENTS_API", "wrong")
            refused = await client.call_tool("query_incident_metrics", arguments)
            monkeypatch.setenv("INCIDENT_DESK_METRICS_PAYMENTS_API", "s3cret-prom")
            answered = await client.call_tool("query_incident_metrics", arguments)
        assert answered.structured_content is not None, text_of(answered)
        direct = _direct(guarded, LATENCY, answered.structured_content)
    assert refused.is_error
    assert text_of(refused) == f"prometheus for {SERVICE} at {guarded.url} refused the credentials (HTTP 401)"
    assert not answered.is_error, text_of(answered)
    assert _returned(answered.structured_content, "latency") == direct
    assert "s3cret-prom" not in text_of(answered) + text_of(refused)


@needs_prometheus
def test_doctor_s_check_of_a_service_s_prometheus(prometheus: Prometheus) -> None:
    from incident_desk.core.neighbours.metrics import MetricsConfig, check

    def no_secret(name: str) -> None:
        return None

    answering = MetricsConfig(prometheus=prometheus.url, queries={"latency": LATENCY})
    assert check(answering, SERVICE, no_secret) == (True, f"{prometheus.url} answers (1 named queries)")
    down = f"http://127.0.0.1:{free_port()}"
    assert check(MetricsConfig(prometheus=down), SERVICE, no_secret) == (
        False,
        f"prometheus for {SERVICE} at {down} cannot be reached: connection refused",
    )


@pytest.mark.subprocess
@needs_prometheus
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_over_stdio_from_a_config_file(prometheus: Prometheus, tmp_path: Path, mode: str) -> None:
    """The desk as a client starts it: a subprocess reading the issue's TOML shape from its config file."""
    import sys

    from mcp import StdioServerParameters

    from tests.helpers import ROOT, child_env

    config = tmp_path / "desk.toml"
    config.write_text(
        f'data_dir = "{incident_desk(tmp_path / "desk")}"\n\n'
        f"[services.{SERVICE}.metrics]\n"
        f'prometheus = "{prometheus.url}"\n'
        f"queries = {{ error_rate = '{ERRORS}', latency = '{LATENCY}' }}\n",
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "incident_desk", "--config", str(config)],
        cwd=str(ROOT),
        env=child_env(tmp_path / "audit.sqlite3"),
    )
    async with Client(params, mode=mode) as client:
        result = await client.call_tool(
            "query_incident_metrics", {"incidentId": "INC-7001", "name": "error_rate", "minutes_after": 60}
        )
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    answer = result.structured_content
    assert _returned(answer, "error_rate") == _direct(prometheus, ERRORS, answer)
    assert text_of(result).splitlines()[1].startswith("error_rate: ")


@needs_prometheus
async def test_without_minutes_after_an_old_incident_s_window_still_holds_its_opening(
    prometheus: Prometheus, make_app: AppFactory, tmp_path: Path, era: str
) -> None:
    app = make_app(
        data_dir=incident_desk(tmp_path / "desk"), services=metrics_config(prometheus.url), metrics_max_points=100
    )
    async with connect(build_server(app), era) as client:
        result = await client.call_tool("query_incident_metrics", {"incidentId": "INC-7001", "name": "error_rate"})
    answer = result.structured_content
    assert answer is not None
    assert datetime.fromisoformat(answer["start"]) == OPENED - timedelta(minutes=30)
    assert datetime.fromisoformat(answer["end"]) == OPENED + timedelta(minutes=69)
    [series] = answer["series"]
    assert not series["cut"] and len(series["points"]) == 100
    assert answer["notes"] == [
        "the window ends 69 minutes after the incident opened, so each series fits metrics_max_points; "
        "pass minutes_after for a later end"
    ]
    assert "note: the window ends 69 minutes after" in text_of(result)
