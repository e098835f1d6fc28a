"""The incident memory on a team desk: PostgreSQL full-text search in the shared journal's database.

Every replica reads and writes the same tables, so every replica answers a similar-incident question the same.
The tables are new ones beside the journal's (created in place, under the journal's schema lock, never touching a
journal row); rows are scoped per desk like the journal's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from incident_desk.core.journal.audit_pg import PostgresJournal
from incident_desk.core.journal.memory import (
    CANDIDATES_MIN,
    CANDIDATES_PER_ANSWER,
    Postmortem,
    Remembered,
    Similar,
    bounded,
    most_words_first,
    parse_time,
    query_words,
    remembered_from_row,
)

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS memory (
    id BIGSERIAL PRIMARY KEY,
    desk TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    title TEXT NOT NULL,
    service TEXT NOT NULL,
    source TEXT NOT NULL,
    opened TIMESTAMPTZ NOT NULL,
    status TEXT NOT NULL DEFAULT '',
    labels TEXT NOT NULL DEFAULT '',
    signature TEXT NOT NULL DEFAULT '',
    notes TEXT NOT NULL DEFAULT '',
    resolution TEXT NOT NULL DEFAULT '',
    resolved TIMESTAMPTZ,
    restarts INTEGER NOT NULL DEFAULT 0,
    silences INTEGER NOT NULL DEFAULT 0,
    words TSVECTOR NOT NULL,
    UNIQUE (desk, incident_id)
)""",
    "CREATE INDEX IF NOT EXISTS memory_words ON memory USING GIN (words)",
    """CREATE TABLE IF NOT EXISTS postmortems (
    desk TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    markdown TEXT NOT NULL,
    author TEXT NOT NULL,
    time TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (desk, incident_id)
)""",
]
_UPSERT = (
    "INSERT INTO memory (desk, incident_id, title, service, source, opened, status, labels, signature, notes, "
    "resolution, resolved, restarts, silences, words) "
    "VALUES (%(desk)s, %(incident_id)s, %(title)s, %(service)s, %(source)s, %(opened)s, %(status)s, %(labels)s, "
    "%(signature)s, %(notes)s, %(resolution)s, %(resolved)s, %(restarts)s, %(silences)s, "
    "to_tsvector('simple', %(words)s)) ON CONFLICT (desk, incident_id) DO UPDATE SET title = excluded.title, service "
    "= excluded.service, source = excluded.source, opened = excluded.opened, status = excluded.status, labels = "
    "excluded.labels, signature = excluded.signature, notes = excluded.notes, resolution = excluded.resolution, "
    "resolved = excluded.resolved, restarts = excluded.restarts, silences = excluded.silences, words = excluded.words"
)
_RECALL = (
    "SELECT m.incident_id, m.title, m.service, m.source, m.opened, m.status, m.labels, m.signature, m.notes, "
    "m.resolution, m.resolved, m.restarts, m.silences, EXISTS (SELECT 1 FROM postmortems p WHERE p.desk = m.desk AND "
    "p.incident_id = m.incident_id) FROM memory m WHERE desk = %s AND incident_id = %s"
)
# Words are letters and digits only (query_words), so joined with | they make a valid tsquery. Ties are broken by
# incident id, so the answer is deterministic.
_SIMILAR = (
    "SELECT m.incident_id, m.title, m.service, m.source, m.opened, m.status, m.labels, m.signature, m.notes, "
    "m.resolution, m.resolved, m.restarts, m.silences, EXISTS (SELECT 1 FROM postmortems p WHERE p.desk = m.desk AND "
    "p.incident_id = m.incident_id), "
    "ts_rank_cd(m.words, q, 1) AS score FROM memory m, to_tsquery('simple', %s) q "
    "WHERE m.desk = %s AND m.words @@ q AND m.incident_id IS DISTINCT FROM %s "
    "ORDER BY score DESC, m.incident_id LIMIT %s"
)


class PostgresMemory:
    """The memory in the team desk's PostgreSQL journal database."""

    def __init__(self, journal: PostgresJournal) -> None:
        self._journal = journal
        self.desk = journal.desk
        with self._connect("created") as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('incident-desk schema', 0))")
            for statement in _SCHEMA:
                conn.execute(statement)

    def _connect(self, doing: str) -> Any:
        return self._journal.connection(f"{doing} (incident memory)")

    def remember_many(self, incidents: Iterable[Remembered]) -> None:
        for incident in incidents:
            self.remember(incident)

    def remember(self, incident: Remembered) -> None:
        incident = bounded(incident)
        values = {
            "desk": self.desk,
            "incident_id": incident.incident_id,
            "title": incident.title,
            "service": incident.service,
            "source": incident.source,
            "opened": incident.opened,
            "status": incident.status,
            "labels": incident.labels,
            "signature": incident.signature,
            "notes": incident.notes,
            "resolution": incident.resolution,
            "resolved": incident.resolved,
            "restarts": incident.restarts,
            "silences": incident.silences,
            "words": incident.words(),
        }
        with self._connect("written") as conn:
            conn.execute(_UPSERT, values)

    def recall(self, incident_id: str) -> Remembered | None:
        with self._connect("read") as conn:
            row = conn.execute(
                _RECALL,
                (self.desk, incident_id),
            ).fetchone()
        return None if row is None else remembered_from_row(row)

    def similar(self, text: str, exclude: str | None, limit: int) -> list[Similar]:
        words = query_words(text)
        if not words:
            return []
        pool = max(CANDIDATES_MIN, limit * CANDIDATES_PER_ANSWER)
        with self._connect("read") as conn:
            rows = conn.execute(_SIMILAR, (" | ".join(words), self.desk, exclude, pool)).fetchall()
        return most_words_first(((float(row[-1]), remembered_from_row(row[:-1])) for row in rows), words, limit)

    def save_postmortem(self, postmortem: Postmortem) -> None:
        with self._connect("written") as conn:
            conn.execute(
                "INSERT INTO postmortems (desk, incident_id, markdown, author, time) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (desk, incident_id) DO UPDATE SET markdown = excluded.markdown, "
                "author = excluded.author, time = excluded.time",
                (self.desk, postmortem.incident_id, postmortem.markdown, postmortem.author, postmortem.time),
            )

    def postmortem(self, incident_id: str) -> Postmortem | None:
        with self._connect("read") as conn:
            row = conn.execute(
                "SELECT incident_id, markdown, author, time FROM postmortems WHERE desk = %s AND incident_id = %s",
                (self.desk, incident_id),
            ).fetchone()
        return None if row is None else Postmortem(str(row[0]), str(row[1]), str(row[2]), parse_time(row[3]))

    def count(self) -> int:
        with self._connect("read") as conn:
            row = conn.execute("SELECT COUNT(*) FROM memory WHERE desk = %s", (self.desk,)).fetchone()
        return int(row[0]) if row else 0
