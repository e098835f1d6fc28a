"""The one root of every error the core raises, in four kinds, so the desk maps a failure to an answer in one
place by what it is (missing, down, refused, malformed) and never by a list of classes kept in step by hand.

Each error's message is what a client is told: it names what failed and why, never a secret.
"""

from __future__ import annotations


class IncidentDeskError(Exception):
    """Any failure the core raises on purpose."""


class NotFound(IncidentDeskError):
    """What was asked for does not exist here: an incident, a service, a runbook."""


class Unavailable(IncidentDeskError):
    """What was asked for exists but cannot be read or reached now: a log, a source, the journal, a neighbour."""


class Refused(IncidentDeskError):
    """The desk will not do it: a lock held, an approval used, a path that leads outside its root."""


class Invalid(IncidentDeskError):
    """The request itself is malformed: a pattern, a cursor."""


ECHO_CHARS = 80


def echoed(value: str, argument: str, *, quoted: bool = False) -> str:
    """A value a client sent, as an error message may show it: whole when short; when long, its head, an ellipsis,
    and which argument it was with its length, so a 960,000-character id does not come back whole.

    ``quoted`` shows it as Python's ``repr`` (the form pattern and cursor errors use), the head quoted alone.
    """
    if len(value) <= ECHO_CHARS:
        return repr(value) if quoted else value
    head = value[:ECHO_CHARS]
    return (
        f"{head!r}… ({argument}: {len(value)} characters)"
        if quoted
        else f"{head}… ({argument}: {len(value)} characters)"
    )
