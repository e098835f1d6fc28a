"""What a log read or search hands a client: the core's page or matches with the cursor sealed for this desk, so
the client can only pass back a cursor the desk handed out (core/search/cursors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from incident_desk.core.scan_budget import StopReason
    from incident_desk.core.search.paging import Line


@dataclass(frozen=True)
class LogPageRead:
    """One page of a log as a client sees it: lines redacted, the cursor to the next page sealed for this desk."""

    lines: list[Line]
    next_cursor: str | None
    total_bytes: int


@dataclass(frozen=True)
class LogSearchRead:
    """One call's matches as a client sees them: redacted lines, the sealed cursor to resume at, why it stopped."""

    matches: list[Line]
    next_cursor: str | None
    scanned_bytes: int
    total_bytes: int
    stopped: StopReason
