"""What a redaction rule is, and the pieces rules are built from (replacements, value and separator patterns).

Every pattern runs on RE2 (``core.linear``), so none can take more than linear time on a hostile line. RE2 has no
lookarounds: a rule that must see the character before its name takes it into the match (and keeps it), and a
rule that must refuse some values (prose after "password", a port after a host) either says so in the pattern or
refuses in its replacement, which returns None; a refusing rule only ever looks at a bounded head of the value,
so a refused match never makes the search read far ahead (see ``Rule.tail``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from incident_desk.core.linear import LinearPattern, Span, compile_linear, groups_of

MASK = b"[REDACTED]"

# A replacement builds the text that stands for a match from the text searched (one line, or a run of lines: no
# pattern matches a newline in what it masks) and the match's spans (whole match first, then each group), or
# refuses the match with None; the search then goes on one byte after its start.
Replacement = Callable[[bytes, list[Span]], bytes | None]


@dataclass(frozen=True)
class Rule:
    """Where a rule runs (its literal triggers, lower case), what it matches, and what the match becomes."""

    triggers: tuple[str, ...]
    pattern: LinearPattern
    replace: Replacement
    folded: bool  # the pattern is written in lower case and runs on the line with its ASCII letters lowered
    tail: LinearPattern | None = None  # after an accepted match: the run this matches right after it is masked too
    first_only: bool = False  # only each line's first match counts (the rule is about the start of the line)
    # A search finds the lines this rule may change by its pattern rather than its literal, which is too common
    # to skip much ("sk" is in "disk"); redacting a block still runs it on lines with the literal.
    by_shape: bool = False
    # A pattern every line this rule changes matches, narrower than its literal ("api_key", not "key"): a block's
    # lines are found by it instead when every rule of the literal has one.
    narrow: LinearPattern | None = None


def keep(*kept: int) -> Replacement:
    """Keep group ``kept[0]`` before the mask and any further kept groups after it."""

    def replace(line: bytes, spans: list[Span]) -> bytes:
        groups = groups_of(line, spans)
        return (groups[kept[0]] or b"") + MASK + b"".join(groups[index] or b"" for index in kept[1:])

    return replace


def masked(line: bytes, spans: list[Span]) -> bytes:
    return MASK


def mask_value(line: bytes, spans: list[Span]) -> bytes:
    """Keep the name and separator (group 1), and the quotes around a quoted value (group 2)."""
    name, value = (line[start:end] for start, end in spans[1:3])
    if value[:1] in (b"'", b'"'):
        closing = value[:1] if len(value) > 1 and value.endswith(value[:1]) else b""
        return name + value[:1] + MASK + closing
    if value.startswith(b'\\"'):
        return name + b'\\"' + MASK + (b'\\"' if len(value) > 3 and value.endswith(b'\\"') else b"")
    return name + MASK


_WORD_BYTES = b"abcdefghijklmnopqrstuvwxyz0123456789_"


def _starts_with_word(value: bytes, words: frozenset[bytes]) -> bool:
    """Whether ``value`` (lower case) starts with one of ``words`` followed by a word boundary: its leading run of
    word characters is one of them (found by lstrip, in C)."""
    head = value[:16]
    return head[: len(head) - len(head.lstrip(_WORD_BYTES))] in words


def unless_prose(words: frozenset[bytes], *, also: tuple[bytes, ...] = ()) -> Replacement:
    """``mask_value``/``keep(1)``-style masking, refused when the value starts with a word of ordinary prose."""

    def replace(line: bytes, spans: list[Span]) -> bytes | None:
        value = line[spans[2][0] : spans[2][1]].lower()
        if value[:1] not in (b"'", b'"', b"\\") and (_starts_with_word(value, words) or value.startswith(also)):
            return None
        return mask_value(line, spans)

    return replace


# A value after a key name: quoted (to its closing quote, or the end of a line that was cut), JSON-escaped quoted
# (a log line holding a JSON document as a string), or bare.
QUOTED = r"\"(?:[^\"\\\r\n]|\\.)*\"?|'[^'\r\n]*'?|\\\"(?:[^\\\r\n]|\\[^\"])*(?:\\\")?"
SEPARATOR = r"(?:\\?[\"'])?[ \t]*(?:=>|:=|[:=])[ \t]*"
# An optional suffix after a secret's name: SECRET_KEY_BASE, password_hash, private_key_id, secretAccessKey.
SUFFIX_WORDS = r"(?:access[_-]?)?key|base|value|b64|base64|hex|str|string|bytes|raw|hash|id|data"
NAME_SUFFIX = rf"(?:[_.-]?(?:{SUFFIX_WORDS}))*"
# The same, for a short name that must not run into a longer word ("pass" but not "passkey"): separated only.
SEPARATED_SUFFIX = rf"(?:[_.-](?:{SUFFIX_WORDS}))*"


def rule(
    triggers: tuple[str, ...],
    pattern: str,
    replace: Replacement,
    *,
    folded: bool = True,
    tail: str | None = None,
    first_only: bool = False,
) -> Rule:
    return Rule(
        triggers,
        compile_linear(pattern),
        replace,
        folded,
        compile_linear(tail) if tail is not None else None,
        first_only,
    )


def named(triggers: tuple[str, ...], names: str, value: str = rf"{QUOTED}|[^\s\"']+") -> Rule:
    """name=value, name: value, "name": "value" and the like, for names matching ``names`` (lower case)."""
    return rule(triggers, rf"((?:{names}){SEPARATOR})({value})", mask_value)


def vendor(*prefixes: str, pattern: str, by_shape: bool = False) -> Rule:
    made = rule(tuple(prefix.lower() for prefix in prefixes), pattern, masked, folded=False)
    return replace(made, by_shape=True) if by_shape else made
