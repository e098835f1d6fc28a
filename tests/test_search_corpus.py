"""Search against a line-by-line reference: every corpus pattern, redaction on and off, small and large reads.

The reference reads the log with ``read_page`` (each line as shown: cut, decoded, redacted) and tests each line
with Python's ``re``. The search under test scans raw bytes with RE2 and re-checks only candidate lines, so any
candidate it wrongly skips, any line number it miscounts, and any cursor that resumes in the wrong place shows
up here as a difference.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from incident_desk.core.redaction.face import SECRETS, redact
from incident_desk.core.search import paging as logfile
from incident_desk.core.search.engine import SearchSizes, search
from incident_desk.core.search.paging import Cursor, read_page
from incident_desk.core.search.pattern import compile_pattern
from incident_desk.core.search.runs import ROW

SECRET_LINES = [
    b"10:00:01 auth INFO login ok Authorization: Bearer eyZabcdefghijklmnopq",
    b"10:00:02 payments-api ERROR db connect failed dsn=postgres://app:hunter2secret@db:5432/main",
    b"10:00:03 payments-api WARN retrying with password=hunter2 attempt=2",
    b"10:00:04 gateway INFO using sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2 for upstream",
    b'10:00:05 auth DEBUG {"client_secret": "s3cr3t-value", "api_key": "AbC123xyz987"}',
    b"10:00:06 auth INFO key rotation done: token abcdefgh12345678 revoked",
]
PLAIN_LINES = [
    b"10:01:00 payments-api ERROR pool exhausted waiters=12 latency_ms=840",
    b"10:01:01 payments-api INFO request served status=200 latency_ms=12",
    b"10:01:02 search-api WARN index segment merge running",
    b"10:01:03 search-api INFO p99 latency 840ms (SLO 500ms)",
    b"10:01:04 gateway error upstream reset by peer status=502",
    b"ERROR at the start of a line",
    b"line ending in exhausted",
    b"",
    b"windows line ending\r",
    b"tabs\tand  double  spaces",
    b"[REDACTED] appears literally in this line",
    "caf\u00e9 r\u00e9sum\u00e9 na\u00efve \u00c9CHEC".encode(),
    "\u65e5\u672c\u8a9e \u30ed\u30b0 deployed \U0001f680".encode(),
    "Stra\u00dfe 5 \u212a cold \u0130stanbul".encode(),
    b"bad \xff\xfe bytes ERROR here",
    b"truncated sequence \xe2\x82",
    b"mail ops@example and ops@@example",
    b"xyzzy and abxyz",
]
# Words stay short: the reference's backtracking ``re`` takes seconds on \S+=\S+ over one 8 KiB word.
LONG_LINES = [
    b"x " * 4_500 + b"ERROR beyond the cut",
    b"y " * 4_050 + b"api_key=" + b"Z" * 200 + b" tail",  # a secret where the cut falls
    b"ERROR " + b"w " * 20_000,  # longer than a small read buffer: read as a huge line
]

PATTERNS: list[tuple[str, bool]] = [
    # literals
    ("ERROR", False),
    ("payments-api", False),
    # a required literal that the prefilter finds first, with what ends or drops it around it
    ("poo?l exhausted", False),
    ("lat+ency_ms=8", False),
    (r"(search|payments)-api WARN", False),
    ("caf\u00e9 r\u00e9", False),
    ("yzz?y and", False),
    ("pool exhausted", False),
    ("hunter2", False),  # a secret's value: found only with redaction off
    ("REDACTED", False),  # aimed at the mask: finds redacted lines
    (r"\[REDACTED\]", False),
    ("sk-proj", False),
    ("Bearer", False),
    # classes
    (r"\d{3}ms", False),
    (r"status=[45]\d\d", False),
    (r"[A-Z]{5}", False),
    (r"\w+@\w+", False),
    (r"\s{2,}", False),
    (r"[^\x00-\x7f]", False),
    (r"\S+=\S+", False),
    (r"\uFFFD", False),  # what bytes that are not UTF-8 are shown as
    # anchors
    (r"^ERROR", False),
    (r"exhausted$", False),
    (r"^$", False),
    (r"^\d{2}:\d{2}", False),
    (r"\bkey\b", False),
    (r"\Bxyz", False),
    (r"\AERROR", False),
    (r"ending\r$", False),
    # alternations
    ("ERROR|WARN", False),
    ("(payments|search)-api", False),
    ("timeout|refused|reset", False),
    # alternations every branch of which has a literal: the search finds any of them before RE2 runs
    ("pool exhausted|segment merge", False),
    ("served status|reset by peer|bad \ufffd", False),
    ("xyzzy|hunter2|REDACTED", False),  # a secret's value and the mask, one branch each
    ("deployed|ending\r$", False),
    ("^ERROR at|exhausted$", False),
    # case-insensitive
    ("error", True),
    ("caf\u00c9", True),
    ("\u00e9chec", True),
    ("k cold", True),  # the KELVIN SIGN folds to k
    ("authorization: bearer", True),
    # case-insensitive literals found by their case variants, alone and in alternations
    ("POOL EXHAUSTED", True),
    ("Latency_MS=8", True),
    ("stra\u00dfe", True),
    ("\u00c9CHEC|windows LINE", True),
    ("segment MERGE|xyzzy AND|reset BY", True),
    ("HUNTER2|bearer", True),
    # unicode
    ("caf\u00e9", False),
    ("\u65e5\u672c\u8a9e", False),
    ("\U0001f680", False),
    ("na.ve", False),
    # the shown text: cut lines and what redaction leaves
    (r"cut\]$", False),
    (r"(x ){100}|w w w", False),
    (r"password=\S+", False),
    (r"x*", False),
]


def _corpus(path: Path) -> Path:
    lines = [*SECRET_LINES, *PLAIN_LINES, *LONG_LINES]
    body = b"\n".join(lines[(i * 7) % len(lines)] for i in range(400)) + b"\n" + b"last line ERROR no newline"
    path.write_bytes(body)
    return path


def _reference(path: Path, pattern: str, ignore_case: bool, redacting: bool) -> list[tuple[int, str]]:
    shown = read_page(path, limit=1_000_000, redactor=redact if redacting else lambda text: text).lines
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    return [(line.number, line.text) for line in shown if regex.search(line.text)]


def _search_all(
    path: Path, pattern: str, ignore_case: bool, redacting: bool, limit: int, sizes: SearchSizes
) -> list[tuple[int, str]]:
    compiled = compile_pattern(pattern, ignore_case=ignore_case)
    found: list[tuple[int, str]] = []
    cursor: Cursor | None = logfile.START
    while cursor is not None:
        redaction = SECRETS if redacting else None
        step = search(path, compiled, cursor=cursor, limit=limit, redaction=redaction, sizes=sizes)
        found += [(line.number, line.text) for line in step.matches]
        assert step.next_cursor != cursor, "no progress"
        cursor = step.next_cursor
    return found


@pytest.fixture(params=["large reads", "small reads by the scan", "small reads by two workers"])
def read_size(request: pytest.FixtureRequest) -> SearchSizes:
    """Small reads, windows and index pieces put their boundaries, and huge lines, all through the corpus; small
    stretches are read by the scan itself or by the parallel reader's two workers."""
    if request.param == "large reads":
        return SearchSizes()
    workers = 2 if request.param.endswith("two workers") else 0
    # Runs indexed in several pieces each.
    return SearchSizes(read_bytes=16 * 1024, first_window=1024, min_window=512, index_piece=2 * ROW, workers=workers)


def test_the_corpus_has_at_least_30_patterns_of_each_kind() -> None:
    assert len(PATTERNS) >= 30
    assert any(ignore_case for _pattern, ignore_case in PATTERNS)


@pytest.mark.parametrize("redacting", [True, False], ids=["redacted", "raw"])
@pytest.mark.parametrize(("pattern", "ignore_case"), PATTERNS, ids=[p for p, _ in PATTERNS])
def test_search_returns_what_a_line_by_line_reference_does(
    tmp_path: Path, read_size: SearchSizes, pattern: str, ignore_case: bool, redacting: bool
) -> None:
    log = _corpus(tmp_path / "log.txt")
    expected = _reference(log, pattern, ignore_case, redacting)
    assert _search_all(log, pattern, ignore_case, redacting, limit=1000, sizes=read_size) == expected
    assert _search_all(log, pattern, ignore_case, redacting, limit=7, sizes=read_size) == expected, (
        "paging by cursor differs"
    )


def test_the_corpus_exercises_redaction_both_ways(tmp_path: Path) -> None:
    """The probe finds nothing once redacted; the mask finds the redacted lines; raw search finds the value."""
    log = _corpus(tmp_path / "log.txt")
    assert _reference(log, "hunter2", False, redacting=True) == []
    assert len(_reference(log, "hunter2", False, redacting=False)) > 10
    assert len(_reference(log, "REDACTED", False, redacting=True)) > len(_reference(log, "REDACTED", False, False))
    assert any(number > 300 for number, _text in _reference(log, "ERROR", False, redacting=True))


def test_a_search_for_the_mask_finds_every_masked_line_of_a_key_block(tmp_path: Path) -> None:
    """A body line of a key block whose BEGIN has a log prefix is masked only because its END follows; alone it
    looks like any base64. A search aimed at the mask finds it as a page shows it, with the lines around it."""
    body = [
        b"12:00:01 app INFO line 1",
        b'{"k": "-----BEGIN EC PRIVATE KEY-----',
        b"96heCZ1JqePQprl8oEEs9K7oKa1a72bhWTIL+Hp904qgFrhc9nSfX3M0jQXn0rHv",
        b"Fix/GHi/PwikdD6xBYA7kBPytWCRDvBWWj5/v/TLU+Md+qZUiGPB/h/cQBQv9PuK",
        b"U4w03vMpH7uho+88Xli0mg9sCKdm0lRD/B0tw/udRdZEdrJp1MimmgzwTTS7M/8Z",
        b"-----END PRIVATE KEY-----",
        b"12:00:02 app INFO line 2",
    ]
    log = tmp_path / "log.txt"
    log.write_bytes(b"\n".join(body) + b"\n")
    shown = _reference(log, r"\[REDACTED\]", False, redacting=True)
    assert [number for number, _text in shown] == [3, 4, 5]
    for sizes in (SearchSizes(), SearchSizes(read_bytes=16 * 1024, first_window=1024, min_window=512)):
        assert _search_all(log, r"\[REDACTED\]", False, True, limit=1000, sizes=sizes) == shown
        assert _search_all(log, "REDACTED", True, True, limit=1, sizes=sizes) == shown
