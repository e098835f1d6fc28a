"""Text from other systems (an alert's summary and labels, and whatever later sources send) is untrusted.

A one-line field reaches results where the desk writes one item per line (``list_incidents``, the timeline's
header): a newline in it would let an alert forge whole lines of the desk's own output, and ESC, BEL or NUL would
reach a terminal or a model raw. :func:`one_line` makes such a field safe to show:

- every control character (C0, DEL, C1) and every Unicode line or paragraph separator is replaced by a visible
  mark: C0 characters and DEL by their Unicode control pictures (newline ``␊``, carriage return ``␍``, tab ``␉``,
  ESC ``␛``, BEL ``␇``, NUL ``␀``, DEL ``␡``), the rest by ``�``; nothing is dropped silently, and no mark is a
  newline;
- a field longer than its cap is cut there and marked ``… [cut at N chars]``.

One pass of ``str.translate`` over at most the cap: linear in the field, whatever it holds.
"""

from __future__ import annotations

DEFAULT_MAX_CHARS = 500
REPLACEMENT = "\ufffd"

_CONTROL_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)} | {0x7F: "\u2421"}
_OTHER_BREAKS = {code: REPLACEMENT for code in range(0x80, 0xA0)} | {0x2028: REPLACEMENT, 0x2029: REPLACEMENT}
_ONE_LINE = str.maketrans(_CONTROL_PICTURES | _OTHER_BREAKS)


def cut_mark(max_chars: int) -> str:
    return f"… [cut at {max_chars} chars]"


def one_line(text: object, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """``text`` as one visible line of at most ``max_chars`` characters plus the cut mark (module docstring)."""
    value = text if isinstance(text, str) else str(text)
    cut = len(value) > max_chars
    value = value[:max_chars].translate(_ONE_LINE)
    return value + cut_mark(max_chars) if cut else value
