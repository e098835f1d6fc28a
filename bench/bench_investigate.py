"""The template pass of investigate_incident against the timeline's pass, in this process, on the same log.

Both read the whole log with no time budget and no helpers (processes = 0), so the ratio is the cost of masking
and grouping every line against counting it by level; CPU seconds are printed beside wall seconds because the
machine may be shared. The log is bench_search's 1 GiB (generated, not committed) cut to the size asked.
Run from the checkout: .venv/bin/python -m bench.bench_investigate [MiB] [rounds]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.bench_search import generate_log
from incident_desk.core.evidence.scan import scan_templates
from incident_desk.core.evidence.tally import Boundary
from incident_desk.core.timeline.levels import scan_levels


def _timed(run: object) -> tuple[float, float]:
    began, cpu = time.perf_counter(), time.process_time()
    run()  # type: ignore[operator]
    return time.perf_counter() - began, time.process_time() - cpu


def main(mebibytes: int, rounds: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="desk-investigate-bench-"))
    try:
        whole = tmp / "whole.txt"
        generate_log(whole)
        log = tmp / "log.txt"
        with whole.open("rb") as source, log.open("wb") as target:
            target.write(source.read(mebibytes * 1024 * 1024))
        whole.unlink()
        opened = datetime(2026, 11, 29, 11, tzinfo=UTC)
        boundary = Boundary(datetime(2026, 11, 29, 10, 50, tzinfo=UTC).timestamp(), opened)
        templates, levels = [], []
        with log.open("rb") as handle:
            for _ in range(rounds):
                templates.append(_timed(lambda: scan_templates(handle, boundary, processes=0)))
                levels.append(_timed(lambda: scan_levels(handle, anchor=boundary.anchor, processes=0)))
        wall_t, cpu_t = (statistics.median(x) for x in zip(*templates, strict=True))
        wall_l, cpu_l = (statistics.median(x) for x in zip(*levels, strict=True))
        print(f"{mebibytes} MiB, {rounds} rounds (medians), one process")
        print(f"templates: {wall_t:.2f} s ({cpu_t:.2f} CPU s), {mebibytes / wall_t:.0f} MiB/s")
        print(f"timeline:  {wall_l:.2f} s ({cpu_l:.2f} CPU s), {mebibytes / wall_l:.0f} MiB/s")
        print(f"templates/timeline: {wall_t / wall_l:.1f}x wall, {cpu_t / cpu_l:.1f}x CPU")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 256, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
