"""core.evidence directly: what the mask hides, how lines group into templates, the baseline split, the resume
point (a stopped pass read on, an appended log read only where it grew), the helpers' stretches (the same tally
as one process's), a metric step, and the text within its token budget."""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from incident_desk.core import log_clock
from incident_desk.core.evidence.cache import TemplateCache
from incident_desk.core.evidence.drain import templates
from incident_desk.core.evidence.findings import Finding
from incident_desk.core.evidence.masking import mask_lines
from incident_desk.core.evidence.report import report
from incident_desk.core.evidence.scan import scan_templates
from incident_desk.core.evidence.steps import find_step
from incident_desk.core.evidence.tally import Boundary, Tally
from incident_desk.core.helper_pool import HELPERS

DAY = date(2026, 11, 29)
NOON = datetime(2026, 11, 29, 12, tzinfo=UTC)  # the opening: every bare time of DAY lies within 12 h of it
BASELINE_END = datetime(2026, 11, 29, 10, 50, tzinfo=UTC)
BOUNDARY = Boundary(BASELINE_END.timestamp(), NOON)


def _shown(line: str) -> str:
    return mask_lines(line.encode() + b"\n")[:-1].replace(b"\x1f", b"<*>").decode()


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("10:58:12 svc ERROR took 1200ms", "<*>:<*>:<*> svc ERROR took <*>"),
        ("id=4f9a2c77 at 0xdeadbeef0", "id=<*> at <*>"),
        ("peer 10.0.12.7:5432 closed", "peer <*>:<*> closed"),
        ("user 'bob' asked \"select * from t\" twice", "user 'bob' asked \"<*>\" twice"),
        ("uuid 123e4567-e89b-12d3-a456-426614174000 done", "uuid <*> done"),
        ("2026-11-29T10:58:12.123Z svc WARN retry 3/5", "<*>:<*>:<*> svc WARN retry <*>/<*>"),
        ("no variable part here", "no variable part here"),
    ],
)
def test_the_mask_hides_numbers_ids_hex_addresses_durations_and_quoted_values(line: str, shown: str) -> None:
    assert _shown(line) == shown


def test_lines_that_differ_in_a_word_group_into_one_template_and_others_stay_apart() -> None:
    lines = [
        "10:00:01 svc ERROR login failed for user alice",
        "10:00:02 svc ERROR login failed for user bob",
        "10:00:03 svc ERROR disk full on volume data",
        "10:00:04 svc INFO login ok",
    ]
    tally = Tally()
    from incident_desk.core.evidence.tally import tally_chunk

    tally_chunk(("\n".join(lines) + "\n").encode(), 0, BOUNDARY, tally)
    found = {t.text: (t.count, t.level, t.first_line, t.last_line) for t in templates(tally.table.items())}
    assert found == {
        "svc ERROR login failed for user <*>": (2, "error", 0, 1),
        "svc ERROR disk full on volume data": (1, "error", 2, 2),
        "svc INFO login ok": (1, "other", 3, 3),
    }


def _log(minutes: int, start: datetime = BASELINE_END - timedelta(minutes=20)) -> bytes:
    out = []
    for minute in range(minutes):
        at = start + timedelta(minutes=minute)
        out.append(f"{at:%H:%M:%S} svc INFO tick {minute}")
        if at >= BASELINE_END:
            out.append(f"{at:%H:%M:%S} svc ERROR broke {minute}")
    return ("\n".join(out) + "\n").encode()


def test_the_baseline_is_the_lines_timed_before_its_end() -> None:
    scan = scan_templates(io.BytesIO(_log(30)), BOUNDARY, processes=0)
    assert scan.stopped == "end of log"
    assert (scan.tally.lines, scan.tally.baseline_lines) == (40, 20)
    rows = {t.text: (t.baseline, t.recent) for t in templates(scan.tally.table.items())}
    assert rows == {"svc INFO tick <*>": (20, 10), "svc ERROR broke <*>": (0, 10)}


def _rows(tally: Tally) -> dict[bytes, list[int]]:
    return {key: list(row) for key, row in tally.table.items()}


def test_a_stopped_pass_reads_on_and_an_appended_log_is_read_only_where_it_grew(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(_log(600))
    cache = TemplateCache(tmp_path / "cache")
    with path.open("rb") as handle:
        first = cache.scan_templates(handle, BOUNDARY, byte_budget=4096, chunk_bytes=4096, processes=0)
        assert first.stopped == "byte budget" and 0 < first.scanned_bytes < first.total_bytes
        second = cache.scan_templates(handle, BOUNDARY, chunk_bytes=4096, processes=0)
    assert second.stopped == "end of log"
    with path.open("rb") as handle:
        whole = scan_templates(handle, BOUNDARY, processes=0)
    assert _rows(second.tally) == _rows(whole.tally) and second.tally.lines == whole.tally.lines
    with path.open("ab") as handle:
        handle.write(b"20:00:00 svc ERROR appended 1\n")
    with path.open("rb") as handle:
        grown = cache.scan_templates(handle, BOUNDARY, byte_budget=1024, chunk_bytes=4096, processes=0)
    assert grown.stopped == "end of log", "only the appended line was left to read, within 1 KiB"
    assert grown.tally.lines == whole.tally.lines + 1
    path.write_bytes(b"10:55:00 svc WARN rewritten\n" * 3)  # the same file rewritten: read afresh
    with path.open("rb") as handle:
        fresh = cache.scan_templates(handle, BOUNDARY, processes=0)
    assert fresh.tally.lines == 3 and len(fresh.tally.table) == 1


def test_helpers_tally_stretches_as_one_process_would(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    day = datetime(2026, 11, 29, tzinfo=UTC)
    lines = [
        f"{day + timedelta(seconds=s):%H:%M:%S} svc {'ERROR broke' if s % 7 else 'INFO tick'} {s}"
        for s in range(0, 86400, 2)
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode())
    assert HELPERS.start(2, wait_seconds=60), "helper processes could not start here"
    with path.open("rb") as handle:
        helped = scan_templates(handle, BOUNDARY, processes=2, stretch_bytes=64 * 1024, chunk_bytes=16 * 1024)
        alone = scan_templates(handle, BOUNDARY, processes=0, chunk_bytes=16 * 1024)
    assert helped.stopped == alone.stopped == "end of log"
    assert _rows(helped.tally) == _rows(alone.tally)
    assert (helped.tally.lines, helped.tally.baseline_lines) == (alone.tally.lines, alone.tally.baseline_lines)


def test_a_step_is_found_with_its_levels_and_time_and_noise_is_not_a_step() -> None:
    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    points = [(start + timedelta(minutes=m), (10.0 if m < 30 else 80.0) + (m % 3) / 2) for m in range(60)]
    step = find_step(points)
    assert step is not None and step.at == start + timedelta(minutes=30)
    assert abs(step.before - 10.5) < 0.5 and abs(step.after - 80.5) < 0.5
    assert find_step([(start + timedelta(minutes=m), 10.0 + (m % 3) / 2) for m in range(60)]) is None


def test_the_text_keeps_to_the_budget_dropping_the_lowest_ranked_first() -> None:
    findings = [
        Finding("change", round(0.9 - i / 100, 3), f"change {i} " + "x" * 60, {"source": "d"}) for i in range(40)
    ]
    answer = report(["INC-1 svc: title"], findings, 100)
    assert len(answer.text.encode()) <= 400
    assert answer.findings == findings[: len(answer.findings)] and answer.dropped == 40 - len(answer.findings)
    assert answer.text.endswith(f"({answer.dropped} lower-ranked findings dropped to fit the budget)")
    assert report(["INC-1 svc: title"], findings, 10_000).dropped == 0


def test_a_line_too_long_to_hold_is_counted_without_a_template_and_a_pass_resumes_only_at_a_line_start() -> None:
    from incident_desk.core.evidence import reading

    huge = b"10:55:00 svc ERROR " + b"x" * (reading.MAX_LINE_BYTES + 3 * 1024 * 1024) + b"\n"
    log = b"10:55:00 svc INFO before\n" + huge + b"10:55:01 svc INFO after\n"
    scan = scan_templates(io.BytesIO(log), BOUNDARY, processes=0, byte_budget=2 << 20, chunk_bytes=1024 * 1024)
    assert scan.stopped == "byte budget" and scan.resume is not None
    assert log[scan.resume.offset - 1 : scan.resume.offset] == b"\n", "the resume point is a line start"
    whole = scan_templates(io.BytesIO(log), BOUNDARY, processes=0, chunk_bytes=1024 * 1024)
    assert (whole.tally.lines, whole.skipped_lines, len(whole.tally.table)) == (3, 1, 2)  # before, after


def test_a_resume_point_written_by_a_desk_that_read_times_another_way_is_not_resumed(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(_log(600))
    cache = TemplateCache(tmp_path / "cache")
    with path.open("rb") as handle:
        cache.scan_templates(handle, BOUNDARY, processes=0)
        (entry,) = (tmp_path / "cache").iterdir()
        older = json.loads(entry.read_text())
        assert older.pop("reading") == log_clock.READING
        entry.write_text(json.dumps(older))
        assert cache.load_resume(handle) is None
