"""Finding any of a few byte strings in a block, a SIMD pass per string (or per group of case variants).

RE2 finds a pattern quickly when it can skip to a rare first byte; an alternation (``needle|segfault``) or a
case-insensitive literal starts with common bytes, so RE2 walks every byte of the log. Every match of such a
pattern contains one of a small set of plain byte strings (see ``core.pattern.prefilter_literals``): finding the
first of them with stringzilla and running RE2 only on that line is what ripgrep's literal prefilter does too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product

# Each string in the set costs one SIMD pass over the text; past this many, RE2 alone is about as fast.
MAX_LITERALS = 16
# Case variants of one literal: its window of the literal is chosen to keep this few.
MAX_CASE_VARIANTS = 8
MIN_LITERAL_BYTES = 3
# ASCII letters whose case-insensitive match is also a letter outside ASCII (RE2 folds Unicode: K is KELVIN SIGN,
# s is LONG S), so their ASCII variants alone do not cover every match.
_UNICODE_FOLDED = frozenset("kKsS")


def case_variants(literal: bytes) -> tuple[bytes, ...] | None:
    """Byte strings one of which every case-insensitive match of ``literal`` contains, or None if too many.

    A window of the literal made only of ASCII (and none of the letters Unicode folds beyond ASCII) has exactly
    its ASCII case variants as case-insensitive matches; the window with the fewest variants wins, longer first.
    """
    text = literal.decode("ascii", errors="replace")
    best: tuple[int, int, str] | None = None  # (variants, -length, window)
    for start in range(len(text)):
        for stop in range(start + MIN_LITERAL_BYTES, len(text) + 1):
            window = text[start:stop]
            if not window.isascii() or "\ufffd" in window or any(char in _UNICODE_FOLDED for char in window):
                break
            variants = 2 ** sum(char.isalpha() for char in window)
            if variants > MAX_CASE_VARIANTS:
                break
            key = (variants, -len(window), window)
            if best is None or key < best:
                best = key
    if best is None:
        return None
    choices = [(char.lower(), char.upper()) if char.isalpha() else (char,) for char in best[2]]
    return tuple("".join(chosen).encode() for chosen in product(*choices))


Finder = Callable[[bytearray, bytes, int, int], int]


def searches(literals: Sequence[bytes], find: Finder, find_folded: Finder) -> tuple[tuple[Finder, bytes], ...]:
    """How to find each of ``literals``: the ASCII case variants of one lowercase window, when all of them are in
    the set, by one case-insensitive pass of ``find_folded`` over that window (rather than one pass per variant);
    every other literal as it is, by ``find``."""
    variants: dict[bytes, set[bytes]] = {}
    for literal in dict.fromkeys(literals):
        variants.setdefault(literal.lower(), set()).add(literal)
    found: list[tuple[Finder, bytes]] = []
    for lower, group in variants.items():
        letters = sum(chr(byte).isalpha() for byte in lower)
        if lower.isascii() and letters and len(group) == 2**letters:
            found.append((find_folded, lower))
        else:
            found.extend((find, literal) for literal in group)
    return tuple(found)


class LiteralSet:
    """Finds where one of ``literals`` first starts in a window of a run, each by its own SIMD pass."""

    def __init__(self, literals: Sequence[bytes], find: Finder, find_folded: Finder) -> None:
        self.searches = searches(literals, find, find_folded)

    def window(self, buffer: bytearray, end: int) -> WindowLiterals:
        """The literals of the window of ``buffer`` that ends at ``end``: asked again and again for the first one
        from a later start, it costs about one pass per literal however many candidates the window holds."""
        return WindowLiterals(self.searches, buffer, end)


class WindowLiterals:
    """One window's literals, each one's next occurrence remembered. What it remembers is about this window's
    bytes alone: a buffer is read into again for the next run, so a window's answers never outlive it."""

    def __init__(self, found_by: tuple[tuple[Finder, bytes], ...], buffer: bytearray, end: int) -> None:
        self.found_by, self.buffer, self.end = found_by, buffer, end
        self.searched_from = [end + 1] * len(found_by)  # nothing searched yet
        self.found = [-1] * len(found_by)

    def first(self, start: int) -> int:
        """The offset of the first occurrence of any literal that lies wholly within ``start``..``end``, or -1."""
        first = -1
        for index, (find, literal) in enumerate(self.found_by):
            known_from, found = self.searched_from[index], self.found[index]
            if not (known_from <= start and (found < 0 or found >= start)):
                found = find(self.buffer, literal, start, self.end)
                self.searched_from[index], self.found[index] = start, found
            if found >= 0 and (first < 0 or found < first):
                first = found
        return first
