"""investigate_incident through a real MCP client, both eras: on a generated corpus of 20 incidents (steady noise
with errors that were always there, one injected error template starting shortly before each opening, a deploy just
before it in a change file, a queue-depth step on a real Prometheus) the injected template ranks first among the
log patterns and is new, the deploy and the step are found, and the text keeps to its token budget."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from incident_desk.cli import main as cli
from incident_desk.server import build_server
from tests.evidence_big_log import OPENED as BIG_OPENED
from tests.evidence_big_log import write_big_log
from tests.evidence_corpus import (
    DEPLOY_MINUTES_BEFORE,
    QUEUE_AFTER,
    QUEUE_BEFORE,
    STEP_MINUTES_BEFORE,
    CorpusIncident,
    queue_history,
    services,
    write_corpus,
)
from tests.helpers import AppFactory, connect, pinging, text_of
from tests.prometheus import Prometheus, needs_prometheus, openmetrics, running_prometheus

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[CorpusIncident]]:
    root = tmp_path_factory.mktemp("corpus")
    changes = root / "deploys.jsonl"
    return root / "desk", changes, write_corpus(root / "desk", changes)


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, corpus: tuple[Path, Path, list[CorpusIncident]]
) -> Iterator[Prometheus]:
    history = openmetrics(queue_history(corpus[2]), {"queue_depth": "gauge"})
    with running_prometheus(tmp_path_factory.mktemp("prometheus"), history) as server:
        yield server


def _by_kind(evidence: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [f for f in evidence["findings"] if f["kind"] == kind]


@needs_prometheus
async def test_the_injected_template_the_deploy_and_the_step_are_found_across_the_corpus(
    corpus: tuple[Path, Path, list[CorpusIncident]], prometheus: Prometheus, make_app: AppFactory, era: str
) -> None:
    root, changes, incidents = corpus
    app = make_app(
        data_dir=root,
        services=services(incidents, prometheus.url),
        change_sources=[{"kind": "files", "name": "deploys", "paths": [str(changes)]}],
    )
    first_and_new = 0
    async with connect(build_server(app), era) as client:
        for incident in incidents:
            result = await client.call_tool("investigate_incident", {"incidentId": incident.id})
            assert not result.is_error, text_of(result)
            evidence = result.structured_content
            assert evidence is not None and evidence["incident_id"] == incident.id
            assert evidence["covers"].startswith("the whole log")
            text = text_of(result)
            assert len(text.encode()) <= 1500 * 4
            patterns = _by_kind(evidence, "log_pattern")
            top = patterns[0]
            if top["first_line"] == incident.first_injected_line and top["new"]:
                first_and_new += 1
                assert "ERROR" in top["pattern"] and top["sample"].endswith(incident.injected.split(" ", 1)[1])
                assert top["provenance"]["cursor"].startswith(f"L{incident.first_injected_line}@")
            assert not any(p["new"] for p in patterns[1:] if "ERROR" in p["pattern"]), "the old errors are not new"
            (deploy, *older) = _by_kind(evidence, "change")
            assert deploy["provenance"]["record"] == incident.deploy
            assert deploy["provenance"]["source"] == "deploys"
            assert deploy["summary"].startswith(f"{DEPLOY_MINUTES_BEFORE} min before opening")
            assert all("rollback" not in c["summary"] for c in older), "a change after the opening is not a cause"
            (step,) = _by_kind(evidence, "metric_change")
            assert step["provenance"]["query"] == f'queue_depth{{job="{incident.service}"}}'
            step_at = datetime.fromisoformat(step["provenance"]["step_at"])
            assert abs(step_at - (incident.opened - timedelta(minutes=STEP_MINUTES_BEFORE))) <= timedelta(minutes=1)
            assert abs(step["before"] - QUEUE_BEFORE) < 2 and abs(step["after"] - QUEUE_AFTER) < 2
            assert "[log_pattern 1.00] error x" in text.splitlines()[2]
    assert first_and_new >= 0.9 * len(incidents), f"injected template first and new in {first_and_new} of 20"


async def test_the_text_keeps_to_the_budget_and_says_how_many_were_dropped(
    corpus: tuple[Path, Path, list[CorpusIncident]], make_app: AppFactory, era: str
) -> None:
    root, changes, incidents = corpus
    app = make_app(data_dir=root, change_sources=[{"kind": "files", "name": "deploys", "paths": [str(changes)]}])
    async with connect(build_server(app), era) as client:
        roomy = await client.call_tool("investigate_incident", {"incidentId": incidents[0].id})
        tight = await client.call_tool("investigate_incident", {"incidentId": incidents[0].id, "budgetTokens": 150})
        too_small = await client.call_tool("investigate_incident", {"incidentId": incidents[0].id, "budgetTokens": 5})
        unknown = await client.call_tool("investigate_incident", {"incidentId": "INC-9999"})
    full, cut = roomy.structured_content, tight.structured_content
    assert full is not None and cut is not None
    assert full["dropped"] == 0
    assert len(text_of(tight).encode()) <= 150 * 4
    assert cut["dropped"] > 0 and len(cut["findings"]) + cut["dropped"] == len(full["findings"])
    assert cut["findings"] == full["findings"][: len(cut["findings"])], "the lowest-ranked go first"
    assert text_of(tight).endswith(f"({cut['dropped']} lower-ranked findings dropped to fit the budget)")
    assert too_small.is_error and "budgetTokens must be at least 100" in text_of(too_small)
    assert unknown.is_error and text_of(unknown) == "No such incident: INC-9999"


def test_incident_desk_investigate_prints_the_findings(
    corpus: tuple[Path, Path, list[CorpusIncident]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _changes, incidents = corpus
    incident = incidents[0]
    assert cli.main(["investigate", incident.id, "--data-dir", str(root)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"{incident.id} {incident.service}: {incident.service} failing"
    assert printed[1].startswith("evidence from the whole log")
    assert (
        printed[2].startswith("1. [log_pattern 1.00] error x")
        and f"lines {incident.first_injected_line}-" in printed[2]
    )
    assert "cursor L" in printed[2]
    assert cli.main(["investigate", "INC-404", "--data-dir", str(root)]) == 1
    assert capsys.readouterr().err.strip() == "incident-desk: No such incident: INC-404"


BIG_LOG_BYTES = 256 * 1024 * 1024
PING_WITHIN = 0.5
# Past the time budget: the sample lines read after the pass, and one chunk or stretch under way when it ended.
BUDGET_SLACK_SECONDS = 4.0


@pytest.fixture(scope="module")
def big_desk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big") / "desk"
    entry = root / "incidents" / "INC-BIG"
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        f'title="ledger refusing"\nservice="payments-api"\nseverity="SEV1"\nstatus="open"\n'
        f"opened={BIG_OPENED.isoformat().replace('+00:00', 'Z')}\n",
        encoding="utf-8",
    )
    write_big_log(entry / "log.txt", BIG_LOG_BYTES)
    return root


@pytest.mark.slow
async def test_a_256_mb_log_answers_within_the_default_budget_while_pings_answer(
    big_desk: Path, make_app: AppFactory, era: str
) -> None:
    app = make_app(data_dir=big_desk)
    budget = app.settings.search_time_budget_seconds
    size = f"{(big_desk / 'incidents' / 'INC-BIG' / 'log.txt').stat().st_size / 1e6:.1f} MB"
    async with connect(build_server(app), era) as client:
        await client.call_tool("list_incidents", {})
        # Something trivial: a ping where the era has one, else the tool list.
        ask = client.send_ping if era == "legacy" else client.list_tools
        async with pinging(client, asks=(ask,)) as latencies:
            began = time.perf_counter()
            result = await client.call_tool("investigate_incident", {"incidentId": "INC-BIG"})
            elapsed = time.perf_counter() - began
            again = await client.call_tool("investigate_incident", {"incidentId": "INC-BIG"})
    assert not result.is_error, text_of(result)
    evidence, later = result.structured_content, again.structured_content
    assert evidence is not None and later is not None
    covers = evidence["covers"]
    whole = covers.startswith(f"the whole log ({size}")
    assert whole or (
        covers.startswith("the first ")
        and f"of {size} (" in covers
        and "stopped at the time budget; call again" in covers
    ), covers
    if not whole:  # the next call reads on from where this one stopped
        assert later["covers"].startswith("the whole") or _read_megabytes(later["covers"]) > _read_megabytes(covers)
    assert elapsed < budget + BUDGET_SLACK_SECONDS, f"{elapsed:.1f} s for a {budget} s budget"
    assert latencies and max(latencies) < PING_WITHIN, f"slowest ping {max(latencies):.3f} s"
    assert len(text_of(result).encode()) <= 1500 * 4
    assert _by_kind(evidence, "log_pattern"), "what was read is grouped into templates"


def _read_megabytes(covers: str) -> float:
    """The MB a partial pass read, from its ``covers``: ``the first 4.2 MB of ...``."""
    number, unit = covers.removeprefix("the first ").split(" ")[:2]
    return float(number) * {"GB": 1000.0, "MB": 1.0, "kB": 0.001}[unit]


async def test_a_log_that_cannot_be_read_and_neighbours_that_fail_are_named_and_the_rest_answers(
    tmp_path: Path, make_app: AppFactory, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "desk"
    entry = root / "incidents" / "INC-1"
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        'title="gone"\nservice="payments-api"\nseverity="SEV2"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
    )
    (entry / "log.txt").write_text("10:00:00 payments-api ERROR boom\n")
    deploys = tmp_path / "deploys.jsonl"
    deploys.write_text('{"time": "2026-11-29T09:58:00Z", "service": "payments-api", "summary": "deploy v9"}\n')
    app = make_app(
        data_dir=root,
        services={"payments-api": {"metrics": {"prometheus": "http://127.0.0.1:9", "queries": {"up": "up"}}}},
        change_sources=[
            {"kind": "files", "name": "deploys", "paths": [str(deploys)]},
            {"kind": "files", "name": "missing", "paths": [str(tmp_path / "nope.jsonl")]},
        ],
    )

    def unreadable(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("incident_desk.core.evidence.cache.TemplateCache.scan_templates", unreadable)
    async with connect(build_server(app), era) as client:
        result = await client.call_tool("investigate_incident", {"incidentId": "INC-1"})
    assert not result.is_error, text_of(result)
    evidence = result.structured_content
    assert evidence is not None
    assert evidence["covers"] == "no log lines (the log is unavailable)"
    text = text_of(result)
    assert "unavailable: Log of INC-1 cannot be read: Permission denied" in text
    assert "unavailable: prometheus for payments-api at http://127.0.0.1:9 " in text
    assert "unavailable: change source 'missing': cannot open " in text
    assert [f["provenance"]["record"] for f in _by_kind(evidence, "change")] == ["deploy v9"]
    assert not _by_kind(evidence, "log_pattern") and not _by_kind(evidence, "metric_change")
