"""A desk's identity in a journal: the names its rows were kept under before, and how they move to its name.

Every journal row (a decision, an act, a note, a remembered incident, a postmortem) belongs to one desk by name.
Until this version a derived name listed the incident sources too (``/srv/desk [am, am2]``), so adding a source
renamed the desk, and every acknowledgement, note and postmortem it had seemed to vanish. A derived name is now the
data directory alone (``settings.journal_desk``); when a desk opens its journal it takes over the rows of its
former names: the same base with any list of incident sources, and the names an operator lists in
``desk_renamed_from`` (the one explicit way to rename a desk). Both backends run the same statements here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# What an incident source's name may hold (``sources.config._safe_source_name``).
_SOURCE_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")

# Every table that keeps rows by desk (the memory's two are made by the memory store, and may not be there yet).
DESK_TABLES = ("decisions", "activity", "memory", "postmortems")


def with_sources(base: str, name: str) -> bool:
    """Whether ``name`` is ``base`` followed by a list of incident sources, as names were derived before:
    ``/srv/desk [am, am2]``."""
    prefix = base + " ["
    if not (name.startswith(prefix) and name.endswith("]")):
        return False
    listed = name[len(prefix) : -1].split(", ")
    return all(part and set(part) <= _SOURCE_NAME_CHARACTERS for part in listed)


def former_names(desk: str, derived: bool, renamed_from: Sequence[str], existing: Iterable[str]) -> list[str]:
    """The names in the journal (``existing``) whose rows are ``desk``'s: its former derived names (when ``desk``
    is derived) and the names it was explicitly renamed from; never ``desk`` itself."""
    explicit = set(renamed_from)
    return sorted(
        name for name in set(existing) if name != desk and (name in explicit or (derived and with_sources(desk, name)))
    )


# Moving one former name's rows (``:old``) to the desk's name (``:new``), table by table. An incident both names
# hold keeps one postmortem (the newer) and one remembered entry (the desk's own, which the desk keeps up to date);
# acts, notes and decisions are all kept.
_MOVES = [
    ("decisions", "UPDATE decisions SET desk = :new WHERE desk = :old"),
    ("activity", "UPDATE activity SET desk = :new WHERE desk = :old"),
    (
        "postmortems",
        "DELETE FROM postmortems WHERE desk = :new AND EXISTS (SELECT 1 FROM postmortems o WHERE o.desk = :old "
        "AND o.incident_id = postmortems.incident_id AND o.time > postmortems.time)",
    ),
    (
        "postmortems",
        "DELETE FROM postmortems WHERE desk = :old AND incident_id IN "
        "(SELECT incident_id FROM postmortems WHERE desk = :new)",
    ),
    ("postmortems", "UPDATE postmortems SET desk = :new WHERE desk = :old"),
    (
        "memory",
        "DELETE FROM memory WHERE desk = :old AND incident_id IN (SELECT incident_id FROM memory WHERE desk = :new)",
    ),
    ("memory", "UPDATE memory SET desk = :new WHERE desk = :old"),
]
_DISTINCT = {
    "decisions": "SELECT DISTINCT desk FROM decisions",
    "activity": "SELECT DISTINCT desk FROM activity",
    "memory": "SELECT DISTINCT desk FROM memory",
    "postmortems": "SELECT DISTINCT desk FROM postmortems",
}


def move_statements(postgres: bool) -> list[tuple[str, str]]:
    """``(table, statement)`` pairs moving one former name's rows to the desk's name, with the parameters
    ``old`` and ``new`` in the backend's style."""
    if not postgres:
        return list(_MOVES)
    return [(table, sql.replace(":old", "%(old)s").replace(":new", "%(new)s")) for table, sql in _MOVES]


def distinct_desks_sql(tables: Iterable[str]) -> str:
    """Every desk name the given tables hold."""
    return " UNION ".join(_DISTINCT[table] for table in tables)
