"""Whether the desk is working on something now, and for how long it has not been.

Background loads that hold the interpreter lock (numpy's import: 0.1-0.3 s of C initialisation on a busy
machine) wait for a quiet moment instead of stalling a request under way, or a ping answered meanwhile. Searches
count themselves; the stdio desk counts every request but pings (``server.CountRequestsUnderWay``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Activity:
    """Work under way in this process, counted from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._under_way = 0
        self._last_ended = -math.inf  # time.monotonic() when the last piece of work ended

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Count the block as work under way, until it ends (by return or by error)."""
        with self._lock:
            self._under_way += 1
        try:
            yield
        finally:
            with self._lock:
                self._under_way -= 1
                self._last_ended = time.monotonic()

    def quiet_for(self) -> float:
        """Seconds since the last work ended (infinite if none ran); 0 while some is under way."""
        with self._lock:
            return 0.0 if self._under_way > 0 else time.monotonic() - self._last_ended

    def wait_until_quiet(
        self, quiet_seconds: float, every: float = 0.05, *, unless: Callable[[], bool] = lambda: False
    ) -> bool:
        """Block until nothing has been under way for ``quiet_seconds`` (looking ``every`` seconds): True; False
        as soon as ``unless()`` is true (the process is exiting, say)."""
        while self.quiet_for() < quiet_seconds:
            if unless():
                return False
            time.sleep(every)
        return not unless()


def main_thread_finished() -> bool:
    """Whether the process is exiting: a background loader waiting for a quiet moment gives up then."""
    return not threading.main_thread().is_alive()


ACTIVITY = Activity()
