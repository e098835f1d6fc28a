"""What redaction costs a search or a paging of a 1 GiB log: redaction on against off, interleaved in one process.

The bar: searching or paging a 1 GiB log with redaction on costs at most 1.2x redaction off. The log is
bench_search's (1 GiB of service lines, one in 500 with a bearer token, a needle at the end). Each round times,
with redaction on and then off (alternating which goes first):

- a search for a needle on the last line, following next_cursor from the start (the whole GiB scanned);
- the first 50 matches of ``ERROR`` and of ``auth`` (a word in one service's name);
- paging the first 128 MiB in pages of 5,000 lines (paging is per-line Python work, linear in the bytes read).

Run: .venv/bin/python bench/bench_redaction_overhead.py [rounds] [directory for the 1 GiB log]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_search import generate_log
from incident_desk.core.redaction.face import SECRETS, Redaction, redact
from incident_desk.core.search import engine as log_search
from incident_desk.core.search import paging as logfile
from incident_desk.core.search.pattern import compile_pattern

PAGED_BYTES = 128 << 20


def _search_all(log: Path, pattern: str, redaction: Redaction | None, limit: int) -> int:
    compiled = compile_pattern(pattern)
    cursor: logfile.Cursor | None = logfile.START
    found = 0
    while cursor is not None and found < limit:
        result = log_search.search(log, compiled, cursor=cursor, limit=limit - found, redaction=redaction)
        found += len(result.matches)
        cursor = result.next_cursor
    return found


def _page(log: Path, redactor: Callable[[str], str] | None) -> int:
    cursor: logfile.Cursor | None = logfile.START
    lines = 0
    while cursor is not None and cursor.offset < PAGED_BYTES:
        if redactor is None:
            page = logfile.read_page(log, cursor=cursor, limit=5000)
        else:
            page = logfile.read_page(log, cursor=cursor, limit=5000, redactor=redactor)
        lines += len(page.lines)
        cursor = page.next_cursor
    return lines


def main(rounds: int, directory: str | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="redaction-overhead-", dir=directory))
    try:
        log = tmp / "log.txt"
        generate_log(log)
        cases: dict[str, Callable[[bool], object]] = {
            "search: needle on the last line (1 GiB)": lambda on: _search_all(
                log, "needle-xyz", SECRETS if on else None, 1
            ),
            "search: first 50 matches of ERROR": lambda on: _search_all(log, "ERROR", SECRETS if on else None, 50),
            "search: first 50 matches of auth": lambda on: _search_all(log, "auth", SECRETS if on else None, 50),
            "paging the first 128 MiB": lambda on: _page(log, redact if on else None),
        }
        redact("warm up the rules")
        times: dict[str, dict[bool, list[float]]] = {name: {True: [], False: []} for name in cases}
        for number in range(rounds):
            for name, case in cases.items():
                for on in (True, False) if number % 2 == 0 else (False, True):
                    began = time.perf_counter()
                    case(on)
                    times[name][on].append(time.perf_counter() - began)
        print(f"redaction on / off, medians of {rounds} interleaved rounds")
        for name, measured in times.items():
            with_redaction, without = statistics.median(measured[True]), statistics.median(measured[False])
            ratio = with_redaction / without
            print(f"  {name:42s} on {with_redaction:8.3f} s  off {without:8.3f} s  ratio {ratio:5.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else None)
