"""The timeline's two line patterns: a line's time, minute, zone and level, and the first error's line.

Each starts with a literal newline (the scan puts one before each chunk), so a match starts only at a line's start.
Log content may be hostile: the patterns run on RE2 (linear time), compiled on the first scan so that starting the
desk does not load it.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from incident_desk.core.linear import LinearPattern

_LINE_SOURCE = (
    rb"\n(?:(\d{4}-\d\d-\d\d)[T ])?(\d\d:\d\d):\d\d(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?[ \t]+(?:\S+[ \t]+)?"
    rb"\[?(ERROR|FATAL|CRITICAL|WARNING|WARN|INFO|DEBUG|TRACE)\b"
)
_FIRST_ERROR_SOURCE = (
    rb"\n(?:(\d{4}-\d\d-\d\d)[T ])?(\d\d:\d\d):(\d\d)(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?[ \t]+(?:\S+[ \t]+)?"
    rb"\[?(?:ERROR|FATAL|CRITICAL)\b[^\n]*"
)


@cache
def patterns() -> tuple[LinearPattern, LinearPattern]:
    from incident_desk.core.linear import LinearPattern

    return LinearPattern(_LINE_SOURCE), LinearPattern(_FIRST_ERROR_SOURCE)
