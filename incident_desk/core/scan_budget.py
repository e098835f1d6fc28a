"""When a scan over a log stops: one budget (a deadline, a byte budget, a cancel flag) for every kind of scan.

A log can be gigabytes, so every forward pass over one (the search, the timeline, anything later) is bounded by the
same three things and says which of them ended it, in the same words, so a caller can hand on a cursor or a resume
point and the client can read why the answer is partial.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Literal

# Why a scan stopped. "end of log": it read everything; "match limit" (search) and "minute limit" (timeline):
# its answer is full; the others: a budget or the caller ended it, and it says how far it got.
StopReason = Literal["end of log", "match limit", "minute limit", "time budget", "byte budget", "cancelled"]

# A scan's default byte budget: high enough that the time budget is what usually ends a long scan.
SCAN_BUDGET_BYTES = 16 * 1024 * 1024 * 1024


@dataclass(frozen=True)
class ScanBudget:
    """How long a scan may run (a ``time.monotonic`` deadline), how many bytes it may read, and its cancel flag."""

    deadline: float = math.inf
    max_bytes: int = SCAN_BUDGET_BYTES
    cancelled: threading.Event | None = None

    @classmethod
    def starting_now(
        cls,
        *,
        time_budget: float | None = None,
        byte_budget: int = SCAN_BUDGET_BYTES,
        cancelled: threading.Event | None = None,
    ) -> ScanBudget:
        """A budget of ``time_budget`` seconds from now (None: no deadline) and ``byte_budget`` bytes."""
        deadline = math.inf if time_budget is None else time.monotonic() + time_budget
        return cls(deadline=deadline, max_bytes=byte_budget, cancelled=cancelled)

    def stop_reason(self, scanned_bytes: int, *, out_of_bytes: bool = False, moved: bool = True) -> StopReason | None:
        """Why the scan must stop now, having read ``scanned_bytes``, or None to go on.

        Cancellation first (the caller has gone), then the deadline, then bytes. ``out_of_bytes``: the scan's next
        step would take it past its byte budget, though it has not reached it yet. A scan that has not ``moved``
        yet stops only when cancelled.
        """
        if self.cancelled is not None and self.cancelled.is_set():
            return "cancelled"
        if not moved:
            return None
        if time.monotonic() >= self.deadline:
            return "time budget"
        if out_of_bytes or scanned_bytes >= self.max_bytes:
            return "byte budget"
        return None
