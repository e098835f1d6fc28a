"""Bounded reads of raw incident logs, which can be gigabytes: the tail window and pages from a line cursor.

Nothing here reads a whole file. The tail window reads backwards in blocks up to a byte cap; paging walks forward
from a cursor and stops at a line or byte bound. How a raw line is shown (cut, decoded, redacted with the line
before it as context) is decided here for every reader, the search (``core.log_search``) included. Memory stays
flat in the size of the log, and a pathological line with no newline is cut at ``MAX_LINE_BYTES``.

Redaction runs on what is shown, after the cut, so a cut never splits a token: it backs off to a space (or by
``_CUT_MARGIN`` bytes), because half a key no longer looks like one and would pass unmasked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from incident_desk.core import errors

MAX_LINE_BYTES = 8 * 1024
_BLOCK = 64 * 1024
_CUT_MARGIN = 256  # how far a cut backs off to a space; and how much of a line's cut-off end is kept as context
_SPACES = (b" ", b"\t", b"\r", b"\f", b"\v")
_CUT_MARK = b" [line cut]"
_LEADING_CUT_MARK = "[line cut] "
# Characters of a token that can be a credential: base64, base64url, hex, percent-encoding, escaped newlines.
_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_.~%\\-"  # noqa: S105

Redactor = Callable[[str], str]

# An open binary file (what the desk passes: a log opened once and judged as opened), or a path (tests, tools).
LogSource = BinaryIO | Path


class CursorError(errors.Invalid, ValueError):
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
        body = text.strip()
        line, at, offset = body[1:].partition("@")
        if not (body[:1] == "L" and at and _digits(line, 12) and _digits(offset, 15)):
            shown = errors.echoed(text, "cursor", quoted=True)
            raise CursorError(f"malformed cursor {shown}: expected the next_cursor of a previous page")
        return cls(line=int(line), offset=int(offset))


START = Cursor(line=1, offset=0)


def _digits(text: str, most: int) -> bool:
    return 0 < len(text) <= most and text.isascii() and text.isdigit()


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


@contextmanager
def opened(source: LogSource) -> Iterator[BinaryIO]:
    """``source`` as an open handle: a path is opened and closed here, a handle is borrowed and left open."""
    if isinstance(source, Path):
        with source.open("rb") as handle:
            yield handle
    else:
        yield source


def identity(text: str) -> str:
    """The redactor of a read without redaction."""
    return text


def decode(raw: bytes, redactor: Redactor) -> str:
    return redactor(raw.decode("utf-8", errors="replace"))


def decode_after(before: bytes | None, block: bytes, redactor: Redactor) -> str:
    """``block`` decoded and redacted with the line before it as context (a secret's name may end that line and
    its value start the block), which is then dropped: redaction never adds or removes a line."""
    if before is None or redactor is identity:
        return decode(block, redactor)
    shown = decode(before[-MAX_LINE_BYTES:] + b"\n" + block, redactor)
    return shown[shown.index("\n") + 1 :]


def line_before(handle: BinaryIO, offset: int) -> bytes | None:
    """The end (up to MAX_LINE_BYTES) of the line that ends just before ``offset``, a line start; None at 0."""
    if offset <= 0:
        return None
    start = max(0, offset - 1 - MAX_LINE_BYTES)
    handle.seek(start)
    data = handle.read(offset - 1 - start)
    return data[data.rfind(b"\n") + 1 :]


def may_dangle(line: bytes) -> bool:
    """Whether ``line`` can end with a secret's name and no value (see core.redaction.multiline): cheap bytes
    tests, so a search looks back only for the few lines it matches that follow such a line."""
    end = line.rstrip()
    return end[-1:] in (b":", b"=") or end[-6:].lower() in (b"bearer", b" basic", b" token")


def read_tail(source: LogSource, *, max_lines: int, max_bytes: int, redactor: Redactor = identity) -> TailWindow:
    """The last ``max_lines`` whole lines of the file, reading at most ``max_bytes`` of it."""
    with opened(source) as handle:
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
        # The whole line before the first whole line read: a secret's name may end it and its value follow.
        first_whole = position if starts_clean else position + data.find(b"\n") + 1
        before_window = line_before(handle, first_whole) if redactor is not identity and first_whole else None
    ends_with_newline = data.endswith(b"\n")
    raw_lines = (data[:-1] if ends_with_newline else data).split(b"\n") if data else []
    # The first line read is partial unless it starts the file or follows a newline: drop it, unless it is the
    # only one (the last line is longer than the window), then show its end rather than nothing.
    end_of_long_line = not starts_clean and len(raw_lines) == 1
    first_shown = 1 if not starts_clean and not end_of_long_line else 0
    first_shown = max(first_shown, len(raw_lines) - max_lines)
    # The line before the first shown: read whole above, unless it is itself a whole line read here.
    before = raw_lines[first_shown - 1] if first_shown > 1 or (first_shown == 1 and starts_clean) else before_window
    raw_lines = raw_lines[first_shown:]
    shown = sum(len(raw) + 1 for raw in raw_lines) - (0 if ends_with_newline or not raw_lines else 1)
    newline = "\n" if ends_with_newline and raw_lines else ""
    if end_of_long_line:
        text = _LEADING_CUT_MARK + _end_of_line(raw_lines[0], redactor) + newline
    else:
        text = decode_after(before, b"\n".join(cut(raw, len(raw)) for raw in raw_lines), redactor) + newline
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
    split = len(rest) - len(rest.lstrip(_TOKEN_CHARS))
    if split and _looks_like_key_material(rest[:split]):
        return rest[split:]
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
        yield number, Cursor(number + 1, offset), cut(body, consumed - 1 if ends_with_newline else consumed)
        number += 1


def check_cursor(handle: BinaryIO, cursor: Cursor, total: int) -> None:
    if cursor.offset > total or cursor.line < 1:
        raise CursorError(f"cursor {cursor.encode()} is past the end of the log ({total} bytes)")
    if cursor.offset > 0:
        handle.seek(cursor.offset - 1)
        if handle.read(1) != b"\n":
            raise CursorError(f"cursor {cursor.encode()} does not point at the start of a line")


def read_page(
    source: LogSource,
    *,
    cursor: Cursor = START,
    limit: int,
    max_bytes: int | None = None,
    redactor: Redactor = identity,
) -> Page:
    """``limit`` lines from ``cursor``, fewer once they hold ``max_bytes`` (always at least one line), with the
    cursor of the next page (None at end of file). The byte bound keeps an answer small enough to serialise
    without holding the event loop, however long the lines."""
    with opened(source) as handle:
        total = handle.seek(0, os.SEEK_END)
        check_cursor(handle, cursor, total)
        numbers: list[int] = []
        bodies: list[bytes] = []
        next_cursor: Cursor | None = cursor
        held = 0
        for number, after, body in _iter_lines(handle, cursor, None):
            numbers.append(number)
            bodies.append(body)
            next_cursor = after
            held += len(body)
            if len(bodies) >= limit or (max_bytes is not None and held >= max_bytes):
                break
        before = line_before(handle, cursor.offset) if redactor is not identity else None
    if next_cursor is not None and next_cursor.offset >= total:
        next_cursor = None
    # Redacted as one block, so a private key whose lines are all on the page is masked whole, short last line
    # included; the block has exactly as many lines as the page (lines hold no newline, redaction adds none).
    texts = decode_after(before, b"\n".join(bodies), redactor).split("\n") if bodies else []
    return Page(
        lines=[Line(n, t) for n, t in zip(numbers, texts, strict=True)], next_cursor=next_cursor, total_bytes=total
    )


def cut(raw: bytes, true_length: int) -> bytes:
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


# The last statement: app.py reads this module as usable only once its import has finished (another thread may
# still be running it, and a module being imported is already in sys.modules).
IMPORT_FINISHED = True
