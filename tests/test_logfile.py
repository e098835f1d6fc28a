"""Bounded log access: tail windows, paging, search, and flat memory on a 200 MB log."""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path
from typing import Any

import numpy  # noqa: F401 - runs are counted through numpy once it is loaded, as the desk's loader loads it
import pytest

from incident_desk.core.redaction.face import SECRETS, redact
from incident_desk.core.search import engine as log_search
from incident_desk.core.search import paging as logfile
from incident_desk.core.search import runs as log_runs
from incident_desk.core.search.engine import SearchSizes, search
from incident_desk.core.search.paging import Cursor, CursorError, read_page, read_tail
from incident_desk.core.search.pattern import PatternError, compile_pattern
from incident_desk.server import build_server
from tests.helpers import AppFactory, connect, text_of


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def test_tail_of_a_small_log_is_the_whole_log(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"a\nb\nc\n")
    window = read_tail(log, max_lines=10, max_bytes=1024)
    assert (window.text, window.truncated, window.shown_lines) == ("a\nb\nc\n", False, 3)


def test_tail_keeps_whole_lines_within_the_line_and_byte_caps(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"".join(b"line %04d\n" % i for i in range(1000)))
    by_lines = read_tail(log, max_lines=3, max_bytes=1 << 20)
    by_bytes = read_tail(log, max_lines=1000, max_bytes=1024 + 5)
    assert by_lines.text == "line 0997\nline 0998\nline 0999\n"
    assert by_lines.truncated and by_lines.total_bytes == 10_000
    assert by_bytes.text.startswith("line 0") and by_bytes.text.endswith("line 0999\n")
    assert all(len(line) == 9 for line in by_bytes.text.splitlines()), "a partial first line leaked through"
    assert by_bytes.shown_bytes <= 1029


def test_tail_without_trailing_newline_and_empty_file(tmp_path: Path) -> None:
    assert read_tail(_write(tmp_path / "a", b"x\ny"), max_lines=1, max_bytes=1024).text == "y"
    empty = read_tail(_write(tmp_path / "b", b""), max_lines=5, max_bytes=1024)
    assert (empty.text, empty.truncated) == ("", False)


def test_pages_walk_the_whole_log_with_cursors(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"".join(b"n=%d\n" % i for i in range(1, 26)))
    seen: list[str] = []
    cursor: Cursor | None = logfile.START
    pages = 0
    while cursor is not None:
        page = read_page(log, cursor=Cursor.decode(cursor.encode()), limit=10)
        assert [line.number for line in page.lines] == list(range(pages * 10 + 1, pages * 10 + 1 + len(page.lines)))
        seen += [line.text for line in page.lines]
        cursor = page.next_cursor
        pages += 1
    assert pages == 3
    assert seen == [f"n={i}" for i in range(1, 26)]


def test_cursors_that_do_not_fit_the_log_are_refused(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"alpha\nbeta\n")
    with pytest.raises(CursorError, match="malformed cursor"):
        Cursor.decode("../etc")
    with pytest.raises(CursorError, match="start of a line"):
        read_page(log, cursor=Cursor(2, 3), limit=5)
    with pytest.raises(CursorError, match="past the end"):
        read_page(log, cursor=Cursor(9, 999), limit=5)
    assert [line.text for line in read_page(log, cursor=Cursor(2, 6), limit=5).lines] == ["beta"]


def test_overlong_lines_are_cut_not_loaded(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"short\n" + b"x" * (5 * 1024 * 1024) + b"\nafter\n")
    page = read_page(log, limit=3)
    assert [line.number for line in page.lines] == [1, 2, 3]
    assert page.lines[1].text.endswith(" [line cut]")
    assert len(page.lines[1].text) < logfile.MAX_LINE_BYTES + 20
    assert page.lines[2].text == "after"
    tail = read_tail(log, max_lines=2, max_bytes=64 * 1024)
    assert tail.text == "after\n"


def test_search_finds_numbered_matches_and_resumes(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"".join(b"%s %d\n" % (b"ERR" if i % 4 == 0 else b"ok", i) for i in range(40)))
    first = search(log, compile_pattern("ERR"), limit=3)
    assert [m.number for m in first.matches] == [1, 5, 9]
    assert first.next_cursor is not None
    rest = search(log, compile_pattern("ERR"), cursor=first.next_cursor, limit=100)
    assert [m.number for m in rest.matches] == [13, 17, 21, 25, 29, 33, 37]
    assert rest.next_cursor is None


def test_search_stops_at_its_scan_budget_and_says_where_to_resume(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"".join(b"line %07d\n" % i for i in range(200_000)) + b"NEEDLE\n")
    budget = 1024 * 1024  # one read block: the budget is honoured at block granularity, on a line boundary
    partial = search(log, compile_pattern("NEEDLE"), limit=5, byte_budget=budget)
    assert partial.matches == [] and partial.next_cursor is not None
    assert budget - 13 < partial.scanned_bytes <= budget
    found = []
    calls = 1
    cursor: Cursor | None = partial.next_cursor
    while cursor is not None:
        step = search(log, compile_pattern("NEEDLE"), cursor=cursor, limit=5, byte_budget=budget)
        found += step.matches
        cursor = step.next_cursor
        calls += 1
    assert calls == 3
    assert [(m.number, m.text) for m in found] == [(200_001, "NEEDLE")]


def test_search_cursor_after_the_limit_resumes_right_after_the_last_match(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"hit 1\nmiss\nhit 3\nhit 4\n")
    first = search(log, compile_pattern("hit"), limit=2)
    assert [m.number for m in first.matches] == [1, 3]
    assert first.next_cursor == Cursor(4, 17)
    assert [m.number for m in search(log, compile_pattern("hit"), cursor=first.next_cursor, limit=9).matches] == [4]


def test_search_matches_redacted_text_so_secrets_cannot_be_probed(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"password=hunter2\nfine\n")
    assert search(log, compile_pattern("hunter2"), limit=5, redaction=SECRETS).matches == []
    assert [m.text for m in search(log, compile_pattern("hunter2"), limit=5).matches] == ["password=hunter2"]


LINE_WIDTH = 100
BIG_LOG_BYTES = 200 * 1024 * 1024


def _generate_big_log(path: Path) -> int:
    """A 200 MB log of fixed-width lines, written in 1 MB blocks; returns the line count."""
    line = b"2026-11-29T10:58:12Z payments-api INFO request served status=200 latency_ms=12 " + b"." * 20 + b"\n"
    assert len(line) == LINE_WIDTH
    block = line * (1024 * 1024 // LINE_WIDTH)
    lines = 0
    with path.open("wb") as handle:
        while handle.tell() + len(block) <= BIG_LOG_BYTES:
            handle.write(block)
            lines += len(block) // LINE_WIDTH
        handle.write(b"2026-11-29T11:00:00Z payments-api ERROR NEEDLE pool exhausted\n")
    return lines + 1


@pytest.mark.slow
@pytest.mark.anyio
async def test_paging_and_search_on_a_200_mb_log_keep_memory_flat(tmp_path: Path, make_app: AppFactory) -> None:
    root = tmp_path / "desk"
    entry = root / "incidents" / "INC-BIG"
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        'title="big"\nservice="payments-api"\nseverity="SEV1"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
    )
    total_lines = _generate_big_log(entry / "log.txt")
    app = make_app(data_dir=root)
    async with connect(build_server(app), "legacy") as client:
        await client.call_tool("read_incident_log", {"incidentId": "INC-BIG", "limit": 1})  # warm imports and caches
        tracemalloc.start()
        try:
            tail = text_of(await client.read_resource("incident://INC-BIG/log"))
            first = await client.call_tool("read_incident_log", {"incidentId": "INC-BIG", "limit": 500})
            last_line_offset = (total_lines - 2) * LINE_WIDTH
            near_end = app.cursors.encode("INC-BIG", Cursor(total_lines - 1, last_line_offset))
            last = await client.call_tool("read_incident_log", {"incidentId": "INC-BIG", "cursor": near_end})
            matches: list[dict[str, object]] = []
            cursor: str | None = None
            calls = 0
            while True:
                arguments: dict[str, object] = {"incidentId": "INC-BIG", "pattern": "NEEDLE"}
                if cursor:
                    arguments["cursor"] = cursor
                found = await client.call_tool("search_incident_log", arguments)
                calls += 1
                matches += found.structured_content["matches"]
                cursor = found.structured_content["next_cursor"]
                if cursor is None:
                    break
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert tail.startswith("[incident-desk: showing the last 200 lines")
    assert tail.endswith("ERROR NEEDLE pool exhausted\n")
    assert first.structured_content["lines"][0]["number"] == 1
    assert len(first.structured_content["lines"]) == 500
    assert [line["number"] for line in last.structured_content["lines"]] == [total_lines - 1, total_lines]
    assert last.structured_content["next_cursor"] is None
    assert matches == [{"number": total_lines, "text": "2026-11-29T11:00:00Z payments-api ERROR NEEDLE pool exhausted"}]
    assert calls <= 2, "a 200 MB search of a selective pattern fits in one call's time budget, or two"
    # The log is 200 MB; everything above stayed within a few MB of Python allocations.
    assert peak < 16 * 1024 * 1024, f"peak traced memory {peak / 1e6:.1f} MB"


ANCHORED_LOG = b"INFO start\nERROR boom\nINFO exit\n"


@pytest.mark.parametrize(
    ("pattern", "ignore_case"),
    [
        (r"^ERROR", False),
        (r"boom$", False),
        (r"^ERROR boom$", False),
        (r"^error", True),
        (r"\AERROR", False),  # \A and \Z (\z) mean the start and end of each line, as ^ and $ do
        (r"boom\Z", False),
        (r"boom\z", False),
        (r"(?-m:^ERROR)", False),  # turning multi-line off changes nothing: a line is one line
        (r"(?m)^ERROR boom$", False),
        (r"(?s)^ERROR.boom$", False),  # a dot that matches newlines still never spans two lines
    ],
)
def test_search_finds_lines_by_anchored_and_line_edge_patterns(tmp_path: Path, pattern: str, ignore_case: bool) -> None:
    log = _write(tmp_path / "log.txt", ANCHORED_LOG)
    compiled = compile_pattern(pattern, ignore_case=ignore_case)
    found = search(log, compiled, limit=10)
    assert [(m.number, m.text) for m in found.matches] == [(2, "ERROR boom")]
    assert [m.number for m in search(log, compiled, limit=10, redaction=SECRETS).matches] == [2]


@pytest.mark.parametrize(
    ("pattern", "named", "instead"),
    [
        (r"(?<!\s)ERROR", "negative lookbehind (?<!...)", "negated class"),
        (r"(?<=id=)\d+", "lookbehind (?<=...)", "as id=\\d+"),
        (r"boom(?!\s)", "negative lookahead (?!...)", "second search"),
        (r"foo(?=bar)", "lookahead (?=...)", "as foobar"),
        (r"(\w+) \1", "backreference \\1", "repeated text itself"),
        (r"(?P<w>\w+) (?P=w)", "named backreference (?P=...)", "repeated text itself"),
        (r"ERROR (?>[^x]+)$", "atomic group (?>...)", "plain group (?:...)"),
        (r"ERROR [^x]++$", "possessive quantifier ++", "plain quantifier +"),
        (r"a{2}+", "possessive quantifier {2}+", "plain quantifier {2}"),
        (r"(?(1)a|b)", "conditional group", "alternation"),
    ],
)
def test_patterns_that_need_backtracking_are_refused_naming_the_construct(
    pattern: str, named: str, instead: str
) -> None:
    with pytest.raises(PatternError) as refused:
        compile_pattern(pattern)
    message = str(refused.value)
    assert message.startswith(f"Unsupported regular expression {pattern!r}: ")
    assert named in message and instead in message


def test_search_always_moves_past_a_line_longer_than_its_scan_budget(tmp_path: Path) -> None:
    long_line = b"x" * (3 * 1024 * 1024)  # longer than one read block and than the budget
    log = _write(tmp_path / "log.txt", b"first\n" + long_line + b"\nERROR after\n" + long_line)
    cursor: Cursor | None = logfile.START
    found = []
    calls = 0
    while cursor is not None:
        step = search(log, compile_pattern("ERROR"), cursor=cursor, limit=10, byte_budget=1024)
        assert step.scanned_bytes > 0 and step.next_cursor != cursor, "search made no progress"
        found += step.matches
        cursor = step.next_cursor
        calls += 1
        assert calls <= 5
    assert [(m.number, m.text) for m in found] == [(3, "ERROR after")]


def test_tail_shows_the_end_of_a_last_line_longer_than_the_window(tmp_path: Path) -> None:
    for ending in (b"\n", b""):
        log = _write(tmp_path / "log.txt", b"ok line\n" + b"y" * 300_000 + b" the end" + ending)
        window = read_tail(log, max_lines=200, max_bytes=64 * 1024, redactor=redact)
        assert window.shown_lines == 1 and window.truncated
        assert window.text.startswith("[line cut] y") and window.text.endswith("y the end" + ending.decode())
        assert len(window.text) <= logfile.MAX_LINE_BYTES + 20
        assert window.shown_bytes == 64 * 1024


def test_tail_of_a_cut_line_shows_no_part_of_a_secret_split_at_its_start(tmp_path: Path) -> None:
    secret = "abcdefghijklmnopqrstuvwxyz0123456789" * 3
    after = logfile.MAX_LINE_BYTES - 51  # a line's last MAX_LINE_BYTES would start 50 bytes before the secret's end
    line = "y" * 100_000 + " Authorization: Bearer " + secret + " " + "z" * after
    log = _write(tmp_path / "log.txt", line.encode() + b"\n")
    # Windows that hold the whole secret and its "Bearer", only the secret, and only the secret's end.
    for max_bytes in (64 * 1024, after + 140, after + 80):
        text = read_tail(log, max_lines=10, max_bytes=max_bytes, redactor=redact).text
        assert text.startswith("[line cut] ") and text.endswith("zzz\n")
        assert not any(secret[i : i + 6] in text for i in range(len(secret) - 5)), max_bytes


def test_a_secret_split_by_the_line_cut_shows_no_prefix(tmp_path: Path) -> None:
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    line = b"x" * (logfile.MAX_LINE_BYTES - 20) + b" apikey " + key.encode()  # the cut falls inside the key
    log = _write(tmp_path / "log.txt", line + b"\nnext\n")
    texts = [
        read_page(log, limit=1, redactor=redact).lines[0].text,
        search(log, compile_pattern("apikey"), limit=1, redaction=SECRETS).matches[0].text,
        read_tail(log, max_lines=2, max_bytes=64 * 1024, redactor=redact).text.split("\n")[0],
    ]
    for text in texts:
        assert text.endswith("x apikey [line cut]")
        assert "sk-" not in text and "A1b2" not in text


def test_a_cut_with_no_space_near_it_drops_the_bytes_before_it(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"a" * (logfile.MAX_LINE_BYTES + 100) + b"\n")
    (line,) = read_page(log, limit=1).lines
    assert line.text == "a" * (logfile.MAX_LINE_BYTES - 256) + " [line cut]"


def test_counting_a_runs_newlines_overlaps_with_reading_and_scanning_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run's index finishes only once the scan has moved on to the second run: it does not wait for it.

    Waiting for each run's count at its end left the indexer thread's work (0.2 s/GiB) on the scan's path. Read by
    workers (on a machine with a core to spare), a run is handed on before its count is done.
    """
    log = tmp_path / "log.txt"
    log.write_bytes(b"".join(b"line %05d INFO all well\n" % i for i in range(2_000)) + b"last needle-xyz\n")
    second_run_scanned = threading.Event()
    overlapped: list[bool] = []
    index_of = log_runs.newlines_and_long_lines
    scan_run = log_search._Search.run

    def slow_first_index(run: Any, scratch: Any) -> Any:
        if run.offset == 0:
            overlapped.append(second_run_scanned.wait(timeout=2))
        return index_of(run, scratch)

    def run(self: Any, run: Any) -> None:
        if run.offset > 0:
            second_run_scanned.set()
        scan_run(self, run)

    monkeypatch.setattr(log_search, "newlines_and_long_lines", slow_first_index)
    monkeypatch.setattr(log_search._Search, "run", run)
    sizes = SearchSizes(read_bytes=9 * 1024, workers=2)
    result = search(log, compile_pattern("needle-xyz"), limit=5, redaction=SECRETS, sizes=sizes)
    assert [line.number for line in result.matches] == [2_001]
    assert overlapped == [True]


def test_a_page_of_long_lines_stops_at_its_byte_bound_and_pages_on(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.txt", b"".join(b"%05d " % i + b"x" * 8000 + b"\n" for i in range(1, 301)))
    seen: list[int] = []
    cursor: Cursor | None = logfile.START
    while cursor is not None:
        page = read_page(log, cursor=cursor, limit=5_000, max_bytes=64 * 1024)
        assert 1 <= len(page.lines) <= 9, "8 lines hold 64 KiB: the ninth crosses the bound, none more"
        seen += [line.number for line in page.lines]
        cursor = page.next_cursor
    assert seen == list(range(1, 301))
    assert len(read_page(log, limit=5_000).lines) == 300, "no bound given: the line limit alone"
    huge = _write(tmp_path / "huge.txt", b"y" * 100_000 + b"\nnext\n")
    assert [line.number for line in read_page(huge, limit=10, max_bytes=1024).lines] == [1], "one line at least"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_read_incident_log_answers_a_bounded_page_however_long_the_lines(
    tmp_path: Path, make_app: AppFactory, mode: str
) -> None:
    """5,000 lines of 8 KiB asked at once used to be one 40 MB answer, serialised on the event loop."""
    root = tmp_path / "desk"
    entry = root / "incidents" / "INC-WIDE"
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        'title="wide"\nservice="payments-api"\nseverity="SEV2"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
    )
    (entry / "log.txt").write_bytes(b"".join(b"%05d " % i + b"z" * 8180 + b"\n" for i in range(1, 5_001)))
    app = make_app(data_dir=root)
    async with connect(build_server(app), mode) as client:
        first = await client.call_tool("read_incident_log", {"incidentId": "INC-WIDE", "limit": 5_000})
        second = await client.call_tool(
            "read_incident_log",
            {"incidentId": "INC-WIDE", "limit": 5_000, "cursor": first.structured_content["next_cursor"]},
        )
    lines = first.structured_content["lines"]
    assert sum(len(line["text"]) for line in lines) <= app.settings.page_max_bytes + 8 * 1024
    assert 1 < len(lines) < 5_000
    assert second.structured_content["lines"][0]["number"] == len(lines) + 1
