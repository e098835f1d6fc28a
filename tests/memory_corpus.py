"""A generated corpus of past incidents for the memory tests: failure kinds in varied words and log shapes.

Each kind has several ways of being titled and several error lines, written in one of four log shapes (plain,
JSON, logfmt, a Java stack) with random numbers, ids and times; services are drawn from one pool for every kind,
so a service never gives the kind away.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from incident_desk.core.journal.memory import Remembered, signature_of

# kind: (titles, error lines, resolutions)
KINDS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "oom": (
        ["Pods OOMKilled", "Out of memory in workers", "Memory limit exceeded, containers restarting"],
        [
            "java.lang.OutOfMemoryError: Java heap space",
            "container killed: OOMKilled (memory limit {n}Mi)",
            "fatal: out of memory allocating {n} bytes",
        ],
        ["raised the memory limit", "fixed a leak in the cache"],
    ),
    "disk_full": (
        ["Disk full on data volume", "No space left on device", "Volume at 100% usage"],
        [
            "write /var/lib/data/{h}: no space left on device",
            "ENOSPC: disk quota exceeded on volume {n}",
            "failed to flush segment: filesystem full",
        ],
        ["rotated and compressed old logs", "grew the volume"],
    ),
    "db_pool": (
        ["Database connection pool exhausted", "Too many DB connections", "Connection pool saturation"],
        [
            "HikariPool-{n} - Connection is not available, request timed out after {n}ms",
            "FATAL: sorry, too many clients already",
            "pool exhausted: {n} connections in use, waiters {n}",
        ],
        ["raised max_connections and pool size", "killed idle-in-transaction sessions"],
    ),
    "tls_expired": (
        ["TLS certificate expired", "Certificate expiry breaks HTTPS", "x509 errors on ingress"],
        [
            "x509: certificate has expired or is not yet valid",
            "SSL handshake failed: certificate expired",
            "tls: failed to verify certificate: x509 expired at {t}",
        ],
        ["renewed the certificate with certbot", "rotated the cert secret"],
    ),
    "dns": (
        ["DNS resolution failures", "Cannot resolve hostnames", "NXDOMAIN for internal names"],
        [
            "dial tcp: lookup db-{n}.internal: no such host",
            "getaddrinfo ENOTFOUND api-{n}.svc",
            "resolver: SERVFAIL from nameserver {ip}",
        ],
        ["restarted coredns", "fixed the resolv.conf search domains"],
    ),
    "deadlock": (
        ["Database deadlocks on orders", "Deadlock detected in transactions", "Lock wait deadlocks"],
        [
            "ERROR: deadlock detected DETAIL: Process {n} waits for ShareLock on transaction {n}",
            "Deadlock found when trying to get lock; try restarting transaction",
            "lock ordering deadlock between tx {h} and tx {h}",
        ],
        ["changed lock ordering in the order writer", "retried deadlocked transactions"],
    ),
    "rate_limit": (
        ["Upstream rate limiting", "429 Too Many Requests from partner API", "Throttled by provider"],
        [
            "HTTP 429 Too Many Requests: rate limit exceeded for key {h}",
            "upstream throttling: quota exhausted, retry-after {n}",
            "RateLimitError: requests per minute cap reached",
        ],
        ["added backoff and a token bucket", "asked the partner to raise our quota"],
    ),
    "crashloop": (
        ["CrashLoopBackOff after deploy", "Pods crash looping", "Container keeps restarting"],
        [
            "Back-off restarting failed container app in pod web-{h}",
            "CrashLoopBackOff: exit code {n}",
            "panic: runtime error: invalid memory address or nil pointer dereference",
        ],
        ["rolled back the deploy", "fixed the nil config on boot"],
    ),
    "kafka_lag": (
        ["Kafka consumer lag growing", "Consumer group falling behind", "Event backlog on topic"],
        [
            "consumer group billing-{n} lag {n} on partition {n}",
            "kafka: offset commit failed, rebalance in progress",
            "records behind on topic events: lag exceeded threshold {n}",
        ],
        ["scaled the consumers", "fixed a slow handler blocking the poll loop"],
    ),
    "redis_down": (
        ["Redis unavailable", "Cache cluster down", "Redis connection refused"],
        [
            "redis: connection refused at {ip}:6379",
            "READONLY You can't write against a read only replica",
            "MISCONF Redis is configured to save RDB snapshots, but it is currently not able to persist on disk",
        ],
        ["failed over the redis primary", "restarted the redis sentinel"],
    ),
    "s3_denied": (
        ["Object storage access denied", "S3 AccessDenied on uploads", "Bucket permissions broken"],
        [
            "AccessDenied: Access Denied (Service: Amazon S3; Status Code: 403; Request ID: {h})",
            "s3: PutObject forbidden for bucket media-{n}",
            "botocore ClientError AccessDenied calling GetObject",
        ],
        ["restored the IAM policy", "fixed the bucket policy"],
    ),
    "clock_skew": (
        ["Clock skew breaks tokens", "NTP drift on hosts", "Time out of sync"],
        [
            "token used before issued: iat in the future by {n}s, clock skew",
            "ntpd: time drift {n}ms exceeds limit",
            "chrony: system clock wrong by {n} seconds, unsynchronised",
        ],
        ["restarted chrony and resynced ntp", "fixed the ntp server pool"],
    ),
    "migration": (
        ["Schema migration failed", "Migration stuck on deploy", "Alembic migration error"],
        [
            "alembic.util.exc.CommandError: Can't locate revision identified by '{h}'",
            "migration {n} failed: column already exists",
            "flyway: validate failed, migration checksum mismatch",
        ],
        ["fixed the migration revision chain", "ran the migration by hand"],
    ),
    "queue_backlog": (
        ["RabbitMQ queue backlog", "Messages piling up in queue", "AMQP queue depth alert"],
        [
            "rabbitmq: queue orders.created has {n} ready messages, no consumers",
            "amqp channel closed: PRECONDITION_FAILED unacknowledged messages",
            "queue depth {n} above high watermark",
        ],
        ["restarted the stuck consumers", "purged poison messages"],
    ),
    "gc_pause": (
        ["Long GC pauses", "Stop the world garbage collection", "JVM pauses cause latency"],
        [
            "GC pause (G1 Evacuation Pause) {n}ms",
            "Full GC (Allocation Failure) took {n} seconds",
            "jvm: stop-the-world garbage collection pause exceeded {n}ms",
        ],
        ["tuned G1 heap regions", "cut allocation churn in the serializer"],
    ),
    "ratelimit_auth": (
        ["Login failures from identity provider", "OAuth token refresh failing", "SSO outage"],
        [
            "oauth2: invalid_grant refresh token revoked for client {h}",
            "OIDC discovery failed: issuer unreachable",
            "saml assertion rejected: signature invalid",
        ],
        ["rotated the oauth client secret", "identity provider fixed its outage"],
    ),
    "disk_io": (
        ["Slow disk IO", "High iowait on storage", "Disk latency spikes"],
        [
            "io latency {n}ms on /dev/nvme0n1, iowait high",
            "blk_update_request: I/O error, dev sda, sector {n}",
            "fsync took {n}ms, storage slow",
        ],
        ["moved to a faster volume class", "replaced the failing disk"],
    ),
    "segfault": (
        ["Native segfaults in worker", "SIGSEGV crashes", "Segmentation fault in image resizer"],
        [
            "Segmentation fault (core dumped) in libvips",
            "signal SIGSEGV: segmentation violation code={h}",
            "worker {n} terminated by signal 11 (SIGSEGV)",
        ],
        ["pinned libvips to the previous version", "disabled the native extension"],
    ),
    "config_typo": (
        ["Bad configuration rollout", "Config parse error on start", "Invalid YAML in settings"],
        [
            "yaml: line {n}: mapping values are not allowed in this context",
            "config validation failed: unknown key 'replcias'",
            "invalid configuration: expected int for port",
        ],
        ["reverted the config change", "fixed the typo in values.yaml"],
    ),
    "port_conflict": (
        ["Address already in use on start", "Port bind conflict", "Listener cannot bind"],
        [
            "listen tcp :{n}: bind: address already in use",
            "EADDRINUSE: port {n} is taken by another process",
            "failed to bind socket {ip}:{n}: address in use",
        ],
        ["killed the orphaned process holding the port", "moved the sidecar to another port"],
    ),
    "replication_lag": (
        ["Replica lag on database", "Read replicas behind primary", "Replication delay alert"],
        [
            "replication lag {n} seconds on replica pg-{n}",
            "Seconds_Behind_Master: {n}, slave SQL thread slow",
            "wal receiver: replica replay delayed by {n}s",
        ],
        ["killed a long analytics query on the replica", "added a replica"],
    ),
    "latency_upstream": (
        ["Upstream timeouts from payment gateway", "Gateway 504s", "Slow third party responses"],
        [
            "upstream request timeout after {n}ms to gateway.partner",
            "504 Gateway Timeout from upstream payments",
            "context deadline exceeded calling gateway at {ip}",
        ],
        ["opened a circuit breaker to the gateway", "gateway provider resolved their incident"],
    ),
    "quota_cloud": (
        ["Cloud quota exceeded", "Cannot launch instances: quota", "Resource quota hit in project"],
        [
            "QUOTA_EXCEEDED: Quota 'CPUS' exceeded. Limit: {n} in region",
            "InstanceLimitExceeded: You have requested more instances",
            "resourcequota: exceeded quota compute-resources, requested cpu={n}",
        ],
        ["requested a quota increase", "cleaned up idle instances"],
    ),
    "fd_limit": (
        ["Too many open files", "File descriptor exhaustion", "ulimit reached on sockets"],
        [
            "accept: too many open files",
            "EMFILE: too many open files, open '/tmp/{h}'",
            "socket: too many open files (ulimit {n})",
        ],
        ["raised nofile ulimit", "fixed a socket leak"],
    ),
    "auth_secret": (
        ["Database password rotation broke login", "Authentication failed for app user", "Credentials rejected"],
        [
            'FATAL: password authentication failed for user "app"',
            "Access denied for user 'app'@'{ip}' (using password: YES)",
            "authentication failed: invalid credentials for database role",
        ],
        ["updated the secret in the vault", "rolled back the password rotation"],
    ),
    "search_index": (
        ["Search index red status", "Elasticsearch shards unassigned", "Index read-only block"],
        [
            "cluster health RED: {n} unassigned shards",
            "index [logs-{n}] blocked by: FORBIDDEN/12/index read-only / allow delete",
            "circuit_breaking_exception: Data too large, data for [fielddata] would be larger than limit",
        ],
        ["freed disk and cleared the read-only block", "rerouted unassigned shards"],
    ),
}
SERVICES = ["payments-api", "search-api", "checkout", "gateway", "orders", "media", "auth", "billing", "web"]
# Words any incident may carry, whatever its kind.
NOISE = ["after deploy", "in production", "since this morning", "on several hosts", "customers report errors", ""]


@dataclass(frozen=True)
class Case:
    kind: str
    incident: Remembered


def _fill(template: str, rng: random.Random) -> str:
    text = template
    while "{n}" in text:
        text = text.replace("{n}", str(rng.randint(1, 99999)), 1)
    while "{h}" in text:
        text = text.replace("{h}", f"{rng.getrandbits(48):012x}", 1)
    while "{ip}" in text:
        text = text.replace("{ip}", ".".join(str(rng.randint(1, 254)) for _ in range(4)), 1)
    return text.replace("{t}", "2026-03-04T05:06:07Z")


def log_head(kind: str, rng: random.Random) -> bytes:
    """A log's first lines for a failure of ``kind``, in one of four shapes."""
    _, errors, _ = KINDS[kind]
    chosen = rng.sample(errors, k=rng.randint(1, len(errors)))
    shape = rng.choice(["plain", "json", "logfmt", "java"])
    stamp = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randint(0, 10**7))
    lines = [f"{stamp.isoformat()} INFO starting request handler pid={rng.randint(100, 9999)}"]
    for error in chosen:
        message = _fill(error, rng)
        if shape == "json":
            lines.append(json.dumps({"ts": stamp.isoformat(), "level": "error", "msg": message}))
        elif shape == "logfmt":
            lines.append(f'ts={stamp.isoformat()} level=error msg="{message}" req={rng.getrandbits(32):08x}')
        elif shape == "java":
            lines.append(f"{stamp.isoformat()} ERROR [main-{rng.randint(1, 9)}] {message}")
            lines.append(f"\tat com.example.Handler.run(Handler.java:{rng.randint(10, 900)})")
        else:
            lines.append(f"{stamp.isoformat()} error {message}")
    return "\n".join(lines).encode()


def make_case(kind: str, index: int, rng: random.Random) -> Case:
    titles, _, resolutions = KINDS[kind]
    opened = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=index)
    title = f"{rng.choice(titles)} {rng.choice(NOISE)}".strip()
    incident = Remembered(
        incident_id=f"PAST-{kind}-{index}",
        title=title,
        service=rng.choice(SERVICES),
        source="folder",
        opened=opened,
        status="resolved",
        labels=f"severity={rng.choice(['critical', 'warning'])}",
        signature=signature_of(log_head(kind, rng)),
        resolution=rng.choice(resolutions),
        resolved=opened + timedelta(minutes=rng.randint(5, 300)),
    )
    return Case(kind, incident)


def corpus(per_kind: int = 12, held_out: int = 2, seed: int = 28) -> tuple[list[Case], list[Case]]:
    """(remembered, held out): ``per_kind`` resolved incidents of each kind, and ``held_out`` new ones per kind."""
    rng = random.Random(seed)
    remembered: list[Case] = []
    fresh: list[Case] = []
    for kind in KINDS:
        for index in range(per_kind + held_out):
            case = make_case(kind, index, rng)
            (remembered if index < per_kind else fresh).append(case)
    return remembered, fresh
