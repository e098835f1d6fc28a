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
from typing import TYPE_CHECKING, Any, Protocol

from incident_desk.core.timeline.zones import to_utc

if TYPE_CHECKING:
    from incident_desk.core.timeline.scratch import PassArrays

_CLASS_BYTES = 48  # the first line's bytes that decide how the general steps read its time
LEVEL_WORDS = (b"ERROR", b"FATAL", b"CRITICAL", b"WARNING", b"WARN", b"INFO", b"DEBUG", b"TRACE")
ERROR_LEVELS = 3  # the first three words are errors
WARN, WARNING = 4, 3  # indices in LEVEL_WORDS
_WORDY = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


class Steps(Protocol):
    """What this module needs of ``timeline_scan``'s kernel (numpy, the frame, and the general time reading)."""

    np: Any
    frame: Any
    arrays: PassArrays

    def stamps(self, starts: Any) -> tuple[Any, Any, Any, Any, Any, Any, Any, Any]: ...

    def controls(self, words: Any) -> Any: ...

    def controls_into(self, words: Any, out: Any) -> Any: ...


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
_LAYOUTS: dict[bytes, tuple[int, bool, int] | None] = {}  # by the first line's byte classes: see _layout
_MAX_LAYOUTS = 256


def _layout(steps: Steps, starts: Any) -> tuple[bytes, tuple[int, bool, int] | None]:
    """The first line's byte classes, and the width of its time (up to its blank), whether it has a date and
    where its zone's sign is (-1: no offset), or None where the general steps cannot read its time. The general
    reading depends only on the classes of the first ``_CLASS_BYTES`` bytes, so it is kept by them."""
    start = int(starts[0])
    classes = bytes(steps.frame.buffer[start : start + _CLASS_BYTES]).translate(_DIGIT_CLASS)
    try:
        return classes, _LAYOUTS[classes]
    except KeyError:
        pass
    _w0, _w1, dated, _when, timed, undecided, gap, zone = steps.stamps(starts[:1])
    sign = int(zone[0]) - start if zone[0] >= 0 else -1
    layout = (int(gap[0]) - start, bool(dated[0]), sign) if timed[0] and not undecided[0] else None
    if len(_LAYOUTS) >= _MAX_LAYOUTS:  # another worker may clear it too: this pass keeps its own answer
        _LAYOUTS.clear()
    _LAYOUTS[classes] = layout
    return classes, layout


@functools.cache
def _template_words(np: Any, template: bytes) -> tuple[tuple[int, Any, Any, Any, Any], ...]:
    """Per eight bytes of the layout (``d`` a digit, other bytes themselves): the word's index, the bits that must
    be zero after XOR with the expected bytes (literals whole, digits' high nibbles), the expected bytes, and the
    add and mask that catch a digit's low nibble above 9 by its carry (0: no digit)."""
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
        words.append((index // 8, np.uint64(must), np.uint64(expected), np.uint64(add), np.uint64(carry)))
    return tuple(words)


def words_at(steps: Steps, starts: Any, outs: tuple[Any, ...]) -> tuple[Any, ...]:
    """The 64-bit words at ``starts``, ``starts + 8``, ..., into each of ``outs``: aligned reads (the same indices
    into views starting one word further each time), each joined with the next by shifts."""
    np, a = steps.np, steps.arrays
    aligned = steps.frame.aligned
    index = np.right_shift(starts, 3, out=a.t0i)
    shift = np.bitwise_and(starts.view(np.uint64), np.uint64(7), out=a.t1)
    shift <<= np.uint64(3)
    # A shift by 64 gives 0 in numpy: an aligned start takes the low word whole.
    back = np.subtract(np.uint64(64), shift, out=a.t2)
    low = np.take(aligned, index, out=a.t3, mode="clip")
    high, joined = a.t4, a.t5
    for step, word in enumerate(outs, 1):
        np.take(aligned[step:], index, out=high, mode="clip")
        np.right_shift(low, shift, out=word)
        word |= np.left_shift(high, back, out=joined)
        low, high = high, low
    return outs


def _first_set_byte(np: Any, marks: Any) -> Any:
    """The index of the lowest byte with its top bit set (0 where there is none): the lowest such bit alone, moved
    to the bottom of its byte and multiplied so that the byte's index lands in the top byte."""
    lowest = marks & (np.uint64(0) - marks)
    return ((lowest >> np.uint64(7)) * np.uint64(0x0001020304050607)) >> np.uint64(56)


_WARNING_WORD = int.from_bytes(b"WARNING", "little")


def level_of(steps: Steps, words: Any, positions: Any, into: tuple[Any, Any]) -> tuple[Any, Any]:
    """Which level word (its index in LEVEL_WORDS) the eight bytes at each position start, and whether one does,
    with a word boundary after it (a ``[`` is not followed here: no level); into the arrays ``into``."""
    np, a = steps.np, steps.arrays
    values, masks, codes, wordy = _level_tables(np)
    code, same = into
    first = np.bitwise_and(words, np.uint64(0xFF), out=a.t0).view(np.intp)
    np.take(codes, first, out=code, mode="clip")
    masked = np.take(masks, first, out=a.t1, mode="clip")
    masked &= words
    np.equal(masked, np.take(values, first, out=a.t2, mode="clip"), out=same)
    np.bitwise_and(words, np.uint64((1 << 56) - 1), out=masked)
    warning = np.equal(masked, np.uint64(_WARNING_WORD), out=a.f3)
    np.add(code, _CODE_OF_WARNING - WARN - 4 * 16, out=code, where=warning)  # only WARN's first bytes start WARNING
    bits = np.right_shift(code, 4, out=a.t3i).view(np.uint64)
    bits <<= np.uint64(3)  # the word's length in bits
    after = np.right_shift(words, bits, out=a.t1)
    after &= np.uint64(0xFF)
    after = a.t1i
    long_words = np.equal(bits, np.uint64(64), out=warning)  # CRITICAL: the byte after it is past these eight
    long_words &= same
    rows = np.flatnonzero(long_words)
    if len(rows):
        after[rows] = steps.frame.bytes[positions[rows] + 8]
    code &= 15
    bounded = np.take(wordy, after, out=a.f4, mode="clip")
    same &= np.logical_not(bounded, out=bounded)
    return code, same


def _word_from(steps: Steps, words: tuple[Any, ...], offset: int, into: Any) -> Any:
    """The eight bytes at a fixed ``offset`` of each line, from its consecutive words (into ``into``)."""
    np = steps.np
    index, within = divmod(offset, 8)
    if not within:
        return words[index]
    np.right_shift(words[index], np.uint64(8 * within), out=into)
    into |= np.left_shift(words[index + 1], np.uint64(64 - 8 * within), out=steps.arrays.t5)
    return into


@functools.cache
def _lowest_bit(np: Any) -> Any:
    """The index of the lowest set bit of every 16-bit number (16 for 0)."""
    values = np.arange(1 << 16)
    lowest = values & -values
    table = np.full(1 << 16, 16, dtype=np.intp)
    table[1:] = np.log2(lowest[1:]).astype(np.intp)
    return table


def _source_ends(steps: Steps, words: tuple[Any, ...], first: int) -> tuple[Any, Any]:
    """Where the source word starting at offset ``first`` of each line ends (the offset of the first byte at or
    below a space after it), and whether it starts with a byte above a space and ends within the window (15 or
    16 bytes). Each word's marks (a top bit per byte) are gathered into eight bits by one multiplication."""
    np, a = steps.np, steps.arrays
    index, within = divmod(first, 8)
    gather = np.uint64(0x0102040810204080)  # bit 8i + 7 of a mark word to bit 56 + i
    marks, bits = a.t2, a.t3
    for step in range(3 if within > 1 else 2):
        into = marks if step == 0 else bits
        steps.controls_into(words[index + step], into)
        into >>= np.uint64(7)
        into *= gather
        into >>= np.uint64(56)
        if step:
            into <<= np.uint64(8 * step)
            marks |= into
    marks >>= np.uint64(within)
    marks &= np.uint64(0xFFFF)
    marks = a.t2i
    ends = np.take(_lowest_bit(np), marks, out=a.ends, mode="clip")
    ends += first
    taken = np.not_equal(marks, 0, out=a.taken)
    marks &= 1
    taken &= np.equal(marks, 0, out=a.f1)
    return ends, taken


def read_in_layout(steps: Steps, starts: Any, want_errors: bool) -> InLayout | None:
    """The lines at ``starts`` that share the first line's layout, read by fixed offsets; None when the first
    line has no time the arrays can read (the general steps take the whole pass). The arrays are the pass's
    scratch arrays (``steps.arrays``): the next pass writes over them."""
    np, a = steps.np, steps.arrays
    if not len(starts):
        return None
    classes, layout = _layout(steps, starts)
    if layout is None:
        return None
    width, dated, sign = layout
    first = width + 1  # the source word's first byte
    words = words_at(steps, starts, a.words[: first // 8 + (3 if first % 8 > 1 else 2)])
    bad, xor, wrong = a.t4, a.t0, a.t1
    for number, (index, must, expected, add, carry) in enumerate(_template_words(np, classes[:first])):
        np.bitwise_xor(words[index], expected, out=xor)  # the time and its blank
        into = bad if number == 0 else wrong
        np.bitwise_and(xor, must, out=into)
        if add:
            xor += add
            xor &= carry
            into |= xor  # high nibbles already 0 where this matters
        if number:
            bad |= wrong
    ends, taken = _source_ends(steps, words, first)
    taken &= np.equal(bad, 0, out=a.f1)
    ends += starts
    after_source = np.take(steps.frame.bytes, ends, out=a.after, mode="clip")
    blank = np.equal(after_source, 0x20, out=a.f2)
    blank |= np.equal(after_source, 0x09, out=a.f1)
    taken &= blank
    at = np.add(ends, 1, out=ends)
    level, is_level = level_of(steps, words_at(steps, at, (a.level_word,))[0], at, (a.level, a.level_same))
    taken &= is_level
    could_err = None
    if want_errors:
        source = _word_from(steps, words, first, a.source)
        at = np.add(starts, first, out=at)
        direct, is_direct = level_of(steps, source, at, (a.direct, a.direct_same))
        could_err = np.less(level, ERROR_LEVELS, out=a.could_err)
        is_direct &= np.less(direct, ERROR_LEVELS, out=a.f1)
        could_err |= is_direct
        # A ``[`` before a level word in the first place: RE2 decides.
        could_err |= np.equal(np.bitwise_and(source, np.uint64(0xFF), out=a.t0), 0x5B, out=a.f1)
    when = _word_from(steps, words, 11 if dated else 0, a.t2)
    # HH and MM as numbers: each pair's tens times ten plus its units lands in the pair's first byte.
    digits = np.bitwise_and(when, np.uint64(0x0000000F0F000F0F), out=a.t0)
    pairs = np.multiply(digits, np.uint64(10), out=a.t1)
    digits >>= np.uint64(8)
    pairs += digits
    minute = np.bitwise_and(pairs, np.uint64(0xFF), out=a.t4)
    minute *= np.uint64(100)
    pairs >>= np.uint64(24)
    pairs &= np.uint64(0xFF)
    minute += pairs
    # The zone's eight bytes, from the sign (which every line taken has where the first line has it).
    zones = _word_from(steps, words, sign, a.t2) if sign >= 0 else None
    day = a.t5  # after the last use of ``_word_from`` (its temporary)
    if dated:
        w0, w1 = words[0], words[1]
        np.bitwise_and(w0, np.uint64(0x000F0F000F0F0F0F), out=day)
        part = np.bitwise_and(w1, np.uint64(0x0F), out=a.t0)
        part <<= np.uint64(32)
        day |= part
        np.bitwise_and(w1, np.uint64(0x0F00), out=part)
        part <<= np.uint64(48)
        day |= part
        day |= np.uint64(1 << 63)
    else:
        day.fill(0)
    if zones is not None:
        if taken.all():  # most passes: every line in the first line's layout
            to_utc(np, a.t4i, day, None, zones)
        elif (rows := np.flatnonzero(taken)).size:
            to_utc(np, a.t4i, day, rows, zones[rows])
    return InLayout(taken, level, a.t4i, day, could_err)
