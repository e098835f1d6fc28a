"""Bounded access to raw incident logs, which can be gigabytes.

Nothing here reads a whole file. The tail window reads backwards in blocks up to a byte cap; paging and search
walk forward from a cursor and stop at a line or byte budget. Memory stays flat in the size of the log, and a
pathological line with no newline is cut at ``MAX_LINE_BYTES``.
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
    if not starts_clean:
        raw_lines = raw_lines[1:]
    raw_lines = raw_lines[-max_lines:]
    shown = sum(len(raw) + 1 for raw in raw_lines) - (0 if ends_with_newline or not raw_lines else 1)
    cut = [raw[:MAX_LINE_BYTES] + (b" [line cut]" if len(raw) > MAX_LINE_BYTES else b"") for raw in raw_lines]
    body = b"\n".join(cut) + (b"\n" if ends_with_newline and cut else b"")
    return TailWindow(
        text=_decode(body, redactor),
        truncated=shown < total,
        shown_bytes=shown,
        total_bytes=total,
        shown_lines=len(raw_lines),
    )


def _iter_lines(handle: BinaryIO, start: Cursor, byte_budget: int | None) -> Iterator[tuple[Line, Cursor, bytes]]:
    """Yield (line, cursor after it, raw bytes) from ``start``, each line cut at MAX_LINE_BYTES."""
    handle.seek(start.offset)
    number, offset, scanned = start.line, start.offset, 0
    while byte_budget is None or scanned < byte_budget:
        raw = handle.readline(MAX_LINE_BYTES)
        if not raw:
            return
        consumed = len(raw)
        if not raw.endswith(b"\n"):
            # Either the last line without a newline, or an over-long one: skip the rest of it.
            while True:
                rest = handle.readline(_BLOCK)
                if not rest:
                    break
                consumed += len(rest)
                if rest.endswith(b"\n"):
                    break
            if consumed > len(raw):
                raw = raw + b" [line cut]"
        offset += consumed
        scanned += consumed
        body = raw[:-1] if raw.endswith(b"\n") else raw
        yield Line(number, ""), Cursor(number + 1, offset), body
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
        lines: list[Line] = []
        next_cursor: Cursor | None = cursor
        for line, after, body in _iter_lines(handle, cursor, None):
            lines.append(Line(line.number, _decode(body, redactor)))
            next_cursor = after
            if len(lines) >= limit:
                break
    if next_cursor is not None and next_cursor.offset >= total:
        next_cursor = None
    return Page(lines=lines, next_cursor=next_cursor, total_bytes=total)


def _line_blocks(handle: BinaryIO, start: Cursor, byte_budget: int) -> Iterator[tuple[Cursor, list[bytes], Cursor]]:
    """Yield runs of whole lines read in large blocks: (cursor of the first, raw lines, cursor after the last).

    Lines over MAX_LINE_BYTES are cut (the rest is skipped, never held). Reading in blocks rather than line by
    line is what makes a search over hundreds of megabytes take seconds instead of minutes.
    """
    handle.seek(start.offset)
    number, offset, scanned = start.line, start.offset, 0
    carry = b""  # the unfinished line at the end of the previous block (at most MAX_LINE_BYTES of it)
    carry_length = 0  # its true length, which may exceed what is kept
    while scanned < byte_budget:
        chunk = handle.read(_SCAN_BLOCK)
        if not chunk:
            if carry_length:
                yield Cursor(number, offset), [_cut(carry, carry_length)], Cursor(number + 1, offset + carry_length)
            return
        scanned += len(chunk)
        last_newline = chunk.rfind(b"\n")
        if last_newline == -1:
            carry_length += len(chunk)
            carry = (carry + chunk)[: MAX_LINE_BYTES + 1]
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
        rest = chunk[last_newline + 1 :]
        carry, carry_length = rest[: MAX_LINE_BYTES + 1], len(rest)


def _cut(raw: bytes, true_length: int) -> bytes:
    if true_length > MAX_LINE_BYTES:
        return raw[:MAX_LINE_BYTES] + b" [line cut]"
    return raw


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
    is tested first: when nothing in it matches, none of its lines is looked at one by one.
    """
    with path.open("rb") as handle:
        total = handle.seek(0, os.SEEK_END)
        _check_cursor(handle, cursor, total)
        matches: list[Line] = []
        next_cursor: Cursor | None = cursor
        for first, raw_lines, after in _line_blocks(handle, cursor, scan_budget_bytes):
            next_cursor = after
            text = redactor(b"\n".join(raw_lines).decode("utf-8", errors="replace"))
            if not pattern.search(text):
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
    for _, after, _ in _iter_lines(handle, first, None):
        if after.line > first.line + index:
            break
    return after
