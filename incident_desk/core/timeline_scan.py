"""The timeline's per-line parse of a chunk, done by numpy over every line at once instead of by RE2 per line.

RE2's ``finditer`` hands back a match object per line, which holds the interpreter ~60 ns a line: 11 s for a
1 GiB log. Here each step of ``core.timeline``'s line pattern is an array operation over the chunk's line starts:
the optional date, the time, the usual fraction and zone, one space or tab, an optional source word and one space
or tab, an optional ``[``, a level word and a word boundary. A line in a shape the arrays do not decide (two
spaces in a row, a long fraction, an odd zone) goes to RE2 on its own, so every line is read exactly as the
pattern reads it; in common logs there are none.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from incident_desk.core.linear import LinearPattern

Key = tuple[bytes, bytes, bytes]
LEVEL_WORDS = (b"ERROR", b"FATAL", b"CRITICAL", b"WARNING", b"WARN", b"INFO", b"DEBUG", b"TRACE")
_PAD = 128  # bytes after the chunk, so every look past a line start (at most ~100 bytes on) stays inside
_WINDOW = 32  # bytes looked at from a position at once
# After the seconds: the fraction and zone shapes decided by the arrays (others go to RE2), where "d" is a digit
# and "." a dot or a comma; each is followed by a space or a tab.
_SPANS = ("", "Z", ".ddd", ".dddZ", ".dddddd", ".ddddddZ")


def _np() -> Any:
    import numpy

    return numpy


@functools.cache
def _level_tables() -> tuple[Any, Any, Any, Any, Any]:
    """The level words as rows of bytes, their lengths, which bytes of each row count, their first four bytes as
    sorted integers, and the word each prefix belongs to (WARN's stands for WARN; WARNING is told by its fifth)."""
    np = _np()
    words = np.zeros((len(LEVEL_WORDS), 9), dtype=np.uint8)
    known = np.zeros((len(LEVEL_WORDS), 9), dtype=np.bool_)
    for index, word in enumerate(LEVEL_WORDS):
        words[index, : len(word)] = np.frombuffer(word, dtype=np.uint8)
        known[index, : len(word)] = True
    lengths = np.array([len(word) for word in LEVEL_WORDS])
    firsts = {int(np.frombuffer(word[:4], dtype=np.uint32)[0]): index for index, word in enumerate(LEVEL_WORDS)}
    firsts[int(np.frombuffer(b"WARN", dtype=np.uint32)[0])] = LEVEL_WORDS.index(b"WARN")
    order = sorted(firsts)
    return words, lengths, known, np.array(order, dtype=np.uint32), np.array([firsts[k] for k in order])


@functools.cache
def _space_table() -> Any:
    np = _np()
    table = np.zeros(256, dtype=np.bool_)
    table[[0x20, 0x09, 0x0A, 0x0C, 0x0D]] = True
    return table


def levels_in(framed: bytes, line: LinearPattern) -> tuple[Counter[Key], int]:
    """The (day, hour:minute, level) counts of the lines of ``framed`` (a chunk after one newline) that have
    them, and how many lines had them; as ``line.finditer`` would find them."""
    np = _np()
    spacey = _space_table()
    data = np.frombuffer(framed + b"\n" * _PAD, dtype=np.uint8)
    size = len(framed)
    starts = np.flatnonzero(data[:size] == 0x0A) + 1  # the byte after each newline: a line start
    windows = np.lib.stride_tricks.sliding_window_view(data, _WINDOW)

    def at(positions: Any) -> Any:
        return windows[positions]

    def digits(block: Any) -> Any:
        return (block >= 0x30) & (block <= 0x39)

    head = at(starts)
    dated = (
        digits(head[:, 0:4]).all(1)
        & (head[:, 4] == 0x2D)
        & digits(head[:, 5:7]).all(1)
        & (head[:, 7] == 0x2D)
        & digits(head[:, 8:10]).all(1)
        & ((head[:, 10] == 0x54) | (head[:, 10] == 0x20))
    )
    clock = np.where(dated, starts + 11, starts)
    when = at(clock)
    timed = digits(when[:, [0, 1, 3, 4, 6, 7]]).all(1) & (when[:, 2] == 0x3A) & (when[:, 5] == 0x3A)
    after = when[:, 8:17]  # the longest span decided here, and the blank after it
    blank = (after == 0x20) | (after == 0x09)
    dot = (after == 0x2E) | (after == 0x2C)
    digit = digits(after)
    zone = after == 0x5A
    # The first space or tab after the seconds, for the spans the arrays decide; -1 where another shape is.
    gap = np.full(len(starts), -1)
    for span in reversed(_SPANS):
        fits = blank[:, len(span)].copy()
        for index, char in enumerate(span):
            fits &= {"d": digit, ".": dot, "Z": zone}[char][:, index]
        gap = np.where(fits, len(span), gap)
    undecided = timed & (gap < 0)
    timed &= gap >= 0
    first = clock + 8 + gap + 1  # just after one space or tab
    follow = data[first]
    undecided |= timed & ((follow == 0x20) | (follow == 0x09))  # more spaces: RE2 decides

    words, lengths, known, prefixes, prefix_words = _level_tables()

    def level_at(positions: Any) -> Any:
        """Which level word (its index, or -1) starts at each position, after an optional "["."""
        block = at(positions)
        block = np.ascontiguousarray(np.where((block[:, 0] == 0x5B)[:, None], block[:, 1:17], block[:, 0:16]))
        head = block[:, :4].copy().view(np.uint32)[:, 0]
        slot = np.minimum(np.searchsorted(prefixes, head), len(prefixes) - 1)
        candidate = np.where(prefixes[slot] == head, prefix_words[slot], -1)
        # WARN and WARNING share their first four bytes: WARNING when the fifth is I.
        candidate = np.where((candidate == 4) & (block[:, 4] == 0x49), 3, candidate)
        chosen = np.maximum(candidate, 0)
        same = ((block[:, :9] == words[chosen]) | ~known[chosen]).all(1)
        edge = block[np.arange(len(block)), lengths[chosen]]
        wordy = digits(edge) | ((edge | 0x20) >= 0x61) & ((edge | 0x20) <= 0x7A) | (edge == 0x5F)
        return np.where((candidate >= 0) & same & ~wordy, candidate, -1)

    direct = level_at(first)
    # A source word: up to the next of \t \n \f \r or space (RE2's \s) in the next 31 bytes, then one space or
    # tab; a longer word goes to RE2.
    word = spacey[at(first)[:, 1:]]
    seen = word.any(1)
    word_end = first + 1 + word.argmax(1)
    undecided |= timed & ~seen & ~spacey[data[first]]
    end_byte = data[word_end]
    sourced = seen & ~spacey[data[first]] & ((end_byte == 0x20) | (end_byte == 0x09))
    second = word_end + 1
    next_byte = data[second]
    undecided |= timed & sourced & ((next_byte == 0x20) | (next_byte == 0x09))
    via_source = np.where(sourced, level_at(second), -1)
    level = np.where(via_source >= 0, via_source, direct)
    parsed = timed & ~undecided & (level >= 0) & (starts < size)
    undecided &= starts < size

    rows = np.flatnonzero(parsed)

    def number(positions: Any, offsets: tuple[int, ...]) -> Any:
        value = np.zeros(len(positions), dtype=np.int64)
        for offset in offsets:
            value = value * 10 + (data[positions + offset].astype(np.int64) - 0x30)
        return value

    with_day = dated[rows]
    day = np.where(with_day, number(starts[rows], (0, 1, 2, 3, 5, 6, 8, 9)) + 100_000_000, 0)
    keys = ((day * 10_000 + number(clock[rows], (0, 1, 3, 4))) * 8) + level[rows]
    unique, counts = np.unique(keys, return_counts=True)
    found: Counter[Key] = Counter()
    for key, count in zip(unique.tolist(), counts.tolist(), strict=True):
        day_and_minute, level_index = divmod(key, 8)
        day_number, minute = divmod(day_and_minute, 10_000)
        day_text = f"{day_number - 100_000_000:08d}" if day_number else ""
        day_bytes = f"{day_text[:4]}-{day_text[4:6]}-{day_text[6:]}".encode() if day_text else b""
        found[(day_bytes, f"{minute // 100:02d}:{minute % 100:02d}".encode(), LEVEL_WORDS[level_index])] += count
    total = len(rows)
    for start in np.flatnonzero(undecided).tolist():
        line_start = int(starts[start])
        line_end = framed.find(b"\n", line_start)
        framed_line = framed[line_start - 1 : len(framed) if line_end < 0 else line_end]
        for _whole, span_day, span_minute, span_level in line.finditer(framed_line):
            found[
                (
                    framed_line[span_day[0] : span_day[1]],
                    framed_line[span_minute[0] : span_minute[1]],
                    framed_line[span_level[0] : span_level[1]],
                )
            ] += 1
            total += 1
    return found, total
