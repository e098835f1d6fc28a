"""Masked lines grouped into templates, the Drain way (He et al., ICWS 2017): a tree of fixed depth keyed by a
line's token count and its leading tokens, then, in the leaf, the template most like the line (the share of equal
tokens, at least ``SIMILARITY``), whose differing tokens become ``<*>``.

It runs on the distinct masked lines of a pass (``tally``), a few hundred in a service's log and at most
``tally.MAX_KEYS``, each weighted by its counts; the leaf's templates are capped, so the work per line is bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from incident_desk.core.evidence.masking import MASK_BYTE
from incident_desk.core.evidence.tally import BASE, FIRST, LAST, OFFSET, RECENT

WILDCARD = b"<*>"
DEPTH = 2  # leading tokens that key the tree below the token count
SIMILARITY = 0.5
MAX_PER_LEAF = 64
_STAMP_BYTES = frozenset(b"\x1f:-.,+TZ[]")
ERROR_WORDS = frozenset((b"ERROR", b"FATAL", b"CRITICAL", b"SEVERE", b"PANIC", b"ERR", b"EMERG", b"ALERT", b"CRIT"))
WARN_WORDS = frozenset((b"WARN", b"WARNING"))


@dataclass
class Template:
    """A group of masked lines: its tokens (``<*>`` where they vary), its counts and its first and last line."""

    tokens: list[bytes]
    baseline: int
    recent: int
    first_line: int
    first_offset: int
    last_line: int
    keys: int = 1
    level: str = field(default="other")

    @property
    def count(self) -> int:
        return self.baseline + self.recent

    @property
    def text(self) -> str:
        return b" ".join(self.tokens).replace(MASK_BYTE, WILDCARD).decode("utf-8", errors="replace")


def _body(key: bytes) -> list[bytes]:
    """The line's tokens after its leading time (tokens made only of masks and time punctuation)."""
    tokens = key.split()
    start = 0
    while start < len(tokens) and MASK_BYTE in tokens[start] and set(tokens[start]) <= _STAMP_BYTES:
        start += 1
    return tokens[start:]


def _level(tokens: list[bytes]) -> str:
    for token in tokens[:4]:
        word = token.strip(b"[]:<>").upper()
        if word in ERROR_WORDS:
            return "error"
        if word in WARN_WORDS:
            return "warn"
    return "other"


def _similar(template: list[bytes], tokens: list[bytes]) -> float:
    """The share of equal tokens past the leading ones (equal by the tree's key, so they would only blur it)."""
    pairs = list(zip(template[DEPTH:], tokens[DEPTH:], strict=True))
    same = sum(1 for mine, theirs in pairs if mine in (theirs, WILDCARD))
    return same / len(pairs) if pairs else 1.0


def _branch(token: bytes) -> bytes:
    return WILDCARD if MASK_BYTE in token else token


def templates(table: Iterable[tuple[bytes, list[int]]]) -> list[Template]:
    """The templates of a pass's masked lines (``(key, row)`` in first-seen order), in order of first line."""
    leaves: dict[tuple[int, tuple[bytes, ...]], list[Template]] = {}
    found: list[Template] = []
    for key, row in sorted(table, key=lambda item: item[1][FIRST]):
        tokens = _body(key)
        leaf = leaves.setdefault((len(tokens), tuple(_branch(t) for t in tokens[:DEPTH])), [])
        best, best_score = None, SIMILARITY
        for candidate in leaf:
            score = _similar(candidate.tokens, tokens)
            if score >= best_score:
                best, best_score = candidate, score
        if best is None:
            template = Template(list(tokens), row[BASE], row[RECENT], row[FIRST], row[OFFSET], row[LAST])
            template.level = _level(tokens)
            found.append(template)
            if len(leaf) < MAX_PER_LEAF:
                leaf.append(template)
            continue
        best.tokens = [mine if mine == theirs else WILDCARD for mine, theirs in zip(best.tokens, tokens, strict=True)]
        best.baseline += row[BASE]
        best.recent += row[RECENT]
        best.last_line = max(best.last_line, row[LAST])
        best.keys += 1
    return found
