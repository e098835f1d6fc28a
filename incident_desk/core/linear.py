"""Regular expressions over content, on a linear-time engine only.

Log lines, source text and provider answers are written by whoever reaches the log, so no backtracking engine
(Python's ``re``) may ever run on them: one crafted line would hold the interpreter for seconds. Every pattern that
looks at content is compiled here, by RE2, which matches in time linear in the text whatever the pattern.

Patterns are bytes and match bytes, one byte per character (RE2's Latin-1 mode): a UTF-8 text is encoded once and
searched without the wrapper's per-call re-encoding and offset translation, so spans are byte offsets. Non-ASCII
bytes fall in negated classes (``[^\\s]``, ``.``), never in ASCII ones, which keeps spans on character boundaries
for patterns whose runs are either ASCII-only or cover every non-ASCII byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import re2

from incident_desk.core.re2_hook import ANCHOR_START as _ANCHOR_START
from incident_desk.core.re2_hook import NO_MATCH as _NO_MATCH
from incident_desk.core.re2_hook import UNANCHORED as _UNANCHORED
from incident_desk.core.re2_hook import Span as Span
from incident_desk.core.re2_hook import engine_object, span_matcher


def _options(*, literal: bool = False) -> re2.Options:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.literal = literal
    return options


class LinearPattern:
    """One RE2 pattern over bytes: search, anchored match and iteration, all returning spans."""

    __slots__ = ("_match", "groups", "regexp", "source")

    def __init__(self, source: bytes, *, literal: bool = False) -> None:
        compiled = re2.compile(source, _options(literal=literal))
        self.source = source
        self.regexp: Any = engine_object(compiled)
        self._match = span_matcher(compiled)  # one C call per search, no wrapper generator
        self.groups: int = compiled.groups

    def search(self, data: bytes, pos: int = 0, end: int | None = None) -> list[Span] | None:
        """Spans of the whole match and each group (``(-1, -1)`` for a group that took no part), or None."""
        spans: list[Span] = self._match(_UNANCHORED, data, pos, len(data) if end is None else end)
        return None if spans[0] == _NO_MATCH else spans

    def match(self, data: bytes, pos: int = 0, end: int | None = None) -> list[Span] | None:
        """Like ``search``, anchored at ``pos``."""
        spans: list[Span] = self._match(_ANCHOR_START, data, pos, len(data) if end is None else end)
        return None if spans[0] == _NO_MATCH else spans

    def finditer(self, data: bytes, pos: int = 0, end: int | None = None) -> Iterator[list[Span]]:
        """Non-overlapping matches from left to right (an empty match moves the search on by one byte)."""
        end = len(data) if end is None else end
        while pos <= end:
            spans: list[Span] = self._match(_UNANCHORED, data, pos, end)
            start, stop = spans[0]
            if start < 0:
                return
            yield spans
            pos = stop if stop > start else stop + 1

    def contains(self, data: bytes) -> bool:
        return self.search(data) is not None


def compile_linear(source: str | bytes) -> LinearPattern:
    """An RE2 pattern over bytes; a str source is encoded as UTF-8 (its non-ASCII characters match as bytes)."""
    return LinearPattern(source.encode() if isinstance(source, str) else source)


def groups_of(data: bytes, spans: list[Span]) -> list[bytes | None]:
    """The text of each span (None for a group that took no part)."""
    return [data[start:stop] if start >= 0 else None for start, stop in spans]


def escape(literal: bytes) -> bytes:
    """``literal`` as an RE2 pattern that matches exactly it."""
    escaped: bytes = re2.escape(literal)
    return escaped
