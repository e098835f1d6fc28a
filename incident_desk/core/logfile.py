"""Bounded access to raw incident logs, which can be gigabytes.

Nothing here reads a whole file. The tail window reads backwards in blocks up to a byte cap; paging and search
walk forward from a cursor and stop at a line or byte budget. Memory stays flat in the size of the log, and a
pathological line with no newline is cut at ``MAX_LINE_BYTES``.

Redaction runs on what is shown, after the cut, so a cut never splits a token: it backs off to a space (or by
``_CUT_MARGIN`` bytes), because half a key no longer looks like one and would pass unmasked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAX_LINE_BYTES = 8 * 1024
SEARCH_SCAN_BUDGET_BYTES = 64 * 1024 * 1024
_BLOCK = 64 * 1024
_SCAN_BLOCK = 1024 * 1024
_CUT_MARGIN = 256  # how far a cut backs off to a space; and how much of a line's cut-off end is kept as context
_SPACES = (b" ", b"\t", b"\r", b"\f", b"\v")
_CUT_MARK = b" [line cut]"
_LEADING_CUT_MARK = "[line cut] "
# Characters of a token that can be a credential: base64, base64url, hex, percent-encoding, escaped newlines.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/=_.~%\\-]+")

# Constructs that can tell a line's edge from the newline next to it in a block of lines: \A, \Z (\z),
# negative lookarounds, atomic groups, possessive repeats, and inline flags that turn MULTILINE back off.
# A pattern using one (or text that merely looks like one) is tested line by line, never a block at once.
_LINE_EDGE_SENSITIVE = re.compile(r"\\[AZz]|\(\?<?!|\(\?>|[*+?}]\+|\(\?[aiLmsux]*-")

Redactor = Callable[[str], str]


class CursorError(ValueError):
    """A paging cursor that this log did not hand out (or that no longer fits it)."""


@dataclass(frozen=True)
class Cursor:
    """A position at the start of a line: its 1-based number and its byte offset."""

    line: int
    offset: int

    def encode(self) -> str:
        return f"L{self.line}@{self.offset}"

    @classmethod
    def decode(cls, text: str) -> Cursor:
        match = re.fullmatch(r"L(\d{1,12})@(\d{1,15})", text.strip())
        if not match:
            raise CursorError(f"malformed cursor {text!r}: expected the next_cursor of a previous page")
        return cls(line=int(match[1]), offset=int(match[2]))


START = Cursor(line=1, offset=0)


@dataclass(frozen=True)
class Line:
    number: int
    text: str


@dataclass(frozen=True)
class TailWindow:
    text: str
    truncated: bool
    shown_bytes: int
    total_bytes: int
    shown_lines: int


@dataclass(frozen=True)
class Page:
    lines: list[Line]
    next_cursor: Cursor | None
    total_bytes: int


@dataclass(frozen=True)
class SearchResult:
    matches: list[Line]
    next_cursor: Cursor | None
    scanned_bytes: int
    total_bytes: int


def _identity(text: str) -> str:
    return text


def _decode(raw: bytes, redactor: Redactor) -> str:
    return redactor(raw.decode("utf-8", errors="replace"))


def read_tail(path: Path, *, max_lines: int, max_bytes: int, redactor: Redactor = _identity) -> TailWindow:
    """The last ``max_lines`` whole lines of the file, reading at most ``max_bytes`` of it."""
    with path.open("rb") as handle:
        total = handle.seek(0, os.SEEK_END)
        budget = min(total, max_bytes)
        chunks: list[bytes] = []
        position, newlines = total, 0
        # One newline more than lines wanted, because a trailing newline ends the last line.
        while total - position < budget and newlines <= max_lines:
            size = min(_BLOCK, budget - (total - position))
            position -= size
            handle.seek(position)
            chunk = handle.read(size)
            chunks.append(chunk)
            newlines += chunk.count(b"\n")
        starts_clean = position == 0
        if not starts_clean:
            handle.seek(position - 1)
            starts_clean = handle.read(1) == b"\n"
    data = b"".join(reversed(chunks))
    ends_with_newline = data.endswith(b"\n")
    raw_lines = (data[:-1] if ends_with_newline else data).split(b"\n") if data else []
    # The first line read is partial unless it starts the file or follows a newline: drop it, unless it is the
    # only one (the last line is longer than the window), then show its end rather than nothing.
    end_of_long_line = not starts_clean and len(raw_lines) == 1
    if not starts_clean and not end_of_long_line:
        raw_lines = raw_lines[1:]
    raw_lines = raw_lines[-max_lines:]
    shown = sum(len(raw) + 1 for raw in raw_lines) - (0 if ends_with_newline or not raw_lines else 1)
    newline = "\n" if ends_with_newline and raw_lines else ""
    if end_of_long_line:
        text = _LEADING_CUT_MARK + _end_of_line(raw_lines[0], redactor) + newline
    else:
        text = _decode(b"\n".join(_cut(raw, len(raw)) for raw in raw_lines), redactor) + newline
    return TailWindow(
        text=text,
        truncated=shown < total,
        shown_bytes=shown,
        total_bytes=total,
        shown_lines=len(raw_lines),
    )


def _end_of_line(partial: bytes, redactor: Redactor) -> str:
    """The end of a line whose start was not read, redacted, as it follows a leading "[line cut] ".

    The whole part read is redacted before it is cut, so a key name or "Bearer" just before the shown end still
    masks the secret after it; its first ``_CUT_MARGIN`` characters serve only as that context. The token the
    cut splits is dropped, so neither the start nor the end of a split secret shows.
    """
    text = redactor(partial.decode("utf-8", errors="replace"))
    text = text[max(_CUT_MARGIN, len(text) - MAX_LINE_BYTES) :]
    head = text[:_CUT_MARGIN]
    space = next((index for index, char in enumerate(head) if char.isspace()), None)
    if space is not None:
        return text[space + 1 :]
    # No space near the cut: the token it splits is longer than the margin. Its end is dropped too when it has the
    # look of key material (a long JWT or base64 key whose start, and name, were never read).
    rest = text[_CUT_MARGIN:]
    split = _TOKEN_RUN.match(rest)
    if split is not None and _looks_like_key_material(split.group()):
        return rest[split.end() :]
    return rest


def _looks_like_key_material(run: str) -> bool:
    return len(run) >= 16 and run.lower() != run and run.upper() != run and any(char.isdigit() for char in run)


def _iter_lines(handle: BinaryIO, start: Cursor, byte_budget: int | None) -> Iterator[tuple[int, Cursor, bytes]]:
    """Yield (line number, cursor after it, raw bytes) from ``start``, each line cut at MAX_LINE_BYTES."""
    handle.seek(start.offset)
    number, offset, scanned = start.line, start.offset, 0
    while byte_budget is None or scanned < byte_budget:
        raw = handle.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        consumed = len(raw)
        ends_with_newline = raw.endswith(b"\n")
        # Either the last line without a newline, or an over-long one: skip the rest of it.
        while not ends_with_newline:
            rest = handle.readline(_BLOCK)
            if not rest:
                break
            consumed += len(rest)
            ends_with_newline = rest.endswith(b"\n")
        offset += consumed
        scanned += consumed
        body = raw[:-1] if raw.endswith(b"\n") else raw
        yield number, Cursor(number + 1, offset), _cut(body, consumed - 1 if ends_with_newline else consumed)
        number += 1


def _check_cursor(handle: BinaryIO, cursor: Cursor, total: int) -> None:
    if cursor.offset > total or cursor.line < 1:
        raise CursorError(f"cursor {cursor.encode()} is past the end of the log ({total} bytes)")
    if cursor.offset > 0:
        handle.seek(cursor.offset - 1)
        if handle.read(1) != b"\n":
            raise CursorError(f"cursor {cursor.encode()} does not point at the start of a line")


def read_page(path: Path, *, cursor: Cursor = START, limit: int, redactor: Redactor = _identity) -> Page:
    """``limit`` lines from ``cursor``, with the cursor of the next page (None at end of file)."""
    with path.open("rb") as handle:
        total = handle.seek(0, os.SEEK_END)
        _check_cursor(handle, cursor, total)
        numbers: list[int] = []
        bodies: list[bytes] = []
        next_cursor: Cursor | None = cursor
        for number, after, body in _iter_lines(handle, cursor, None):
            numbers.append(number)
            bodies.append(body)
            next_cursor = after
            if len(bodies) >= limit:
                break
    if next_cursor is not None and next_cursor.offset >= total:
        next_cursor = None
    # Redacted as one block, so a private key whose lines are all on the page is masked whole, short last line
    # included; the block has exactly as many lines as the page (lines hold no newline, redaction adds none).
    texts = _decode(b"\n".join(bodies), redactor).split("\n") if bodies else []
    return Page(
        lines=[Line(n, t) for n, t in zip(numbers, texts, strict=True)], next_cursor=next_cursor, total_bytes=total
    )


def _line_blocks(handle: BinaryIO, start: Cursor, byte_budget: int) -> Iterator[tuple[Cursor, list[bytes], Cursor]]:
    """Yield runs of whole lines read in large blocks: (cursor of the first, raw lines, cursor after the last).

    Lines over MAX_LINE_BYTES are cut (the rest is skipped, never held). Reading in blocks rather than line by
    line is what makes a search over hundreds of megabytes take seconds instead of minutes. The budget is checked
    between blocks, and reading goes on past it until one line is out: a line longer than the budget must not
    hand the caller back its own cursor, or a client paging on would loop forever.
    """
    handle.seek(start.offset)
    number, offset, scanned = start.line, start.offset, 0
    carry = b""  # the unfinished line at the end of the previous block (at most MAX_LINE_BYTES + 1 of it)
    carry_length = 0  # its true length, which may exceed what is kept
    progressed = False
    while scanned < byte_budget or not progressed:
        chunk = handle.read(_SCAN_BLOCK)
        if not chunk:
            if carry_length:
                yield Cursor(number, offset), [_cut(carry, carry_length)], Cursor(number + 1, offset + carry_length)
            return
        scanned += len(chunk)
        last_newline = chunk.rfind(b"\n")
        if last_newline == -1:
            carry_length += len(chunk)
            carry += chunk[: max(0, MAX_LINE_BYTES + 1 - len(carry))]
            continue
        body = chunk[: last_newline + 1]
        raw_lines = body.split(b"\n")[:-1]
        raw_lines[0] = carry + raw_lines[0]
        lines = [_cut(raw_lines[0], carry_length + chunk.find(b"\n"))] + [_cut(raw, len(raw)) for raw in raw_lines[1:]]
        consumed = carry_length + len(body)
        first = Cursor(number, offset)
        number += len(lines)
        offset += consumed
        yield first, lines, Cursor(number, offset)
        progressed = True
        rest = chunk[last_newline + 1 :]
        carry, carry_length = rest[: MAX_LINE_BYTES + 1], len(rest)


def _cut(raw: bytes, true_length: int) -> bytes:
    """``raw`` as it is, or if the line is longer than MAX_LINE_BYTES its start, marked as cut.

    The cut backs off to the last space within ``_CUT_MARGIN`` bytes of it, or by that much when there is none,
    so that the token it splits (maybe a secret, which redaction would no longer recognise) is not shown.
    """
    if true_length <= MAX_LINE_BYTES:
        return raw
    head = raw[:MAX_LINE_BYTES]
    floor = max(0, len(head) - _CUT_MARGIN)
    space = max(head.rfind(char, floor) for char in _SPACES)
    return (head[:space] if space >= 0 else head[:floor]) + _CUT_MARK


def _block_prefilter(pattern: re.Pattern[str]) -> re.Pattern[str] | None:
    """``pattern`` made fit to test a block of lines at once, or None when only line by line is exact.

    A block may be skipped only if no line in it matches, so the block test must never miss what a line test
    finds. With MULTILINE, ``^`` and ``$`` match at every line's edges as they do on a lone line; the constructs
    in ``_LINE_EDGE_SENSITIVE`` can still tell a line's edge from a newline, so they get no prefilter.
    """
    if _LINE_EDGE_SENSITIVE.search(pattern.pattern):
        return None
    return re.compile(pattern.pattern, pattern.flags | re.MULTILINE)


def search(
    path: Path,
    pattern: re.Pattern[str],
    *,
    cursor: Cursor = START,
    limit: int,
    scan_budget_bytes: int = SEARCH_SCAN_BUDGET_BYTES,
    redactor: Redactor = _identity,
) -> SearchResult:
    """Lines matching ``pattern`` from ``cursor`` on, stopping at ``limit`` matches or the scan budget.

    Matching runs on the redacted text, so a search cannot be used to probe for a secret's value. A whole block
    is tested first (see ``_block_prefilter``): when nothing in it matches, none of its lines is looked at one by
    one. Each call moves on by at least one line, however long, so paging with next_cursor always ends.
    """
    prefilter = _block_prefilter(pattern)
    with path.open("rb") as handle:
        total = handle.seek(0, os.SEEK_END)
        _check_cursor(handle, cursor, total)
        matches: list[Line] = []
        next_cursor: Cursor | None = cursor
        for first, raw_lines, after in _line_blocks(handle, cursor, scan_budget_bytes):
            next_cursor = after
            text = redactor(b"\n".join(raw_lines).decode("utf-8", errors="replace"))
            if prefilter is not None and not prefilter.search(text):
                continue
            for index, line_text in enumerate(text.split("\n")):
                if pattern.search(line_text):
                    matches.append(Line(first.line + index, line_text))
                    if len(matches) >= limit:
                        next_cursor = _cursor_after_line(handle, first, index)
                        break
            if len(matches) >= limit:
                break
    scanned = (next_cursor.offset if next_cursor else total) - cursor.offset
    if next_cursor is not None and next_cursor.offset >= total:
        next_cursor = None
    return SearchResult(matches=matches, next_cursor=next_cursor, scanned_bytes=scanned, total_bytes=total)


def _cursor_after_line(handle: BinaryIO, first: Cursor, index: int) -> Cursor:
    """The cursor just past line ``first.line + index``, found by walking from ``first`` (within one block)."""
    after = first
    for _number, after, _body in _iter_lines(handle, first, None):
        if after.line > first.line + index:
            break
    return after
