"""Run indexes remembered across searches, so a log searched again need not have its newlines counted again.

Counting a run's newlines and finding its long lines costs a search more CPU than finding the pattern, and a model
hunting through an incident's log searches the same bytes again and again. Each run's index is remembered under
the log's identity (device, inode), the run's offset and length, and a keyed 64-bit hash of its bytes (stringzilla's,
several times cheaper than the count): a run whose bytes changed (a log rewritten, or truncated and grown again)
hashes differently and is counted afresh. The hash's key is drawn once per process, so whoever writes a log cannot
craft bytes that collide. Bounded: the least recently used runs go first.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

# About 14 GiB of logs in 896 KiB stretches; an entry is a few hundred bytes, so at most a few MiB.
MAX_RUNS = 16 * 1024

Spans = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class RunIndex:
    """A run's newline count, its lines too long to scan raw, and (once a pattern needed them, else None) its
    lines that are not UTF-8: all of them facts about its bytes alone."""

    newlines: int
    long_lines: Spans
    undecodable: Spans | None


class RunIndexes:
    """Run indexes by (log identity, offset, length), each kept with the hash of the bytes it was computed from."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self.max_runs = max_runs
        self.key = secrets.randbits(64)
        self.lock = threading.Lock()
        self.runs: OrderedDict[tuple[int, int, int, int], tuple[int, RunIndex]] = OrderedDict()

    def digest(self, buffer: bytearray, length: int) -> int:
        import stringzilla

        with memoryview(buffer) as view:
            return int(stringzilla.hash(view[:length], self.key))

    def get(self, key: tuple[int, int, int, int], digest: int) -> RunIndex | None:
        """The index remembered for ``key`` if it was computed from bytes with this ``digest``."""
        with self.lock:
            found = self.runs.get(key)
            if found is None or found[0] != digest:
                return None
            self.runs.move_to_end(key)
            return found[1]

    def put(self, key: tuple[int, int, int, int], digest: int, index: RunIndex) -> None:
        with self.lock:
            self.runs[key] = (digest, index)
            self.runs.move_to_end(key)
            while len(self.runs) > self.max_runs:
                self.runs.popitem(last=False)


RUN_INDEXES = RunIndexes()
