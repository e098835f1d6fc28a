"""Text from other systems (an alert's summary and labels, and whatever later sources send) is untrusted.

A one-line field reaches results where the desk writes one item per line (``list_incidents``, the timeline's
header): a newline in it would let an alert forge whole lines of the desk's own output, and ESC, BEL or NUL would
reach a terminal or a model raw. :func:`one_line` makes such a field safe to show:

- every control character (C0, DEL, C1), every Unicode line or paragraph separator, and every bidirectional or
  invisible formatting character (the embeddings, overrides and isolates that reorder what a reader sees, zero-width
  spaces and joiners, the byte order mark) is replaced by a visible mark: C0 characters and DEL by their Unicode
  control pictures (newline ``␊``, carriage return ``␍``, tab ``␉``, ESC ``␛``, BEL ``␇``, NUL ``␀``, DEL ``␡``),
  the rest by ``�``; nothing is dropped silently, and no mark is a newline;
- a field longer than its cap is cut there and marked ``… [cut at N chars]``.

One pass of ``str.translate`` over at most the cap: linear in the field, whatever it holds.

What the desk keeps of people's and sources' words (titles, labels, notes, reasons, tickets, postmortems) is also
masked like a log line before it is stored or shown: :func:`masked_line` for a one-line field, :func:`masked_text`
for a text whose lines are its own (a postmortem). The redaction rules are loaded on first use, not at start.
"""

from __future__ import annotations

from functools import lru_cache

DEFAULT_MAX_CHARS = 500
REPLACEMENT = "\ufffd"

_CONTROL_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)} | {0x7F: "\u2421"}
_OTHER_BREAKS = {code: REPLACEMENT for code in range(0x80, 0xA0)} | {0x2028: REPLACEMENT, 0x2029: REPLACEMENT}
# Bidirectional controls and invisible formatting: what a reader sees would differ from what is there.
_INVISIBLE = (0x061C, 0x180E, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2070), 0xFEFF)
_FORMATTING = {code: REPLACEMENT for code in _INVISIBLE}
_ONE_LINE = str.maketrans(_CONTROL_PICTURES | _OTHER_BREAKS | _FORMATTING)
# The same, for a text of several lines: its newlines and tabs stay.
_LINES = str.maketrans(
    {code: mark for code, mark in (_CONTROL_PICTURES | _OTHER_BREAKS | _FORMATTING).items() if code not in (9, 10)}
)
_MASKED_CACHE = 4096  # fields repeat (an Alertmanager's titles, each fetch): each distinct one is masked once
_CACHED_CHARS = 2000  # longer fields are masked each time rather than kept in the cache


def cut_mark(max_chars: int) -> str:
    return f"… [cut at {max_chars} chars]"


def one_line(text: object, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """``text`` as one visible line of at most ``max_chars`` characters plus the cut mark (module docstring)."""
    value = text if isinstance(text, str) else str(text)
    cut = len(value) > max_chars
    value = value[:max_chars].translate(_ONE_LINE)
    return value + cut_mark(max_chars) if cut else value


def visible(text: str) -> str:
    """``text`` with its control, bidirectional and invisible characters made visible marks; newlines and tabs stay
    (a text of several lines, like a postmortem)."""
    return text.translate(_LINES)


def mask_secrets(text: str) -> str:
    """``text`` with its secrets masked like a log line's, and nothing else changed."""
    # Imported on first use: compiling the redaction rules at import would slow every start.
    from incident_desk.core.redaction.face import redact

    return redact(text)


def masked_line(text: object, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """:func:`one_line` of ``text`` with its secrets masked first (the whole text, so a secret the cut would
    split is masked whole)."""
    value = text if isinstance(text, str) else str(text)
    if len(value) > _CACHED_CHARS:
        return one_line(mask_secrets(value), max_chars)
    return _masked_line(value, max_chars)


@lru_cache(maxsize=_MASKED_CACHE)
def _masked_line(text: str, max_chars: int) -> str:
    return one_line(mask_secrets(text), max_chars)


def masked_text(text: str) -> str:
    """``text`` with its secrets masked and its control characters made visible, its lines kept."""
    return visible(mask_secrets(text))
