"""The config shapes of metrics and change sources (the TOML in the issue is the contract), their refusals, and the
parsing of change records and alert generator URLs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from incident_desk.app import source_secret
from incident_desk.cli import main as cli
from incident_desk.core.neighbours.metrics import alert_expression, incident_window, secret_name
from incident_desk.core.sources.changes import CommandChangeConfig, FilesChangeConfig, parse_record
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import Settings, load_settings
from tests.fakes import MemoryKeyring

CONTRACT = """
[services.payments-api]
kind = "simulate"

[services.payments-api.metrics]
prometheus = "http://127.0.0.1:9090"
queries = { error_rate = 'sum(rate(http_requests_total{job="payments-api",code=~"5.."}[1m]))', p99_seconds = '...' }

[services.search-api.metrics]
prometheus = "https://prometheus.example:9090/prom"
auth = "bearer"

[[change_sources]]
kind = "files"
name = "deploys"
paths = ["/var/log/deploys.jsonl"]

[[change_sources]]
kind = "command"
name = "rollouts"
argv = ["kubectl", "rollout", "history", "deploy/{service}"]
"""


def _load(tmp_path: Path, text: str) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    return load_settings(config_file=config)


def test_the_issue_s_toml_is_read_as_written(tmp_path: Path) -> None:
    settings = _load(tmp_path, CONTRACT)
    metrics = settings.service_metrics
    assert sorted(metrics) == ["payments-api", "search-api"]
    assert metrics["payments-api"].queries["error_rate"].startswith("sum(rate(http_requests_total{")
    assert metrics["search-api"].auth == "bearer"
    assert "payments-api" in settings.services  # the restart action stays
    assert "search-api" not in settings.services  # metrics alone are no action
    kinds = [type(source) for source in settings.change_sources]
    assert kinds == [FilesChangeConfig, CommandChangeConfig]


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[services.a.metrics]\nprometheus = "ftp://x"\n', "prometheus"),
        ('[services.a.metrics]\nprometheus = "http://x"\nqueries = { "bad name" = "up" }\n', "bad name"),
        ('[services.a.metrics]\nprometheus = "http://x"\nauth = "basic"\n', "needs a username"),
        ('[[change_sources]]\nkind = "files"\nname = "d"\npaths = ["deploys.jsonl"]\n', "relative"),
        ('[[change_sources]]\nkind = "command"\nname = "c"\nargv = ["git", "{nope}"]\n', "unknown placeholder"),
        ('[[change_sources]]\nkind = "rss"\nname = "c"\n', "change_sources"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, toml: str, named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        _load(tmp_path, toml)


def test_change_records_json_or_time_and_summary() -> None:
    json_line = '{"time": "2026-11-29T10:41:00Z", "service": "payments-api", "summary": "deploy v2\\u001b[31m"}'
    event = parse_record(json_line, "deploys", None)
    assert event is not None
    assert (event.time, event.service, event.summary) == (
        datetime(2026, 11, 29, 10, 41, tzinfo=UTC),
        "payments-api",
        "deploy v2␛[31m",
    )
    plain = parse_record("2026-11-29T12:41:00+02:00 Merge pull request #12", "git", "payments-api")
    assert plain is not None and plain.time == datetime(2026, 11, 29, 10, 41, tzinfo=UTC)
    assert plain.summary == "Merge pull request #12"
    for junk in ("", "not a record", '{"time": "yesterday", "service": "a"}', '{"time": "2026-11-29"}', "[1, 2]"):
        assert parse_record(junk, "x", None) is None, junk
    assert parse_record('{"time": "2026-11-29T10:41:00Z", "service": "../etc"}', "x", None) is None


def test_alert_expression_from_the_generator_url() -> None:
    url = "http://prometheus:9090/graph?g0.expr=rate%28x%5B5m%5D%29+%3E+1&g0.tab=1"
    assert alert_expression(url) == "rate(x[5m]) > 1"
    assert alert_expression("http://prometheus:9090/graph") is None
    assert alert_expression(None) is None
    assert alert_expression("not a url at all") is None


def test_a_long_window_widens_the_step_to_stay_within_prometheus_s_limit() -> None:
    opened = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    now = datetime(2026, 12, 29, 10, 0, tzinfo=UTC)
    window = incident_window(opened, now, 30, None, 60)
    assert window.end == now and (window.end - window.start).total_seconds() / window.step_seconds < 11_000
    short = incident_window(opened, now, 30, 60, 60)
    assert (short.step_seconds, short.end) == (60, datetime(2026, 11, 29, 11, 0, tzinfo=UTC))


def test_key_set_metrics_stores_the_secret_the_desk_reads(
    memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("getpass.getpass", lambda prompt="", stream=None: "prom-token-123")
    assert cli.main(["key", "set", "--metrics", "payments-api"]) == 0
    assert memory_keyring.store == {("incident-desk", "metrics-payments-api"): "prom-token-123"}
    assert "prom-token-123" not in "".join(capsys.readouterr())
    assert source_secret(load_settings())(secret_name("payments-api")) == "prom-token-123"
    monkeypatch.setenv("INCIDENT_DESK_METRICS_PAYMENTS_API", "from-the-environment")
    assert source_secret(load_settings())(secret_name("payments-api")) == "from-the-environment"
