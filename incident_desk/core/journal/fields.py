"""How the journal keeps free text: bounded, and storable in SQLite and PostgreSQL alike."""

from __future__ import annotations

from incident_desk.core.neighbours.untrusted import masked_text

# The most characters the journal keeps of each free-text field. Tickets, service names and client-given reasons
# arrive from clients and forms: unbounded, a few huge answers would make a journal too large to read back quickly.
FIELD_LIMITS: dict[str, int] = {"service": 200, "ticket": 200, "approver": 200, "protocol_era": 64, "detail": 4000}
# The fields whose words come from a person, a model or a neighbour (a note, a reason, a ticket, a command's output):
# a new row keeps them masked like a log line, with control and bidirectional characters made visible marks; a row
# read back is masked again wherever it is shown (rows written before this was done, or by another version).
WORDS_FIELDS = frozenset({"ticket", "detail", "text"})


def kept_words(text: str) -> str:
    """What a new row keeps of a words field: masked, its control characters visible, its lines kept."""
    return masked_text(text)


def storable(text: str) -> str:
    """``text`` as every journal can keep it: a NUL (which PostgreSQL text refuses) becomes the four characters
    ``\\x00``, and a lone surrogate (which no UTF-8 database can store) its ``\\udXXX`` escape."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def cut(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its start marked with how long it was, ``limit`` in all.

    Idempotent: a cut text fits, so reading a row back and recording it again changes nothing.
    """
    if len(text) <= limit:
        return text
    marker = f"…[cut: {len(text)} characters]"
    return text[: max(0, limit - len(marker))] + marker
