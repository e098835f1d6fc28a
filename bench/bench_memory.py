"""Incident memory at scale: 100,000 remembered incidents (SQLite FTS5, BM25), the median similar-incident query.

The memory is filled from the test corpus's generator (tests/memory_corpus.py: 26 failure kinds in varied words and
log shapes), then asked for the top 5 like each of 200 fresh incidents, as find_similar_incidents asks. The issue's
bound is a median under 50 ms on this machine.
Run: .venv/bin/python bench/bench_memory.py [incidents]
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from incident_desk.core.journal.memory import SqliteMemory  # noqa: E402
from tests.memory_corpus import KINDS, make_case  # noqa: E402

QUERIES = 200
BATCH = 5000


def main(count: int) -> None:
    rng = random.Random(100_000)
    kinds = list(KINDS)
    with tempfile.TemporaryDirectory() as directory:
        memory = SqliteMemory(Path(directory) / "journal.sqlite3", "bench")
        started = time.perf_counter()
        for first in range(0, count, BATCH):
            memory.remember_many(
                make_case(kinds[index % len(kinds)], index, rng).incident for index in range(first, first + BATCH)
            )
        filled = time.perf_counter() - started
        fresh = [make_case(kinds[index % len(kinds)], count + index, rng) for index in range(QUERIES)]
        timings, hits = [], 0
        for case in fresh:
            new = case.incident
            text = " ".join((new.title, new.service, new.labels, new.signature))
            began = time.perf_counter()
            top = memory.similar(text, None, 5)
            timings.append(time.perf_counter() - began)
            hits += any(found.incident.incident_id.startswith(f"PAST-{case.kind}-") for found in top[:3])
        sys.stderr.write(
            f"{memory.count()} incidents remembered in {filled:.1f} s; {QUERIES} queries: median "
            f"{statistics.median(timings) * 1000:.1f} ms, p90 {sorted(timings)[int(QUERIES * 0.9)] * 1000:.1f} ms, "
            f"max {max(timings) * 1000:.1f} ms; same kind in the top 3: {hits / QUERIES:.0%}\n"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
