"""A secret on the line after its name: YAML ``password:`` then the value, ``Authorization: Bearer`` then the token.

A line that ends with a secret's name and its separator (or a bare scheme) and no value "dangles"; the next line
then holds the value if, after the same log prefix, it is one token. That token is masked. Only the lines that
hold a trigger are searched for a dangling name. Readers that show a block starting mid-log (a page, a window, a
search hit) redact it with the line before it as context, so the name and its value may sit on either side of an
edge.
"""

from __future__ import annotations

from collections.abc import Iterable

from incident_desk.core.linear import LinearPattern
from incident_desk.core.redaction.shapes import MASK, NAME_SUFFIX

_TELLING = (
    r"passw(?:or)?d|passwd|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?key|"
    r"credentials?|authorization|signature|session[_-]?id"
)
# On the lowered block, multi-line: a telling name, its separator and nothing after it but maybe a scheme; or a
# scheme alone at the end of a line.
_DANGLING = LinearPattern(
    rb"(?m)(?:[a-z0-9_.-]*(?:"
    + _TELLING.encode()
    + rb")"
    + NAME_SUFFIX.encode()
    + rb"(?:\\*[\"'])?[ \t]*[:=][ \t]*(?:(?:bearer|basic|token)[ \t]*)?|\bbearer[ \t]*)\r?$"
)
# What can follow a dangling name without being its value: YAML block and flow indicators, a nested mapping key.
_NOT_VALUES = (b"|", b"|-", b">", b">-", b"-", b"{", b"[", b"#")


def mask_dangling_values(redacted: bytes, lowered: bytes, lines: Iterable[tuple[int, int]]) -> bytes:
    """``redacted`` with the value on the line after each dangling name masked; the same object if none.

    ``lines`` are the (start, end) of the lines that hold a trigger (or of runs of such lines), in order: every
    dangling line holds one (its name), so only they are searched. They are found in ``lowered``, the block
    before the one-line rules ran (which may have masked a scheme left alone at the end of a line); the rules
    never add or remove a line, so line numbers carry over.
    """
    wanted: dict[int, int] = {}  # line number of a value -> the log prefix's token count
    number, counted_to = 0, 0
    for start, end in lines:
        for spans in _DANGLING.finditer(lowered, start, end):
            found = spans[0][0]
            line_start = lowered.rfind(b"\n", 0, found) + 1
            number += lowered.count(b"\n", counted_to, line_start)
            counted_to = line_start
            wanted[number + 1] = len(lowered[line_start:found].split())
    if not wanted:
        return redacted
    split = redacted.split(b"\n")
    changed = False
    for line, prefix in wanted.items():
        if line < len(split):
            masked = _masked_value_line(split[line], prefix)
            if masked is not None:
                split[line], changed = masked, True
    return b"\n".join(split) if changed else redacted


def _masked_value_line(line: bytes, prefix: int) -> bytes | None:
    """The line with its value masked, if after ``prefix`` tokens of log prefix it holds exactly one token."""
    tokens = line.split()
    if len(tokens) != prefix + 1 or tokens[-1] in _NOT_VALUES or tokens[-1].endswith(b":"):
        return None
    end = len(line.rstrip())
    start = end - len(tokens[-1])
    return line[:start] + MASK + line[end:]
