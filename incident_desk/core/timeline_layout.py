"""The timeline kernel's common case: lines laid out like the pass's first line, read in a few array steps each.

Most logs write every line alike: one time layout (``2026-11-29T10:01:07.001Z``), one blank, a short source word,
one blank, the level word. For such a line ``core.timeline``'s pattern can go only one way: the time's bytes are
of the first line's classes digit for digit, and so is the blank after them (one masked check per eight bytes);
the source word runs to the first byte at or below a space within the next 15 or 16 bytes; that byte is a blank,
the next one starts a level word with a word boundary after it. That way is RE2's first choice (the optional
source word is tried first and taken whole, then the level), so the line counts as RE2 reads it. A line that
differs anywhere (another layout, a run of blanks, a long or odd source word, a ``[``, no level after the source
word) is left to the general steps of ``core.timeline_scan``.

Each line's first bytes come from aligned 64-bit reads joined by shifts (numpy gathers unaligned words about four
times slower).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

_CLASS_BYTES = 48  # the first line's bytes that decide how the general steps read its time
LEVEL_WORDS = (b"ERROR", b"FATAL", b"CRITICAL", b"WARNING", b"WARN", b"INFO", b"DEBUG", b"TRACE")
ERROR_LEVELS = 3  # the first three words are errors
WARN, WARNING = 4, 3  # indices in LEVEL_WORDS
_WORDY = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


class Steps(Protocol):
    """What this module needs of ``timeline_scan``'s kernel (numpy, the frame, and the general time reading)."""

    np: Any
    frame: Any

    def stamps(self, starts: Any) -> tuple[Any, Any, Any, Any, Any, Any, Any]: ...

    def controls(self, words: Any) -> Any: ...


@dataclass
class InLayout:
    """Per line: whether it was read here (``taken``), and for those its level index, minute (HH * 100 + MM), day
    key (0 without a date) and whether it may be an error line (with ``want_errors``)."""

    taken: Any
    level: Any
    minute: Any
    day: Any
    could_err: Any


_NOT_A_LEVEL = 0x100  # above any masked first byte: never equal
_CODE_OF_WARNING = WARNING + 7 * 16


@functools.cache
def _level_tables(np: Any) -> tuple[Any, Any, Any, Any]:
    """By a word's first byte: the level word starting with it (WARN for W), its mask, its code (its index in
    LEVEL_WORDS plus its length times 16; -1: none), and which bytes are word characters (for the boundary)."""
    values = np.full(256, np.uint64(_NOT_A_LEVEL), dtype=np.uint64)
    masks = np.full(256, np.uint64(0xFF), dtype=np.uint64)
    codes = np.full(256, -1, dtype=np.intp)
    for index, word in enumerate(LEVEL_WORDS):
        if index == WARNING:
            continue  # shares WARN's first byte; told apart by its fifth to seventh bytes
        values[word[0]] = int.from_bytes(word, "little")
        masks[word[0]] = (1 << (8 * len(word))) - 1
        codes[word[0]] = index + 16 * len(word)
    wordy = np.zeros(256, dtype=np.bool_)
    wordy[list(_WORDY)] = True
    return values, masks, codes, wordy


_DIGIT_CLASS = bytes.maketrans(b"0123456789", b"dddddddddd")
_LAYOUTS: dict[bytes, tuple[int, bool] | None] = {}  # by the first line's byte classes: its time's width, dated
_MAX_LAYOUTS = 256


def _layout(steps: Steps, starts: Any) -> tuple[bytes, tuple[int, bool] | None]:
    """The first line's byte classes, and the width of its time (up to its blank) and whether it has a date, or
    None where the general steps cannot read its time. The general reading depends only on the classes of the
    first ``_CLASS_BYTES`` bytes, so it is kept by them."""
    start = int(starts[0])
    classes = bytes(steps.frame.buffer[start : start + _CLASS_BYTES]).translate(_DIGIT_CLASS)
    try:
        return classes, _LAYOUTS[classes]
    except KeyError:
        pass
    _w0, _w1, dated, _when, timed, undecided, gap = steps.stamps(starts[:1])
    layout = (int(gap[0]) - start, bool(dated[0])) if timed[0] and not undecided[0] else None
    if len(_LAYOUTS) >= _MAX_LAYOUTS:  # another worker may clear it too: this pass keeps its own answer
        _LAYOUTS.clear()
    _LAYOUTS[classes] = layout
    return classes, layout


@functools.cache
def _template_words(template: bytes) -> tuple[tuple[int, int, int, int, int], ...]:
    """Per eight bytes of the layout (``d`` a digit, other bytes themselves): the word's index, the bits that must
    be zero after XOR with the expected bytes (literals whole, digits' high nibbles), the expected bytes, and the
    add and mask that catch a digit's low nibble above 9 by its carry."""
    words = []
    for index in range(0, len(template), 8):
        must = expected = add = carry = 0
        for offset, char in enumerate(template[index : index + 8]):
            shift = 8 * offset
            if char == ord("d"):
                must, expected = must | 0xF0 << shift, expected | 0x30 << shift
                add, carry = add | 0x06 << shift, carry | 0x10 << shift
            else:
                must, expected = must | 0xFF << shift, expected | char << shift
        words.append((index // 8, must, expected, add, carry))
    return tuple(words)


def words_at(steps: Steps, starts: Any, count: int) -> list[Any]:
    """The ``count`` 64-bit words at ``starts``, ``starts + 8``, ...: aligned reads (the same indices into views
    starting one word further each time), each joined with the next by shifts."""
    np = steps.np
    aligned = steps.frame.aligned
    index = starts >> 3
    shift = ((starts & 7) << 3).astype(np.uint64)
    back = np.uint64(64) - shift  # a shift by 64 gives 0 in numpy: an aligned start takes the low word whole
    low = aligned[index]
    words = []
    for step in range(1, count + 1):
        high = aligned[step:][index]
        words.append((low >> shift) | (high << back))
        low = high
    return words


def _first_set_byte(np: Any, marks: Any) -> Any:
    """The index of the lowest byte with its top bit set (0 where there is none): the lowest such bit alone, moved
    to the bottom of its byte and multiplied so that the byte's index lands in the top byte."""
    lowest = marks & (np.uint64(0) - marks)
    return ((lowest >> np.uint64(7)) * np.uint64(0x0001020304050607)) >> np.uint64(56)


def level_of(steps: Steps, words: Any, positions: Any) -> tuple[Any, Any]:
    """Which level word (its index in LEVEL_WORDS) the eight bytes at each position start, and whether one does,
    with a word boundary after it (a ``[`` is not followed here: no level)."""
    np = steps.np
    values, masks, codes, wordy = _level_tables(np)
    first = (words & np.uint64(0xFF)).astype(np.intp)
    code = codes[first]
    same = (words & masks[first]) == values[first]
    warning = (words & np.uint64((1 << 56) - 1)) == np.uint64(int.from_bytes(b"WARNING", "little"))
    code += warning * (_CODE_OF_WARNING - WARN - 4 * 16)  # only WARN's first bytes start WARNING
    length = (code >> 4).astype(np.uint64)
    after = ((words >> (length << np.uint64(3))) & np.uint64(0xFF)).astype(np.intp)
    long_words = np.flatnonzero(same & (length == 8))  # CRITICAL: the byte after it is past these eight
    if len(long_words):
        after[long_words] = steps.frame.bytes[positions[long_words] + 8]
    return code & 15, same & ~wordy[after]


def _word_from(np: Any, words: list[Any], offset: int) -> Any:
    """The eight bytes at a fixed ``offset`` of each line, from its consecutive words."""
    index, within = divmod(offset, 8)
    if not within:
        return words[index]
    return (words[index] >> np.uint64(8 * within)) | (words[index + 1] << np.uint64(64 - 8 * within))


@functools.cache
def _lowest_bit(np: Any) -> Any:
    """The index of the lowest set bit of every 16-bit number (16 for 0)."""
    values = np.arange(1 << 16)
    lowest = values & -values
    table = np.full(1 << 16, 16, dtype=np.intp)
    table[1:] = np.log2(lowest[1:]).astype(np.intp)
    return table


def _source_ends(steps: Steps, words: list[Any], first: int) -> tuple[Any, Any]:
    """Where the source word starting at offset ``first`` of each line ends (the offset of the first byte at or
    below a space after it), and whether it starts with a byte above a space and ends within the window (15 or
    16 bytes). Each word's marks (a top bit per byte) are gathered into eight bits by one multiplication."""
    np = steps.np
    index, within = divmod(first, 8)
    gather = np.uint64(0x0102040810204080)  # bit 8i + 7 of a mark word to bit 56 + i
    marks: Any = None
    for step in range(3 if within > 1 else 2):
        bits = ((steps.controls(words[index + step]) >> np.uint64(7)) * gather) >> np.uint64(56)
        bits <<= np.uint64(8 * step)
        marks = bits if marks is None else marks | bits
    marks = ((marks >> np.uint64(within)) & np.uint64(0xFFFF)).astype(np.intp)
    return _lowest_bit(np)[marks] + first, ((marks & 1) == 0) & (marks != 0)


def read_in_layout(steps: Steps, starts: Any, want_errors: bool) -> InLayout | None:
    """The lines at ``starts`` that share the first line's layout, read by fixed offsets; None when the first
    line has no time the arrays can read (the general steps take the whole pass)."""
    np = steps.np
    if not len(starts):
        return None
    classes, layout = _layout(steps, starts)
    if layout is None:
        return None
    width, dated = layout
    first = width + 1  # the source word's first byte
    words = words_at(steps, starts, first // 8 + (3 if first % 8 > 1 else 2))
    bad: Any = None
    for index, must, expected, add, carry in _template_words(classes[:first]):  # the time and its blank
        xor = words[index] ^ np.uint64(expected)
        wrong = xor & np.uint64(must)
        if add:
            wrong |= (xor + np.uint64(add)) & np.uint64(carry)  # high nibbles already 0 where this matters
        bad = wrong if bad is None else bad | wrong
    ends, taken = _source_ends(steps, words, first)
    taken &= bad == 0
    ends += starts
    after_source = steps.frame.bytes[ends]
    taken &= (after_source == 0x20) | (after_source == 0x09)
    at = ends + 1
    level, is_level = level_of(steps, words_at(steps, at, 1)[0], at)
    taken &= is_level
    could_err = None
    if want_errors:
        source = _word_from(np, words, first)
        direct, is_direct = level_of(steps, source, starts + first)
        could_err = (level < ERROR_LEVELS) | (is_direct & (direct < ERROR_LEVELS))
        could_err |= (source & np.uint64(0xFF)) == 0x5B  # a ``[`` before a level word in the first place: RE2 decides
    when = _word_from(np, words, 11 if dated else 0)
    # HH and MM as numbers: each pair's tens times ten plus its units lands in the pair's first byte.
    digits = when & np.uint64(0x0000000F0F000F0F)
    pairs = digits * np.uint64(10) + (digits >> np.uint64(8))
    minute = ((pairs & np.uint64(0xFF)) * np.uint64(100) + ((pairs >> np.uint64(24)) & np.uint64(0xFF))).astype(np.intp)
    if dated:
        w0, w1 = words[0], words[1]
        day = (w0 & np.uint64(0x000F0F000F0F0F0F)) | ((w1 & np.uint64(0x0F)) << np.uint64(32))
        day |= ((w1 & np.uint64(0x0F00)) << np.uint64(48)) | np.uint64(1 << 63)
    else:
        day = np.zeros(len(starts), dtype=np.uint64)
    return InLayout(taken, level, minute, day, could_err)
