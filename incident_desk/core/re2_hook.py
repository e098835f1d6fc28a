"""RE2's private match entry point, fenced like the hooks of ``incident_desk.protocol.library_hooks``.

It lives in ``core`` because ``core`` imports nothing outside it. google-re2's public ``search`` wraps every call
in a generator that re-encodes offsets; its private ``_Regexp._regexp.Match`` with the ``_Anchor`` values is one
C call that returns the spans. When those are gone, :func:`span_matcher` answers the same call through the public
API, once warned: searches give the same answers, more slowly. ``tests/test_library_hooks.py`` checks the hook.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import re2
import structlog

logger = structlog.get_logger(__name__)

Span = tuple[int, int]
# (anchor, data, pos, end) -> the spans of the whole match and each group, (-1, -1) where nothing matched.
SpanMatch = Callable[[Any, bytes, int, int], list[Span]]
NO_MATCH: Span = (-1, -1)

_anchor = getattr(re2, "_Anchor", None)
PRIVATE_ANCHORS = hasattr(_anchor, "UNANCHORED") and hasattr(_anchor, "ANCHOR_START")
UNANCHORED: Any = _anchor.UNANCHORED if PRIVATE_ANCHORS else "unanchored"  # type: ignore[union-attr]
ANCHOR_START: Any = _anchor.ANCHOR_START if PRIVATE_ANCHORS else "anchor-start"  # type: ignore[union-attr]
_warned = False


def engine_object(compiled: Any) -> Any:
    """The RE2 object under a pattern compiled by ``re2.compile`` (the wrapper itself when google-re2 changed)."""
    return getattr(compiled, "_regexp", compiled)


def private_match(compiled: Any) -> SpanMatch | None:
    """RE2's own ``Match`` for a pattern compiled by ``re2.compile``, or None when google-re2 changed."""
    match = getattr(getattr(compiled, "_regexp", None), "Match", None)
    return match if PRIVATE_ANCHORS and callable(match) else None


def span_matcher(compiled: Any) -> SpanMatch:
    """One call from (anchor, data, pos, end) to spans: RE2's private one, or the public API's (slower) stand-in."""
    match = private_match(compiled)
    if match is not None:
        return match
    global _warned
    if not _warned:
        _warned = True
        logger.warning(
            "library hook gone",
            library="google-re2",
            version=version("google-re2"),
            hook="RE2 match",
            loss="log searches take the slower public path",
        )

    def public_match(anchor: Any, data: bytes, pos: int, end: int) -> list[Span]:
        found = (compiled.match if anchor == ANCHOR_START else compiled.search)(data, pos, end)
        if found is None:
            return [NO_MATCH] * (compiled.groups + 1)
        return [found.span(group) for group in range(compiled.groups + 1)]

    return public_match
