"""A generated corpus of incidents for investigate_incident: each service logs steady noise (errors that were always
there among it), one error template starts a few minutes before its incident opened, a deploy of it is recorded
in a change file just before, and its queue depth steps up on a real Prometheus (``tests/prometheus.py``)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.prometheus import Sample

INCIDENTS = 20
LOG_MINUTES_BEFORE, LOG_MINUTES_AFTER = 60, 10
DEPLOY_MINUTES_BEFORE = 8
STEP_MINUTES_BEFORE = 2
QUEUE_BEFORE, QUEUE_AFTER = 10.0, 80.0
INJECTED = (
    "ERROR connection refused by ledger-db at 10.0.{a}.{b}:5432",
    "ERROR TLS handshake with payments-gateway failed: certificate expired",
    "ERROR worker {a} killed: out of memory (rss {b}MB)",
    "ERROR circuit breaker open for inventory-service after {a} failures",
    "ERROR kafka producer: topic orders-events partition {a} leader not available",
    "ERROR deadlock detected while updating table accounts row {a}",
    "ERROR DNS lookup of auth.internal failed: SERVFAIL",
    "ERROR S3 PutObject to bucket exports-archive denied (request {a:x}{b:x})",
    "ERROR schema validation failed: field currency missing in message {a}",
    "ERROR rate limiter rejected tenant {a}: quota exhausted",
    "ERROR disk /var/lib/queue is full ({a}% used)",
    "ERROR redis cluster slot {a} moved, client could not follow redirect",
    "ERROR gRPC call to pricing.Quote timed out after {a}ms",
    "ERROR JWT signature verification failed for issuer sso-legacy",
    "ERROR migration 2026_11_add_index not applied: lock held by pid {a}",
    "ERROR thread pool exhausted: {a} tasks rejected",
    "ERROR upstream search-cluster returned malformed JSON at byte {a}",
    "ERROR cannot open file descriptor: too many open files ({a})",
    "ERROR ledger reconciliation mismatch of {a} cents on batch {b}",
    "ERROR feature flag service unreachable, serving stale flags since {a}s",
)
NOISE = (
    (0.55, "INFO request served status=200 latency_ms={a} id=req-{h}"),
    (0.15, "INFO cache refresh of segment {a} took {b}ms"),
    (0.12, 'WARN slow query "select * from orders where id = {a}" took {b}ms'),
    (0.1, "ERROR failed to refresh token for client {a}: upstream timeout"),  # always there
    (0.08, "ERROR retry budget exceeded for job {a}"),  # always there
)


@dataclass(frozen=True)
class CorpusIncident:
    id: str
    service: str
    opened: datetime
    injected: str  # the injected template as the desk shows it (variable parts as <*>)
    first_injected_line: int  # 1-based
    deploy: str


def service_of(index: int) -> str:
    return f"svc{chr(ord('a') + index)}-api"


def _injected_shown(index: int) -> str:
    from incident_desk.core.evidence.masking import mask_lines

    line = INJECTED[index].format(a=1234, b=56).encode()
    return mask_lines(line + b"\n")[:-1].replace(b"\x1f", b"<*>").decode()


def _line(at: datetime, service: str, template: str, rng: random.Random) -> str:
    text = template.format(a=rng.randint(1, 9999), b=rng.randint(1, 999), h=f"{rng.getrandbits(40):010x}")
    return f"{at:%H:%M:%S} {service} {text}"


def write_log(path: Path, service: str, opened: datetime, injected: str, rng: random.Random) -> int:
    """One line every two seconds of noise, and the injected template from a few minutes before the opening;
    returns the injected template's first line (1-based)."""
    starts = opened - timedelta(minutes=rng.randint(3, 6))
    lines: list[str] = []
    first = 0
    at = opened - timedelta(minutes=LOG_MINUTES_BEFORE)
    weights = [weight for weight, _ in NOISE]
    while at < opened + timedelta(minutes=LOG_MINUTES_AFTER):
        lines.append(_line(at, service, rng.choices([t for _, t in NOISE], weights)[0], rng))
        if at >= starts and rng.random() < 0.4:
            lines.append(_line(at, service, injected, rng))
            first = first or len(lines)
        at += timedelta(seconds=2)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return first


def opened_at(index: int) -> datetime:
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=3)
    return base - timedelta(minutes=7 * index)


def write_corpus(root: Path, changes: Path) -> list[CorpusIncident]:
    """The incidents' folders under ``root`` and their deploy records (JSON lines) in ``changes``."""
    rng = random.Random(40)
    incidents, records = [], []
    for index in range(INCIDENTS):
        service, opened = service_of(index), opened_at(index)
        incident_id = f"INC-{5000 + index}"
        entry = root / "incidents" / incident_id
        entry.mkdir(parents=True)
        (entry / "incident.toml").write_text(
            f'title="{service} failing"\nservice="{service}"\nseverity="SEV2"\nstatus="open"\n'
            f"opened={opened.isoformat().replace('+00:00', 'Z')}\n",
            encoding="utf-8",
        )
        first = write_log(entry / "log.txt", service, opened, INJECTED[index], rng)
        deploy = f"deploy {service} v3.{index}.0"
        records.append(
            {"time": _stamp(opened - timedelta(minutes=DEPLOY_MINUTES_BEFORE)), "service": service, "summary": deploy}
        )
        records.append(
            {
                "time": _stamp(opened - timedelta(hours=4)),
                "service": service,
                "summary": f"deploy {service} v3.{index}.0-rc",
            }
        )
        records.append({"time": _stamp(opened + timedelta(minutes=5)), "service": service, "summary": "rollback after"})
        incidents.append(CorpusIncident(incident_id, service, opened, _injected_shown(index), first, deploy))
    changes.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return incidents


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def queue_history(incidents: list[CorpusIncident]) -> list[Sample]:
    """Each service's queue depth a minute apart: about 10 until a step a little before its opening, then 80."""
    rng = random.Random(41)
    samples = []
    for incident in incidents:
        step = incident.opened - timedelta(minutes=STEP_MINUTES_BEFORE)
        for minute in range(-90, 60):
            at = incident.opened + timedelta(minutes=minute)
            level = QUEUE_AFTER if at >= step else QUEUE_BEFORE
            samples.append(Sample("queue_depth", {"job": incident.service}, at, level + rng.uniform(-1.5, 1.5)))
    return samples


def services(incidents: list[CorpusIncident], prometheus_url: str) -> dict[str, object]:
    return {
        i.service: {
            "metrics": {"prometheus": prometheus_url, "queries": {"queue": f'queue_depth{{job="{i.service}"}}'}}
        }
        for i in incidents
    }
