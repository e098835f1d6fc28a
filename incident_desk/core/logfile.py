"""Bounded access to raw incident logs, which can be gigabytes.

Nothing here reads a whole file. The tail window reads backwards in blocks up to a byte cap; paging and search
walk forward from a cursor and stop at a line or byte budget. Memory stays flat in the size of the log, and a
pathological line with no newline is cut at ``MAX_LINE_BYTES``.

Redaction runs on what is shown, after the cut, so a cut never splits a token: it backs off to a space (or by
``_CUT_MARGIN`` bytes), because half a key no longer looks like one and would pass unmasked.
"""

from __future__ import annotations

import codecs
import io
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, cast

from incident_desk.core.literals import LiteralSet

if TYPE_CHECKING:
    from incident_desk.core.pattern import SearchPattern
    from incident_desk.core.redact import Redaction

MAX_LINE_BYTES = 8 * 1024
SEARCH_SCAN_BUDGET_BYTES = 16 * 1024 * 1024 * 1024  # the time budget is what usually ends a long search
_BLOCK = 64 * 1024
_READ_BYTES = 2 * 1024 * 1024  # a search reads into two buffers this size: RSS stays flat whatever the log's size
_ROW = 4096  # long-line detection: a line over MAX_LINE_BYTES covers a whole aligned row of this size
_INDEX_PIECE = 128 * _ROW  # how much of a run the newline index compares at a time (512 KiB)
_NEWLINE = 0x0A
_WINDOW_FIRST = 256 * 1024
_WINDOW_MIN = 16 * 1024
_WINDOW_SECONDS = 0.02  # a window's scan time: how often budgets and cancellation are looked at
_PAUSE_SECONDS = 0.002  # after a window of candidates, the interpreter lock is left to other threads this long
_CUT_MARGIN = 256  # how far a cut backs off to a space; and how much of a line's cut-off end is kept as context
_SPACES = (b" ", b"\t", b"\r", b"\f", b"\v")
_CUT_MARK = b" [line cut]"
_LEADING_CUT_MARK = "[line cut] "
# Characters of a token that can be a credential: base64, base64url, hex, percent-encoding, escaped newlines.
_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_.~%\\-"  # noqa: S105

Redactor = Callable[[str], str]
StopReason = Literal["end of log", "match limit", "time budget", "byte budget", "cancelled"]

# An open binary file (what the desk passes: a log opened once and judged as opened), or a path (tests, tools).
LogSource = BinaryIO | Path
_RawReader = io.BufferedIOBase | io.RawIOBase


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
        body = text.strip()
        line, at, offset = body[1:].partition("@")
        if not (body[:1] == "L" and at and _digits(line, 12) and _digits(offset, 15)):
            raise CursorError(f"malformed cursor {text!r}: expected the next_cursor of a previous page")
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


@dataclass(frozen=True)
class SearchResult:
    matches: list[Line]
    next_cursor: Cursor | None
    scanned_bytes: int
    total_bytes: int
    stopped: StopReason


@contextmanager
def _opened(source: LogSource) -> Iterator[BinaryIO]:
    """``source`` as an open handle: a path is opened and closed here, a handle is borrowed and left open."""
    if isinstance(source, Path):
        with source.open("rb") as handle:
            yield handle
    else:
        yield source


def _identity(text: str) -> str:
    return text


def _decode(raw: bytes, redactor: Redactor) -> str:
    return redactor(raw.decode("utf-8", errors="replace"))


def _decode_after(before: bytes | None, block: bytes, redactor: Redactor) -> str:
    """``block`` decoded and redacted with the line before it as context (a secret's name may end that line and
    its value start the block), which is then dropped: redaction never adds or removes a line."""
    if before is None or redactor is _identity:
        return _decode(block, redactor)
    shown = _decode(before[-MAX_LINE_BYTES:] + b"\n" + block, redactor)
    return shown[shown.index("\n") + 1 :]


def _line_before(handle: BinaryIO, offset: int) -> bytes | None:
    """The end (up to MAX_LINE_BYTES) of the line that ends just before ``offset``, a line start; None at 0."""
    if offset <= 0:
        return None
    start = max(0, offset - 1 - MAX_LINE_BYTES)
    handle.seek(start)
    data = handle.read(offset - 1 - start)
    return data[data.rfind(b"\n") + 1 :]


def _may_dangle(line: bytes) -> bool:
    """Whether ``line`` can end with a secret's name and no value (see core.redaction.multiline): cheap bytes
    tests, so a search looks back only for the few lines it matches that follow such a line."""
    end = line.rstrip()
    return end[-1:] in (b":", b"=") or end[-6:].lower() in (b"bearer", b" basic", b" token")


def read_tail(source: LogSource, *, max_lines: int, max_bytes: int, redactor: Redactor = _identity) -> TailWindow:
    """The last ``max_lines`` whole lines of the file, reading at most ``max_bytes`` of it."""
    with _opened(source) as handle:
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
        before_window = _line_before(handle, first_whole) if redactor is not _identity and first_whole else None
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
        text = _decode_after(before, b"\n".join(_cut(raw, len(raw)) for raw in raw_lines), redactor) + newline
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
        yield number, Cursor(number + 1, offset), _cut(body, consumed - 1 if ends_with_newline else consumed)
        number += 1


def _check_cursor(handle: BinaryIO, cursor: Cursor, total: int) -> None:
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
    redactor: Redactor = _identity,
) -> Page:
    """``limit`` lines from ``cursor``, fewer once they hold ``max_bytes`` (always at least one line), with the
    cursor of the next page (None at end of file). The byte bound keeps an answer small enough to serialise
    without holding the event loop, however long the lines."""
    with _opened(source) as handle:
        total = handle.seek(0, os.SEEK_END)
        _check_cursor(handle, cursor, total)
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
        before = _line_before(handle, cursor.offset) if redactor is not _identity else None
    if next_cursor is not None and next_cursor.offset >= total:
        next_cursor = None
    # Redacted as one block, so a private key whose lines are all on the page is masked whole, short last line
    # included; the block has exactly as many lines as the page (lines hold no newline, redaction adds none).
    texts = _decode_after(before, b"\n".join(bodies), redactor).split("\n") if bodies else []
    return Page(
        lines=[Line(n, t) for n, t in zip(numbers, texts, strict=True)], next_cursor=next_cursor, total_bytes=total
    )


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


@dataclass(frozen=True)
class _Run:
    """Whole lines at the start of ``buffer``: ``length`` bytes from file offset ``offset``.

    Every line ends with a newline, except the last one of the file when it has none (``terminated`` False).
    """

    offset: int
    buffer: bytearray
    length: int
    terminated: bool


@dataclass(frozen=True)
class _HugeLine:
    """A line longer than the read buffer: its head (enough to show it cut) and its true length."""

    offset: int
    head: bytes
    length: int
    newline: bool


def _runs(handle: _RawReader, offset: int) -> Iterator[_Run | _HugeLine]:
    """The file from ``offset`` in runs of whole lines, read into two buffers in turn.

    A run stays valid until the second run after it is read: the search's indexer thread can still be counting
    one run's newlines while the next one is read and scanned.
    """
    handle.seek(offset)
    buffer, spare = bytearray(_READ_BYTES), bytearray(_READ_BYTES)
    filled = 0
    while True:
        with memoryview(buffer) as view:
            got = handle.readinto(view[filled:]) or 0
        filled += got
        if not got:
            if filled:
                yield _Run(offset, buffer, filled, terminated=buffer[filled - 1] == _NEWLINE)
            return
        last_newline = buffer.rfind(b"\n", 0, filled)
        if last_newline < 0:
            if filled < len(buffer):
                continue
            huge, filled = _huge_line(handle, buffer, offset)
            yield huge
            offset += huge.length + 1
            if not huge.newline:
                return
            continue
        yield _Run(offset, buffer, last_newline + 1, terminated=True)
        rest = filled - last_newline - 1
        spare[:rest] = buffer[last_newline + 1 : filled]
        buffer, spare = spare, buffer
        offset += last_newline + 1
        filled = rest


def _huge_line(handle: _RawReader, buffer: bytearray, offset: int) -> tuple[_HugeLine, int]:
    """Skip to the end of a line that fills the whole buffer; return it and how much of the next is buffered."""
    head = bytes(buffer[: MAX_LINE_BYTES + 1])
    length = len(buffer)
    while True:
        with memoryview(buffer) as view:
            got = handle.readinto(view) or 0
        if not got:
            return _HugeLine(offset, head, length, newline=False), 0
        newline = buffer.find(b"\n", 0, got)
        if newline >= 0:
            rest = got - newline - 1
            buffer[:rest] = buffer[newline + 1 : got]
            return _HugeLine(offset, head, length + newline, newline=True), rest
        length += got


def _newlines_and_long_lines(run: _Run, scratch: Any) -> tuple[int, list[tuple[int, int]]]:
    """How many newlines ``run`` holds, and where its lines longer than MAX_LINE_BYTES are (start, end).

    numpy counts at memory speed with the interpreter lock released (``bytes.count`` is a byte-at-a-time loop
    that holds it). A line longer than MAX_LINE_BYTES covers at least one whole aligned row of _ROW bytes, so only
    rows without a newline need a closer look.
    """
    import numpy as np

    data = np.frombuffer(run.buffer, dtype=np.uint8, count=run.length)
    newline = np.uint8(_NEWLINE)  # a numpy scalar: a Python int costs a conversion, 1.6x slower
    newlines = 0
    empty_rows: list[int] = []
    # A piece at a time into the same small scratch, which stays in the core's cache from the comparison to the
    # count and the row check (the whole run at once is 1.3x slower); reused, because fresh pages cost more.
    for piece_start in range(0, run.length, _INDEX_PIECE):
        piece = data[piece_start : piece_start + _INDEX_PIECE]
        is_newline = np.equal(piece, newline, out=scratch[: len(piece)])
        newlines += int(np.count_nonzero(is_newline))
        rows = len(piece) // _ROW
        if rows:
            empty = np.flatnonzero(~is_newline[: rows * _ROW].reshape(rows, _ROW).any(axis=1))
            if empty.size:
                empty_rows += (empty + piece_start // _ROW).tolist()
    del data
    long_lines: list[tuple[int, int]] = []
    end = 0
    for row in empty_rows:
        if row * _ROW < end:
            continue
        start = run.buffer.rfind(b"\n", 0, row * _ROW) + 1
        end = run.buffer.find(b"\n", row * _ROW, run.length)
        end = run.length if end < 0 else end
        if end - start > MAX_LINE_BYTES:
            long_lines.append((start, end))
    return newlines, long_lines


def _undecodable_lines(run: _Run) -> list[tuple[int, int]]:
    """The lines of ``run`` that are not valid UTF-8 (start, end): shown with U+FFFD where raw bytes are not."""
    found: list[tuple[int, int]] = []
    position = 0
    with memoryview(run.buffer) as view:
        while position < run.length:
            try:
                codecs.utf_8_decode(view[position : run.length], "strict", True)
            except UnicodeDecodeError as exc:
                bad = position + exc.start
                start = run.buffer.rfind(b"\n", position, bad) + 1 or position
                end = run.buffer.find(b"\n", bad, run.length)
                end = run.length if end < 0 else end
                found.append((start, end))
                position = end + 1
            else:
                break
    return found


class _LineNumbers:
    """Line numbers within a run, counted from the last one asked for: only as far as a candidate or a stop.

    ``first_line`` gives the number of the run's first line, known once the run before it is finished (its
    newlines counted), so it is asked for only when a number is needed.
    """

    def __init__(self, buffer: bytearray, first_line: Callable[[], int]) -> None:
        self.buffer, self.position, self.first_line = buffer, 0, first_line
        self.line: int | None = None

    def at(self, position: int) -> int:
        """The number of the line starting at ``position`` (never before the last position asked for)."""
        if self.line is None:
            self.line = self.first_line()
        self.line += self.buffer.count(b"\n", self.position, position)
        self.position = position
        return self.line


class _RunState:
    """A run being scanned: its index (newline count and special lines) from the indexer thread, its numbering."""

    def __init__(self, run: _Run, index: Future[tuple[int, list[tuple[int, int]]]], numbers: _LineNumbers) -> None:
        self.run, self.index, self.numbers = run, index, numbers
        self.special: list[tuple[int, int]] | None = None  # None: the index has not been waited for
        self.next_special = 0

    def newlines(self) -> int:
        return self.index.result()[0]

    def specials_before(self, position: int) -> Iterator[tuple[int, int]]:
        """The special lines starting before ``position`` not yet considered, in order."""
        if self.special is None:
            self.special = self.index.result()[1]
        while self.next_special < len(self.special) and self.special[self.next_special][0] < position:
            self.next_special += 1
            yield self.special[self.next_special - 1]


# A line ending in a run of base64 may be the last line of a private key's body; the key block above it says so.
_BASE64_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _ends_in_base64(raw: bytes) -> bool:
    """Whether ``raw`` ends (before a carriage return) in two or more base64 characters: two byte tests."""
    tail = raw[-3:-1] if raw.endswith(b"\r") else raw[-2:]
    return len(tail) == 2 and not tail.translate(None, _BASE64_BYTES)


# How far back a search looks for the start of that key block: a 4096-bit RSA key in PEM is about 3.3 KB.
_KEY_CONTEXT_BYTES = 16 * 1024


class _Search:
    """One call's scan: the state shared by the runs it reads, and the rules for when it stops."""

    def __init__(
        self,
        pattern: SearchPattern,
        finder: Any,
        redactor: Redactor,
        limit: int,
        start: Cursor,
        byte_budget: int,
        deadline: float,
        cancelled: threading.Event | None,
        fileno: int,
    ) -> None:
        self.pattern, self.finder, self.redactor, self.limit = pattern, finder, redactor, limit
        # The literals say where a match of the pattern itself may be; one of redaction's triggers may be elsewhere.
        literals = (pattern.literal,) if pattern.literal is not None else pattern.prefilter
        self.literals = literals if finder is pattern.block else None
        self.fileno = fileno  # read with pread for context, never moving the scan's own position
        self.start, self.byte_budget, self.deadline, self.cancelled = start, byte_budget, deadline, cancelled
        self.matches: list[Line] = []
        self.line = start.line  # the number of the line at self.offset, once the pending count is added
        self.pending: _RunState | None = None  # the last run scanned, until finish_pending
        self.offset = start.offset  # how far the scan has got: always the start of a line
        self.stopped: StopReason | None = None
        self.window = _WINDOW_FIRST
        self.indexer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-index")
        import numpy as np  # only searches need these: imported on the first, not at start-up
        import stringzilla

        self.scratch = np.empty(_INDEX_PIECE, dtype=np.bool_)
        # A SIMD substring search: 0.035 s/GiB here, where RE2 takes 0.3 s/GiB to find "needle-xyz" (it looks for
        # its first byte, n, which is everywhere in a log) and bytes.find 0.5 s/GiB.
        self.prefilter = None if self.literals is None else LiteralSet(self.literals, stringzilla.find)

    def should_stop(self, offset: int, *, out_of_bytes: bool = False) -> bool:
        """Whether a budget ran out or the call was cancelled; only once the scan has moved, so each call does.

        ``out_of_bytes``: the next line would take the scan past its byte budget.
        """
        if offset == self.start.offset:
            return False
        if self.cancelled is not None and self.cancelled.is_set():
            self.stopped = "cancelled"
        elif time.monotonic() >= self.deadline:
            self.stopped = "time budget"
        elif out_of_bytes or offset - self.start.offset >= self.byte_budget:
            self.stopped = "byte budget"
        return self.stopped is not None

    def consider(self, number: int, raw: bytes, true_length: int, offset: int) -> None:
        """Decode and redact one candidate line; keep it if the pattern matches what would be shown."""
        text = _decode(_cut(raw, true_length), self.redactor)
        if self.pattern.matches(text) and self.redactor is not _identity:
            if _ends_in_base64(raw):
                # A private key's short last body line is only recognisable by the key block above it: shown
                # alone, it would be unmasked. Redact it as a page would, with the lines before it.
                text = self._redacted_in_context(raw, true_length, offset)
            before = self._line_before(offset)
            if before is not None and _may_dangle(before):
                # The value of a name that ends the line before ("password:" then the value).
                text = _decode_after(before, text.encode("utf-8", "surrogatepass"), self.redactor)
        if self.pattern.matches(text):
            self.matches.append(Line(number, text))
            if len(self.matches) >= self.limit:
                self.stopped = "match limit"

    def _line_before(self, offset: int) -> bytes | None:
        """The end of the line before the one at ``offset``, read with pread (the scan's position stays)."""
        if offset <= 0:
            return None
        start = max(0, offset - 1 - MAX_LINE_BYTES)
        data = os.pread(self.fileno, offset - 1 - start, start)
        return data[data.rfind(b"\n") + 1 :]

    def _redacted_in_context(self, raw: bytes, true_length: int, offset: int) -> str:
        """The line at ``offset`` as shown after redacting it together with up to _KEY_CONTEXT_BYTES before it."""
        start = max(0, offset - _KEY_CONTEXT_BYTES)
        before = os.pread(self.fileno, offset - start, start)
        if start > 0:
            before = before[before.find(b"\n") + 1 :]  # from the first whole line
        if b"private" not in before.lower():  # no key block began above: the line alone was right
            return _decode(_cut(raw, true_length), self.redactor)
        shown = _decode(before + _cut(raw, true_length), self.redactor)
        return shown[shown.rfind("\n") + 1 :]

    def finish_pending(self) -> bool:
        """Finish the previous run: its special lines left after its last candidate, and its newline count.

        Deferred so that counting its newlines overlaps with reading and scanning the next run; done before that
        run numbers or shows a line, stops, or ends (after which the previous run's buffer is read into). True
        when one of its lines reached the match limit.
        """
        pending, self.pending = self.pending, None
        if pending is None:
            return False
        for start, end in pending.specials_before(pending.run.length + 1):
            if self._candidate(pending, start, end):
                return True
        self.line += pending.newlines()
        return False

    def huge_line(self, line: _HugeLine) -> None:
        if self.finish_pending() or self.should_stop(line.offset):
            return
        self.consider(self.line, line.head, line.length, line.offset)
        self.line += 1
        self.offset = line.offset + line.length + 1

    def run(self, run: _Run) -> None:
        """Scan one run of lines window by window; only candidate lines are decoded, redacted and re-checked.

        The run's newlines are counted, and its long (and undecodable) lines found, on the indexer thread while
        this thread scans it and reads and scans the next; the scan waits for that index only to number a
        candidate or where it stops, and at the next run's end (see ``finish_pending``).
        """
        state = _RunState(run, self.indexer.submit(self._index, run), _LineNumbers(run.buffer, lambda: self.line))
        buffer, length = run.buffer, run.length

        def candidate(start: int, end: int) -> bool:
            return self.finish_pending() or self._candidate(state, start, end)

        position = 0
        candidates = 0
        with memoryview(buffer) as view:
            while position < length:
                end = self._window_end(run, position)
                over_bytes = run.offset + end - self.start.offset > self.byte_budget
                if self.should_stop(run.offset + position, out_of_bytes=over_bytes):
                    stopped, self.stopped = self.stopped, None  # the previous run's lines come first
                    if self.finish_pending():
                        return
                    self.stopped = stopped
                    for start, stop in state.specials_before(position):
                        if self._candidate(state, start, stop):
                            return
                    self.offset, self.line = run.offset + position, state.numbers.at(position)
                    return
                began = time.monotonic()
                hit_from = position
                while hit_from < end:
                    search_from, search_end = hit_from, end
                    if self.prefilter is not None:
                        # Every match contains one of the literals: RE2 runs only on the lines that have one.
                        found = self.prefilter.first(buffer, hit_from, end)
                        if found < 0:
                            break
                        search_from = buffer.rfind(b"\n", hit_from, found) + 1 or hit_from
                        search_end = buffer.find(b"\n", found, end)
                        search_end = end if search_end < 0 else search_end
                    hit = self.finder.search(view[search_from:search_end])
                    if hit is None:
                        if search_end >= end:
                            break
                        hit_from = search_end + 1
                        continue
                    line_start = buffer.rfind(b"\n", search_from, search_from + hit.start()) + 1 or search_from
                    if line_start >= end:
                        break  # an empty match after the window's last newline: that line is the next window's
                    line_end = buffer.find(b"\n", line_start, length)
                    line_end = length if line_end < 0 else line_end
                    for start, stop in state.specials_before(line_start + 1):
                        if start != line_start and candidate(start, stop):
                            return
                    if candidate(line_start, line_end):
                        return
                    hit_from = line_end + 1
                    candidates += 1
                if candidates:
                    # Deciding candidates is Python work that holds the interpreter lock; a pause after each
                    # window lets the event loop (and the threads serving stdio) take it without waiting.
                    time.sleep(_PAUSE_SECONDS)
                    candidates = 0
                self._resize_window(end - position, time.monotonic() - began)
                position = end
        if self.finish_pending():  # the previous run's buffer is the next one read into
            return
        self.offset = run.offset + length
        self.pending = state

    def _index(self, run: _Run) -> tuple[int, list[tuple[int, int]]]:
        """The run's newline count and its special lines: too long to scan raw, or (when it matters) not UTF-8."""
        newlines, special = _newlines_and_long_lines(run, self.scratch)
        if not self.pattern.replacement_blind:
            special = sorted(set(special) | set(_undecodable_lines(run)))
        return newlines, special

    def _candidate(self, state: _RunState, start: int, end: int) -> bool:
        """Consider the line at ``start``..``end`` of a run; True when that stopped the scan (the match limit)."""
        number = state.numbers.at(start)
        run = state.run
        self.consider(number, bytes(run.buffer[start:end]), end - start, run.offset + start)
        if self.stopped is None:
            return False
        self.offset, self.line = run.offset + end + 1, number + 1
        return True

    def _window_end(self, run: _Run, position: int) -> int:
        """The end of the next window: whole lines, about ``self.window`` bytes of them, within the byte budget."""
        buffer, length = run.buffer, run.length
        left = self.byte_budget - (run.offset + position - self.start.offset)
        window = max(1, min(self.window, left))
        if length - position <= window:
            return length
        newline = buffer.rfind(b"\n", position, position + window)
        if newline < 0:
            newline = buffer.find(b"\n", position + window, length)
        return length if newline < 0 else newline + 1

    def _resize_window(self, scanned: int, elapsed: float) -> None:
        """Aim each window at _WINDOW_SECONDS, so budgets and cancellation are seen that often at any speed."""
        rate = scanned / max(elapsed, 1e-6)
        self.window = int(min(_READ_BYTES, max(_WINDOW_MIN, rate * _WINDOW_SECONDS)))


def search(
    source: LogSource,
    pattern: SearchPattern,
    *,
    cursor: Cursor = START,
    limit: int,
    byte_budget: int = SEARCH_SCAN_BUDGET_BYTES,
    time_budget: float | None = None,
    redaction: Redaction | None = None,
    cancelled: threading.Event | None = None,
) -> SearchResult:
    """Lines matching ``pattern`` from ``cursor`` on, until ``limit`` matches, a budget, cancellation or the end.

    RE2 scans raw bytes a window at a time, without the interpreter lock. Only candidate lines are decoded and
    redacted, and a line is returned only if the pattern matches its text as shown (redacted, cut), so a search
    cannot probe a secret's value. Candidates are the lines with a raw match, plus every line whose shown text
    could match where its raw bytes do not: lines redaction may change (unless the pattern cannot touch the
    mask), lines cut for length, and lines that are not UTF-8 (unless the pattern cannot match U+FFFD). Each call
    moves on by at least one line, however long, so paging with next_cursor always ends.
    """
    deadline = math.inf if time_budget is None else time.monotonic() + time_budget
    if redaction is None or pattern.mask_blind:
        finder = pattern.block
    else:
        finder = pattern.block_with(redaction.trigger_pattern())
    redactor = redaction.apply if redaction is not None else _identity
    with _opened(source) as handle:
        total = handle.seek(0, os.SEEK_END)
        _check_cursor(handle, cursor, total)
        scan = _Search(pattern, finder, redactor, limit, cursor, byte_budget, deadline, cancelled, handle.fileno())
        try:
            # Every handle the desk reads is a binary file object that can read straight into a buffer.
            for run in _runs(cast(_RawReader, handle), cursor.offset):
                if isinstance(run, _HugeLine):
                    scan.huge_line(run)
                else:
                    scan.run(run)
                if scan.stopped is not None:
                    break
            else:
                scan.finish_pending()
        finally:
            scan.indexer.shutdown(wait=True)  # the buffer it reads is reused: it must be done with it first
    next_cursor: Cursor | None = Cursor(scan.line, scan.offset)
    if scan.stopped is None or scan.offset >= total:
        next_cursor = None
    return SearchResult(
        matches=scan.matches,
        next_cursor=next_cursor,
        scanned_bytes=scan.offset - cursor.offset,
        total_bytes=total,
        stopped="end of log" if scan.stopped is None or next_cursor is None else scan.stopped,
    )


# The last statement: app.py reads this module as usable only once its import has finished (another thread may
# still be running it, and a module being imported is already in sys.modules).
IMPORT_FINISHED = True
