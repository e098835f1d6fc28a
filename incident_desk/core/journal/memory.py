"""Incident memory: every incident the desk served, kept with what was done and what fixed it.

A past incident is found again by its words: its title, service, labels, the normalised signature of its first
error lines (numbers, ids, hashes and times stripped, so two runs of one failure read the same), its notes and its
resolution. The embedded store is SQLite's FTS5 (BM25 ranking) in the journal's own file; the answer is
deterministic (ties broken by incident id) and needs no model and no network.
"""

from __future__ import annotations

import hashlib
import sqlite3
import string
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from incident_desk.core import errors
from incident_desk.core.neighbours.untrusted import masked_line, one_line

if TYPE_CHECKING:
    from incident_desk.core.linear import LinearPattern

# What one remembered field keeps: enough to recognise a failure, bounded so a hostile source cannot grow the store.
MAX_TITLE_CHARS = 300
MAX_SIGNATURE_CHARS = 2000
MAX_TEXT_CHARS = 4000
MAX_POSTMORTEM_CHARS = 100_000
# The first error lines a signature is made of, and how much of the log head is looked at for them.
SIGNATURE_LINES = 5
SIGNATURE_HEAD_BYTES = 64 * 1024
# The most words of a query matched, and the most answers one call returns.
MAX_QUERY_WORDS = 48
MAX_SIMILAR = 20
# Candidates the full-text index hands over for every answer asked for, re-ranked by the query's words they share.
CANDIDATES_PER_ANSWER = 4
CANDIDATES_MIN = 40
# A query matches at most this many of its rarest words; a word in more than this share of remembered incidents
# (and in more than the floor) is left out unless no word is rarer.
TELLING_WORDS = 12
COMMON_WORD_SHARE = 0.05
COMMON_WORD_FLOOR = 50

# Stripped from error lines before they are remembered: these change from one run of a failure to the next.
# Words every log says; matching them ranks nothing and costs time on a large memory.
_COMMON = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "from",
        "this",
        "that",
        "was",
        "were",
        "are",
        "not",
        "but",
        "has",
        "had",
        "have",
        "into",
        "out",
        "error",
        "err",
        "info",
        "warn",
        "warning",
        "debug",
        "level",
        "msg",
        "message",
        "time",
        "ts",
        "log",
        "logger",
        "failed",
        "failure",
        "fail",
        "service",
    ]
)


class MemoryUnavailable(errors.Unavailable):
    """The memory store cannot be opened, read or written; the message names it."""


@dataclass(frozen=True)
class Remembered:
    """One past incident as the memory keeps it."""

    incident_id: str
    title: str
    service: str
    source: str
    opened: datetime
    status: str = ""
    labels: str = ""
    signature: str = ""
    notes: str = ""
    resolution: str = ""
    resolved: datetime | None = None
    restarts: int = 0
    silences: int = 0
    has_postmortem: bool = False

    @property
    def resolve_seconds(self) -> int | None:
        if self.resolved is None:
            return None
        return max(0, int((self.resolved - self.opened).total_seconds()))

    def words(self) -> str:
        """The text the index matches: every field a later incident may share with this one."""
        return " ".join((self.title, self.service, self.labels, self.signature, self.notes, self.resolution))


@dataclass(frozen=True)
class Similar:
    """One answer: a past incident and how well it matched (higher is closer)."""

    incident: Remembered
    score: float


@dataclass(frozen=True)
class Postmortem:
    incident_id: str
    markdown: str
    author: str
    time: datetime


class Memory(Protocol):
    """What the desk needs of a memory store, SQLite or PostgreSQL."""

    desk: str

    def remember(self, incident: Remembered) -> None: ...
    def remember_many(self, incidents: Iterable[Remembered]) -> None: ...
    def recall(self, incident_id: str) -> Remembered | None: ...
    def similar(self, text: str, exclude: str | None, limit: int) -> list[Similar]: ...
    def save_postmortem(self, postmortem: Postmortem) -> None: ...
    def postmortem(self, incident_id: str) -> Postmortem | None: ...
    def count(self) -> int: ...


@cache
def _patterns() -> tuple[LinearPattern, LinearPattern]:
    """What changes between runs of a failure and what makes a line an error line: compiled by the first
    signature (RE2 is not loaded before the desk's first answer)."""
    from incident_desk.core.linear import LinearPattern

    volatile = LinearPattern(
        rb"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:[Zz]|[+-]\d{2}:?\d{2})?"  # times
        rb"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # uuids
        rb"|0x[0-9a-f]+"  # addresses
        rb"|\b[0-9a-f]*\d[0-9a-f]*\b"  # hex ids and hashes, whole numbers
        rb"|\d+"  # numbers inside words (pool-12, 3000ms)
    )
    error_line = LinearPattern(
        rb"(?i)\b(?:error|err|fatal|panic|exception|critical|crit|fail(?:ed|ure)?|refused|timeout|timed out|killed)\b"
    )
    return volatile, error_line


# A word is a run of lower-case letters and digits that starts with a letter and is two or more long (what
# ``[a-z][a-z0-9]*[a-z0-9]`` finds, one after another). Every other byte becomes a space, so the words are the runs
# ``split`` leaves less their leading digits: a pass in C, as a ranking reads every candidate's words per query.
_WORD_BYTES = bytes(byte if chr(byte) in string.ascii_lowercase + string.digits else 0x20 for byte in range(256))
_DIGITS = string.digits.encode()


def normalise(line: str) -> str:
    """An error line as two runs of one failure both write it: lower case, no times, ids, hashes or numbers
    (patterns are matched on the lower-cased line)."""
    data = line.lower().encode("utf-8", "replace")
    out, last = bytearray(), 0
    for spans in _patterns()[0].finditer(data):
        start, stop = spans[0]
        out += data[last:start]
        last = stop
    out += data[last:]
    return " ".join(out.decode("utf-8", "replace").split())


def signature_of(head: bytes) -> str:
    """The normalised signature of the first error lines of a log's head (its first lines when none reads as an
    error)."""
    lines = head[:SIGNATURE_HEAD_BYTES].splitlines()
    chosen = [line for line in lines if _patterns()[1].search(line) is not None][:SIGNATURE_LINES]
    if not chosen:
        chosen = [line for line in lines if line.strip()][:SIGNATURE_LINES]
    text = " | ".join(normalise(line.decode("utf-8", "replace")) for line in chosen)
    return one_line(text, MAX_SIGNATURE_CHARS)


def query_words(text: str, most: int = MAX_QUERY_WORDS) -> list[str]:
    """The distinct words of ``text`` worth matching, in first-seen order (at most ``most``)."""
    data = normalise(text).encode("utf-8", "replace")
    seen: dict[str, None] = {}
    for run in data.translate(_WORD_BYTES).split():
        word = run.lstrip(_DIGITS).decode("ascii")
        if len(word) < 2:
            continue
        if word not in _COMMON and len(word) > 2:
            seen.setdefault(word, None)
        if len(seen) >= most:
            break
    return list(seen)


def word_set(text: str) -> set[str]:
    """Every word of ``text`` that :func:`query_words` keeps, however many: what a past incident shares with a
    query (each distinct run is looked at once, so a long text of few words costs little)."""
    data = normalise(text).encode("utf-8", "replace")
    words = {run.lstrip(_DIGITS).decode("ascii") for run in set(data.translate(_WORD_BYTES).split())}
    return {word for word in words if len(word) > 2 and word not in _COMMON}


def most_words_first(found: Iterable[tuple[float, Remembered]], words: Sequence[str], limit: int) -> list[Similar]:
    """The best ``limit`` of ``found`` (each with its full-text score, higher closer): those sharing more of the
    query's ``words`` first, then by score, then by id. A full-text score alone favours a short entry sharing one
    rare word (an unrelated alert with the same service and an ``again`` in its title) over incidents of the same
    kind sharing half the query's error words. The answer's score is the words shared plus the full-text score
    scaled below one, so it still reads higher is closer."""
    scored = []
    for score, past in found:
        present = word_set(past.words())
        scored.append((sum(1 for word in words if word in present), score, past))
    top = max((score for _shared, score, _past in scored), default=0.0)
    scored.sort(key=lambda item: (-item[0], -item[1], item[2].incident_id))
    return [
        Similar(past, round(shared + (score / top * 0.999 if top > 0 else 0.0), 4))
        for shared, score, past in scored[:limit]
    ]


def desk_token(desk: str) -> str:
    """One word standing for ``desk`` in the full-text index (a desk name may hold any character)."""
    return "desk" + hashlib.sha256(desk.encode("utf-8")).hexdigest()[:24]


def fts_query(words: Iterable[str]) -> str:
    """An FTS5 query matching any of ``words`` (each quoted: a word is never an operator)."""
    return " OR ".join(f'"{word}"' for word in words)


_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS memory (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    desk TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    title TEXT NOT NULL,
    service TEXT NOT NULL,
    source TEXT NOT NULL,
    opened TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT '',
    labels TEXT NOT NULL DEFAULT '',
    signature TEXT NOT NULL DEFAULT '',
    notes TEXT NOT NULL DEFAULT '',
    resolution TEXT NOT NULL DEFAULT '',
    resolved TEXT,
    restarts INTEGER NOT NULL DEFAULT 0,
    silences INTEGER NOT NULL DEFAULT 0,
    UNIQUE (desk, incident_id)
)""",
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_text USING fts5(desk, body, tokenize='unicode61')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_words USING fts5vocab(memory_text, row)",
    """CREATE TABLE IF NOT EXISTS postmortems (
    desk TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    markdown TEXT NOT NULL,
    author TEXT NOT NULL,
    time TEXT NOT NULL,
    PRIMARY KEY (desk, incident_id)
)""",
]
MEMORY_COLUMNS = (
    "incident_id, title, service, source, opened, status, labels, signature, notes, resolution, resolved, "
    "restarts, silences"
)
_UPSERT = (
    "INSERT INTO memory (desk, incident_id, title, service, source, opened, status, labels, signature, notes, "
    "resolution, resolved, restarts, silences) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (desk, incident_id) DO UPDATE SET title = excluded.title, service = excluded.service, "
    "source = excluded.source, opened = excluded.opened, status = excluded.status, labels = excluded.labels, "
    "signature = excluded.signature, notes = excluded.notes, resolution = excluded.resolution, "
    "resolved = excluded.resolved, restarts = excluded.restarts, silences = excluded.silences"
)
_RECALL = (
    "SELECT m.incident_id, m.title, m.service, m.source, m.opened, m.status, m.labels, m.signature, m.notes, "
    "m.resolution, m.resolved, m.restarts, m.silences, "
    "EXISTS (SELECT 1 FROM postmortems p WHERE p.desk = m.desk AND p.incident_id = m.incident_id) FROM memory m WHERE "
    "desk = ? AND incident_id = ?"
)
# BM25 over the body of this desk's entries (the desk column holds the desk's token, matched, weighted 0): FTS5
# finds the best few itself (ORDER BY rank LIMIT), the rows are joined after. A few more than asked for are read
# so ties at the cut are broken by incident id, whichever FTS5 met first: the answer is deterministic.
_SIMILAR = (
    "SELECT m.incident_id, m.title, m.service, m.source, m.opened, m.status, m.labels, m.signature, m.notes, "
    "m.resolution, m.resolved, m.restarts, m.silences, "
    "EXISTS (SELECT 1 FROM postmortems p WHERE p.desk = m.desk AND p.incident_id = m.incident_id), t.rank FROM "
    "(SELECT rowid, rank FROM memory_text WHERE memory_text MATCH ? AND rank MATCH 'bm25(0.0, 1.0)' "
    "ORDER BY rank LIMIT ?) t JOIN memory m ON m.id = t.rowid WHERE m.desk = ?"
)
TIE_MARGIN = 10
BUSY_TIMEOUT_SECONDS = 10.0


def bounded(incident: Remembered) -> Remembered:
    return replace(
        incident,
        title=masked_line(incident.title, MAX_TITLE_CHARS),
        labels=masked_line(incident.labels, MAX_TEXT_CHARS),
        signature=one_line(incident.signature, MAX_SIGNATURE_CHARS),
        notes=masked_line(incident.notes, MAX_TEXT_CHARS),
        resolution=masked_line(incident.resolution, MAX_TEXT_CHARS),
    )


class SqliteMemory:
    """The memory in the SQLite journal's file: new tables beside the journal's, created in place (the journal's
    rows are untouched), scoped per desk like every journal row."""

    def __init__(self, path: Path, desk: str) -> None:
        self.path = Path(path)
        self.desk = desk
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise MemoryUnavailable(f"incident memory in {self.path} cannot be opened: {exc}") from None
        try:
            with closing(conn):
                yield conn
        except sqlite3.Error as exc:
            raise MemoryUnavailable(f"incident memory in {self.path}: {exc}") from None

    def remember(self, incident: Remembered) -> None:
        """Keep ``incident`` (replacing what was kept of it): one transaction for the row and its index entry."""
        self.remember_many([incident])

    def remember_many(self, incidents: Iterable[Remembered]) -> None:
        """Keep each of ``incidents`` in one transaction (the bench fills a large memory this way)."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for incident in incidents:
                    self._upsert(conn, bounded(incident))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _upsert(self, conn: sqlite3.Connection, incident: Remembered) -> None:
        row = (
            self.desk,
            incident.incident_id,
            incident.title,
            incident.service,
            incident.source,
            incident.opened.isoformat(),
            incident.status,
            incident.labels,
            incident.signature,
            incident.notes,
            incident.resolution,
            None if incident.resolved is None else incident.resolved.isoformat(),
            incident.restarts,
            incident.silences,
        )
        conn.execute(_UPSERT, row)
        (row_id,) = conn.execute(
            "SELECT id FROM memory WHERE desk = ? AND incident_id = ?", (self.desk, incident.incident_id)
        ).fetchone()
        conn.execute("DELETE FROM memory_text WHERE rowid = ?", (row_id,))
        conn.execute(
            "INSERT INTO memory_text (rowid, desk, body) VALUES (?, ?, ?)",
            (row_id, desk_token(self.desk), incident.words()),
        )

    def recall(self, incident_id: str) -> Remembered | None:
        with self._connect() as conn:
            row = conn.execute(
                _RECALL,
                (self.desk, incident_id),
            ).fetchone()
        return None if row is None else remembered_from_row(row)

    def similar(self, text: str, exclude: str | None, limit: int) -> list[Similar]:
        """Past incidents of this desk whose words are closest to ``text`` (BM25), best first."""
        words = query_words(text)
        if not words:
            return []
        with self._connect() as conn:
            words = _telling(conn, words)
            if not words:
                return []
            match = f'desk : "{desk_token(self.desk)}" AND body : ({fts_query(words)})'
            pool = max(CANDIDATES_MIN, limit * CANDIDATES_PER_ANSWER) + 1 + TIE_MARGIN
            rows = conn.execute(_SIMILAR, (match, pool, self.desk)).fetchall()
        found = [(-float(row[-1]), remembered_from_row(row[:-1])) for row in rows if str(row[0]) != exclude]
        return most_words_first(found, words, limit)

    def save_postmortem(self, postmortem: Postmortem) -> None:
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO postmortems (desk, incident_id, markdown, author, time) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (desk, incident_id) DO UPDATE SET markdown = excluded.markdown, "
                "author = excluded.author, time = excluded.time",
                (
                    self.desk,
                    postmortem.incident_id,
                    postmortem.markdown,
                    postmortem.author,
                    postmortem.time.isoformat(),
                ),
            )

    def postmortem(self, incident_id: str) -> Postmortem | None:
        with self._connect() as conn:
            row = conn.execute(
                "SELECT incident_id, markdown, author, time FROM postmortems WHERE desk = ? AND incident_id = ?",
                (self.desk, incident_id),
            ).fetchone()
        if row is None:
            return None
        return Postmortem(str(row[0]), str(row[1]), str(row[2]), parse_time(row[3]))

    def count(self) -> int:
        with self._connect() as conn:
            (total,) = conn.execute("SELECT COUNT(*) FROM memory WHERE desk = ?", (self.desk,)).fetchone()
        return int(total)


def _telling(conn: sqlite3.Connection, words: list[str]) -> list[str]:
    """The words that tell incidents apart: those some remembered incident has, rarest first, leaving out words
    most incidents share (they rank nothing and would make the ranker score most of a large memory)."""
    placeholders = ", ".join("?" * len(words))
    found = conn.execute(
        f"SELECT term, doc FROM memory_words WHERE term IN ({placeholders})",  # noqa: S608 -- placeholders only
        words,
    ).fetchall()
    # Every remembered incident's row id, not a count: a count would read the whole table on every query.
    (total,) = conn.execute("SELECT coalesce(max(id), 0) FROM memory").fetchone()
    common = max(COMMON_WORD_FLOOR, int(total) * COMMON_WORD_SHARE)
    ranked = sorted((int(doc), str(term)) for term, doc in found)
    rare = [term for doc, term in ranked if doc <= common]
    return (rare or [term for _, term in ranked])[:TELLING_WORDS]


def parse_time(value: object) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def remembered_from_row(row: Sequence[object]) -> Remembered:
    (incident_id, title, service, source, opened, status, labels, signature, notes, resolution, resolved) = row[:11]
    restarts, silences, has_postmortem = row[11:14]
    return Remembered(
        incident_id=str(incident_id),
        title=str(title),
        service=str(service),
        source=str(source),
        opened=parse_time(opened),
        status=str(status),
        labels=str(labels),
        signature=str(signature),
        notes=str(notes),
        resolution=str(resolution),
        resolved=None if resolved is None else parse_time(resolved),
        restarts=int(str(restarts)),
        silences=int(str(silences)),
        has_postmortem=bool(has_postmortem),
    )
