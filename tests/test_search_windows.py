"""A window of candidates ends after a window's scan time, however many lines it holds.

Budgets and cancellation are looked at between windows. A window is sized in bytes from the scan rate so far, so
the first one (sized before any rate is known) used to run its full 256 KiB: where every line is a candidate to
decode and redact, that was some 100 ms, and a cancel arriving then waited for it. These tests count lines, not
milliseconds: a redaction that takes 1 ms a line, and a cancel set on its first line.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from incident_desk.core.redaction.face import SECRETS, Redaction
from incident_desk.core.search.engine import search
from incident_desk.core.search.pattern import compile_pattern
from tests.test_search_responsiveness import ALL_CANDIDATES

LINE_SECONDS = 0.001


def _slow_redaction(on_first_line: threading.Event, decided: list[str]) -> Redaction:
    def apply(text: str) -> str:
        decided.append(text)
        on_first_line.set()
        time.sleep(LINE_SECONDS)
        return SECRETS.apply(text)

    return Redaction(apply=apply, mask=SECRETS.mask, triggers=SECRETS.triggers, shapes=SECRETS.shapes)


def test_a_cancel_during_the_first_window_is_seen_after_a_windows_time_of_candidates(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    line = ALL_CANDIDATES[1]
    log.write_bytes((line + b"\n") * 20_000)  # 1.3 MB, a first window of 256 KiB holds some 4,000 lines
    cancelled, decided = threading.Event(), list[str]()
    result = search(
        log,
        compile_pattern(ALL_CANDIDATES[0]),
        limit=10,
        redaction=_slow_redaction(cancelled, decided),
        cancelled=cancelled,
    )
    assert result.stopped == "cancelled"
    # A window's scan time (20 ms) is about 20 such lines; a loaded machine decides fewer, never more.
    assert 1 <= len(decided) <= 40, f"{len(decided)} lines were decided before the cancel was seen"
    assert result.next_cursor is not None
    assert result.next_cursor.line == len(decided) + 1


def test_a_search_cut_into_short_windows_finds_what_a_whole_scan_finds(tmp_path: Path) -> None:
    """Ending windows early moves no line: every candidate is decided once, in order, to the end."""
    log = tmp_path / "log.txt"
    lines = [ALL_CANDIDATES[1]] * 600
    lines[::150] = [b"10:00:00 api INFO REDACTED] x marks the spot"] * len(lines[::150])
    log.write_bytes(b"".join(one + b"\n" for one in lines))
    decided: list[str] = []
    result = search(
        log,
        compile_pattern(ALL_CANDIDATES[0]),
        limit=100,
        redaction=_slow_redaction(threading.Event(), decided),
    )
    assert result.stopped == "end of log"
    assert [match.number for match in result.matches] == list(range(1, 601, 150))
    assert len(decided) >= 600  # each line at least once (a matching one is redacted again in context)
