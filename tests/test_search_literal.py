"""The required-literal prefilter: what it extracts from a pattern, and that RE2 then runs only where it occurs.

A search finds the literal every match must contain with a SIMD substring search and starts RE2 on the line
where it occurs, because RE2 finds a literal whose first byte is common (the ``n`` of ``needle-xyz``) at a
third of grep's speed. Extracting a literal that some match does not contain would lose matches, so the
extraction is checked here on the constructs that end or forbid one, and the search against a reference.
"""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path
from typing import Any

import pytest

from incident_desk.core.redaction.face import SECRETS, redact
from incident_desk.core.search import paging as logfile
from incident_desk.core.search.engine import SearchSizes, search
from incident_desk.core.search.paging import Cursor, read_page
from incident_desk.core.search.pattern import compile_pattern


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        ("needle-xyz", b"needle-xyz"),
        ("OutOfMemoryError in worker-7", b"OutOfMemoryError in worker-7"),
        (r"INFO.*needle", b"needle"),  # the longest run
        (r"status=[45]\d\d", b"status="),
        (r"\[REDACTED\]", b"[REDACTED]"),  # escaped punctuation is plain text
        (r"\Qa.b-c\E", b"a.b-c"),
        ("caf\u00e9 au lait", "caf\u00e9 au lait".encode()),  # as UTF-8, the bytes RE2 scans
        ("poo?l exhausted", b"l exhausted"),  # an optional character ends the run and is not in it
        ("la+tency_ms", b"tency_ms"),  # a repeated one ends the run: "la" is too short to be worth it
        ("abc{2}de", b"abc"),  # a character repeated at least once stays in its run, which it ends
        ("ab{0,3}cde", b"cde"),
        ("x{,2}yzw", b"yzw"),
        ("(abc|def)ghi", b"ghi"),  # nothing inside a group
        ("seg(ment)? merge", b" merge"),
        (r"^ERROR boom$", b"ERROR boom"),
        (r"\bid\b=", None),  # runs shorter than three bytes
    ],
)
def test_the_required_literal_is_text_every_match_contains(pattern: str, literal: bytes | None) -> None:
    assert compile_pattern(pattern).literal == literal


@pytest.mark.parametrize(
    ("pattern", "ignore_case"),
    [
        ("needle|other", False),  # a top-level alternation: a match may contain either side
        ("needle", True),  # case-insensitive: the bytes differ by case
        ("(?i)needle", False),
        ("abc(?i:x)def", False),
        (r"\d{3}ms", False),
        (".*", False),
    ],
)
def test_no_literal_where_a_match_need_not_contain_fixed_bytes(pattern: str, ignore_case: bool) -> None:
    assert compile_pattern(pattern, ignore_case=ignore_case).literal is None


class _CountingFinder:
    """RE2's block pattern, counting the bytes it is asked to scan."""

    def __init__(self, finder: Any) -> None:
        self.finder, self.scanned = finder, 0

    def search(self, view: memoryview) -> Any:
        self.scanned += len(view)
        return self.finder.search(view)


def test_re2_scans_only_from_the_line_where_the_literal_occurs(tmp_path: Path) -> None:
    filler = b"".join(
        b"2026-11-29T10:%02d:00Z gateway INFO connection pool usage %d%%\n" % (i % 60, i) for i in range(50_000)
    )
    log = tmp_path / "log.txt"
    log.write_bytes(filler + b"2026-11-29T11:00:00Z ledger ERROR needle-xyz here\n" + filler[:1000])
    compiled = compile_pattern("needle-xyz")
    counting = _CountingFinder(compiled.block)
    result = search(log, dataclasses.replace(compiled, block=counting), limit=50, redaction=SECRETS)
    assert [(line.number, line.text) for line in result.matches] == [
        (50_001, "2026-11-29T11:00:00Z ledger ERROR needle-xyz here")
    ]
    assert 0 < counting.scanned < 2_000, f"RE2 scanned {counting.scanned} of {log.stat().st_size} bytes"


def _reference(path: Path, pattern: str, redacting: bool) -> list[tuple[int, str]]:
    shown = read_page(path, limit=1_000_000, redactor=redact if redacting else lambda text: text).lines
    regex = re.compile(pattern)
    return [(line.number, line.text) for line in shown if regex.search(line.text)]


@pytest.mark.parametrize("redacting", [True, False], ids=["redacted", "raw"])
@pytest.mark.parametrize(
    "pattern", [r"needle-\d+", r"needle-\d+ done$", r"^needle", "needle-4", r"ERROR.*needle-\d", "pool exhausted"]
)
def test_lines_with_the_literal_that_do_not_match_are_skipped_and_numbered_right(
    tmp_path: Path, pattern: str, redacting: bool
) -> None:
    """The literal in most lines, the pattern in few, across many small reads and windows: same as the reference."""
    sizes = SearchSizes(read_bytes=9 * 1024, first_window=1024, min_window=512)
    lines = []
    for i in range(3_000):
        if i % 97 == 0:
            lines.append(b"%d ERROR needle-%d done" % (i, i))
        elif i % 5 == 0:
            lines.append(b"%d INFO needle-x pool exhausted token=abc%d" % (i, i))
        elif i % 31 == 0:
            lines.append(b"needle-%d Authorization: Bearer eyZabcdefgh%08d" % (i, i))
        else:
            lines.append(b"%d INFO needle- nothing" % i)
    log = tmp_path / "log.txt"
    log.write_bytes(b"\n".join(lines) + b"\n")
    compiled = compile_pattern(pattern)
    assert compiled.literal is not None
    expected = _reference(log, pattern, redacting)
    assert expected
    for limit in (1_000_000, 7):
        found: list[tuple[int, str]] = []
        cursor: Cursor | None = logfile.START
        while cursor is not None:
            step = search(
                log, compiled, cursor=cursor, limit=limit, redaction=SECRETS if redacting else None, sizes=sizes
            )
            found += [(line.number, line.text) for line in step.matches]
            cursor = step.next_cursor
        assert found == expected


@pytest.mark.parametrize(
    ("pattern", "ignore_case", "prefilter"),
    [
        ("needle-xyz|segfault in ledger", False, (b"needle-xyz", b"segfault in ledger")),
        ("(a|b)xyz|q+uvw", False, (b"xyz", b"uvw")),
        ("needle-xyz", True, (b"-xy", b"-xY", b"-Xy", b"-XY")),  # the window with the fewest case variants
        ("ab1|cd2", True, (b"ab1", b"aB1", b"Ab1", b"AB1", b"cd2", b"cD2", b"Cd2", b"CD2")),
    ],
)
def test_the_prefilter_holds_bytes_one_of_which_every_match_contains(
    pattern: str, ignore_case: bool, prefilter: tuple[bytes, ...]
) -> None:
    assert set(compile_pattern(pattern, ignore_case=ignore_case).prefilter or ()) == set(prefilter)


@pytest.mark.parametrize(
    ("pattern", "ignore_case"),
    [
        ("needle|ab", False),  # a branch without a literal of three bytes
        ("needle|", False),  # an empty branch matches everywhere
        ("needle|(?i)other", False),
        ("kiss", True),  # K and S fold to letters outside ASCII (KELVIN SIGN, LONG S): no window without them
        ("\u00e9\u00e9\u00e9", True),
    ],
)
def test_no_prefilter_where_a_match_may_lack_every_candidate(pattern: str, ignore_case: bool) -> None:
    assert compile_pattern(pattern, ignore_case=ignore_case).prefilter is None


@pytest.mark.parametrize(("pattern", "ignore_case"), [("needle-xyz|segfault in ledger", False), ("NEEDLE-xyz", True)])
def test_re2_scans_only_the_lines_with_an_alternative_or_a_case_variant(
    tmp_path: Path, pattern: str, ignore_case: bool
) -> None:
    filler = b"".join(
        b"2026-11-29T10:%02d:00Z gateway INFO connection pool usage %d%% segfault\n" % (i % 60, i)
        for i in range(50_000)
    )
    log = tmp_path / "log.txt"
    log.write_bytes(filler + b"2026-11-29T11:00:00Z ledger ERROR Needle-XYZ here\n" + filler[:1000])
    compiled = compile_pattern(pattern, ignore_case=ignore_case)
    counting = _CountingFinder(compiled.block)
    result = search(log, dataclasses.replace(compiled, block=counting), limit=50, redaction=SECRETS)
    expected = [(50_001, "2026-11-29T11:00:00Z ledger ERROR Needle-XYZ here")] if ignore_case else []
    assert [(line.number, line.text) for line in result.matches] == expected
    assert counting.scanned < 2_000, f"RE2 scanned {counting.scanned} of {log.stat().st_size} bytes"


def test_one_case_insensitive_pass_finds_every_case_variant_next_to_any_bytes(tmp_path: Path) -> None:
    """The case variants of a window are found by one Unicode-folding search: it must miss none of them, whatever
    precedes them (invalid UTF-8, a cut multi-byte character, a letter that folds to two) or wherever they fall."""
    before = [b"", b"\xe2", b"\xe2\x82", b"\xf0\x9f", b"\xff", b"\x80", b"\xc3\x9f", b"\xef\xac\x80", b"\xc4\xb0", b"-"]
    variants = [b"needle-xyz", b"NEEDLE-XYZ", b"nEeDlE-xYz", b"Needle-Xyz"]
    lines = [b"%d INFO nothing to see %s" % (i, before[i % len(before)]) for i in range(2_000)]
    for i, (prefix, variant) in enumerate((p, v) for p in before for v in variants):
        lines[40 * i + 7] = b"%d WARN " % (40 * i + 7) + prefix + variant + b" after"
    log = tmp_path / "log.txt"
    log.write_bytes(b"\n".join(lines) + b"\n")
    expected = _reference_ignoring_case(log, "needle-xyz")
    assert len(expected) == len(before) * len(variants)
    compiled = compile_pattern("needle-xyz", ignore_case=True)
    assert compiled.prefilter is not None
    for sizes in (SearchSizes(), SearchSizes(read_bytes=9 * 1024, first_window=1024, min_window=512)):
        result = search(log, compiled, limit=1_000, redaction=SECRETS, sizes=sizes)
        assert [(line.number, line.text) for line in result.matches] == expected


def _reference_ignoring_case(path: Path, pattern: str) -> list[tuple[int, str]]:
    shown = read_page(path, limit=1_000_000, redactor=redact).lines
    regex = re.compile(pattern, re.IGNORECASE)
    return [(line.number, line.text) for line in shown if regex.search(line.text)]


@pytest.mark.parametrize("pattern", ["needle", "needle|segfault", "(?i)NEEDLE"])
def test_a_window_of_a_later_run_is_searched_afresh_for_its_literals(tmp_path: Path, pattern: str) -> None:
    """A whole run is one window here, so runs of the same length end their windows at the same place. The
    literals' places were once remembered by the window's end alone: a later run's window was answered from an
    earlier run's bytes, and the search lost the match at line 1560 and every match after it, quietly."""
    line = b"%06d INFO all is well here\n"
    per_run = 512
    lines = [line % number for number in range(per_run * 6)]
    for at in (417, 1559, 2227):
        lines[at] = b"needle" + lines[at][6:]
    data = b"".join(lines)
    log = tmp_path / "log.txt"
    log.write_bytes(data)
    run_bytes = per_run * len(line)
    sizes = SearchSizes(read_bytes=run_bytes, first_window=run_bytes, min_window=run_bytes, workers=0, split_bytes=0)
    expected = [418, 1560, 2228]
    for limit in (1, 2, 10):
        assert _numbers_paged(log, pattern, limit, sizes) == expected, f"limit {limit}"


def test_literals_anywhere_in_runs_of_any_length_are_all_found_at_every_limit(tmp_path: Path) -> None:
    """Sixty seeded layouts of three to six literals in a log of a few runs, windows fixed at a run (no timing
    in it), paged at three limits, against a reference."""
    rng = random.Random(20261204)
    line = b"%06d INFO all is well here\n"
    run_bytes = 512 * len(line)
    sizes = SearchSizes(read_bytes=run_bytes, first_window=run_bytes, min_window=run_bytes, workers=0, split_bytes=0)
    log = tmp_path / "log.txt"
    for _ in range(60):
        lines = [line % number for number in range(rng.randrange(1_000, 3_500))]
        marks = sorted(rng.sample(range(len(lines)), rng.randrange(3, 7)))
        for at in marks:
            lines[at] = b"needle" + lines[at][6:]
        log.write_bytes(b"".join(lines))
        for pattern in ("needle", "needle|segfault"):
            for limit in (1, 3, 1_000):
                assert _numbers_paged(log, pattern, limit, sizes) == [at + 1 for at in marks], (pattern, limit, marks)


def _numbers_paged(log: Path, pattern: str, limit: int, sizes: SearchSizes) -> list[int]:
    """The numbers of every match, ``limit`` at a time, paging with ``next_cursor`` to the end."""
    found: list[int] = []
    cursor: Cursor | None = Cursor(line=1, offset=0)
    while cursor is not None:
        step = search(log, compile_pattern(pattern), cursor=cursor, limit=limit, sizes=sizes)
        found += [match.number for match in step.matches]
        cursor = step.next_cursor
    return found
