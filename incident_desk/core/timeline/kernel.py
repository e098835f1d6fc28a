"""The timeline's counting kernel: the time, minute and level of every line of a chunk, by array operations.

No Python runs per line. The chunk's line starts come from one compare of its bytes with a newline, read eight at
a time (``line_starts``). Lines laid out like the pass's first line are read by ``timeline_layout``; from each
other line's start the kernel reads eight bytes at a time as one 64-bit integer (an unaligned strided view of the
buffer, no copy) and decides each step of ``core.timeline``'s line pattern on all lines at once with bitwise
arithmetic: the optional date, the time, a fraction and a zone, the blanks, an optional source word, an optional
``[`` and a level word with a word boundary after it. Where RE2's reading of the pattern allows only one way
through (it does for every line: each step is either fixed or stops at the first byte of a class), the arithmetic
finds that way, so every count equals a line-by-line RE2 reading. Lines in the first line's time layout (most logs
write every time alike) are decided by one template check per eight bytes. A line in a shape the arithmetic does
not follow (7 or more fraction digits, a source word or a run of blanks longer than 64 bytes, a control byte in
the source word) is read by RE2 on its own.
"""

from __future__ import annotations

import functools
import mmap
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from incident_desk.core.log_clock import utc_minute
from incident_desk.core.timeline.layout import ERROR_LEVELS, LEVEL_WORDS, WARN, WARNING, read_in_layout
from incident_desk.core.timeline.lines import line_slices
from incident_desk.core.timeline.scratch import PassArrays, Scratch, Scratches
from incident_desk.core.timeline.zones import MINUTE_CODES, day_text, to_utc

if TYPE_CHECKING:
    from incident_desk.core.linear import LinearPattern

Key = tuple[bytes, bytes, bytes]
PAD = 512  # newlines after the data: every look past a line start stays inside the buffer and stops at a newline
_RUN_LIMIT = 64  # bytes followed in one run of blanks or one source word before RE2 takes the line
_HASH = 69  # ((first four bytes * _HASH) mod 2**32) >> 29 tells the seven four-byte prefixes apart
SLICE_BYTES = 3 * 1024 * 1024  # bytes whose lines are found at once: a whole chunk (2 MiB) and the line it ends in
# Lines decided at once: a quarter of a 2 MiB chunk of a service log (some 8K of its 32K lines) in one pass. Each
# numpy call costs about a microsecond whatever its length, so longer passes cost less a line in calls; but the
# pass's two dozen arrays of 8-byte words (``timeline_scratch``, reused, so their size costs no page faults) then
# outgrow a core's cache (2 MiB here) and every step waits on memory: 8K lines measured 15-25% less CPU a GiB
# than 32K, and less than 4K or 16K (docs/performance.md).
LINES_PER_PASS = 8 * 1024


def _np() -> Any:
    import numpy

    return numpy


@functools.cache
def constants() -> dict[str, Any]:
    np = _np()

    def every(byte: int) -> Any:
        return np.uint64(0x0101010101010101 * byte)

    masks = np.zeros(8, dtype=np.uint64)
    values = np.zeros(8, dtype=np.uint64)
    lengths = np.zeros(8, dtype=np.int64)
    indices = np.full(8, -1, dtype=np.int64)
    for index, word in enumerate(LEVEL_WORDS):
        if index == WARNING:
            continue  # shares WARN's slot; told apart by its fifth to seventh bytes
        slot = ((int.from_bytes(word[:4], "little") * _HASH) & 0xFFFFFFFF) >> 29
        assert indices[slot] < 0, "the level hash must tell the words apart"
        masks[slot] = (1 << (8 * len(word))) - 1
        values[slot] = int.from_bytes(word, "little")
        lengths[slot] = len(word)
        indices[slot] = index
    free = int(np.flatnonzero(indices < 0)[0])
    values[free], masks[free] = values[(free + 1) % 8], masks[(free + 1) % 8]  # hashes elsewhere: never equal here
    wordy = np.zeros(256, dtype=np.bool_)
    wordy[[*range(0x30, 0x3A), *range(0x41, 0x5B), *range(0x61, 0x7B), 0x5F]] = True
    return {
        "ones": every(1),
        "high": every(0x80),
        "low7": every(0x7F),
        "digit_step": every(0x76),
        "above_space": every(0x5F),
        "zero": every(0x30),
        "space": every(0x20),
        "tab": every(0x09),
        "masks": masks,
        "values": values,
        "codes": np.where(indices >= 0, indices + lengths * 16, -1),
        "wordy": wordy,
        "warning": np.uint64(int.from_bytes(b"WARNING", "little")),
        "seven": np.uint64((1 << 56) - 1),
    }


@functools.cache
def _template(template: bytes) -> tuple[Any, Any, Any, Any, Any]:
    np = _np()
    mask = value = low = step = carry = 0
    for index, char in enumerate(template):
        shift = 8 * index
        if char == ord("d"):
            mask, value = mask | 0xF0 << shift, value | 0x30 << shift
            low, step, carry = low | 0x0F << shift, step | 0x06 << shift, carry | 0x10 << shift
        else:
            mask, value = mask | 0xFF << shift, value | char << shift
    return np.uint64(mask), np.uint64(value), np.uint64(low), np.uint64(step), np.uint64(carry)


class Frame:
    """One reusable buffer for the scan: a newline, the chunk, the unfinished line after it, then ``PAD``
    newlines; viewed as bytes and as the 64-bit integer starting at every byte (no copies)."""

    def __init__(self, capacity: int) -> None:
        np = _np()
        # Anonymous memory: its pages are taken only when first written (a bytearray would zero, so touch, all of
        # the room kept for a long line).
        self.buffer = mmap.mmap(-1, 1 + capacity + PAD)
        self.buffer[0] = 0x0A
        self.bytes: Any = np.frombuffer(self.buffer, dtype=np.uint8)
        self.words: Any = np.ndarray((len(self.buffer) - 7,), dtype="<u8", buffer=self.buffer, strides=(1,))
        self.aligned: Any = np.frombuffer(self.buffer, dtype="<u8", count=len(self.buffer) // 8)

    def end_data(self, end: int) -> None:
        """Mark ``end`` as where the data stops: the bytes after it read as newlines."""
        self.buffer[end : end + PAD] = b"\n" * PAD


Tally = tuple[bytes, int, Any]  # a day's text, the first slot (minute * 8 + level), and the counts from it on


@dataclass
class ChunkLevels:
    """The counts of one chunk's lines (by key, and as arrays of counts per slot of a day: ``Tally``), how many had
    a time and a level, and the lines that may hold the first error (their starts, in order; a superset, each
    checked by RE2)."""

    counts: Counter[Key]
    tallies: list[Tally]
    parsed: int
    lines: int
    error_starts: Any  # numpy arrays: the candidates' line starts in the frame, and their line index in the chunk
    error_lines: Any


def _first_byte(marks: Any) -> Any:
    """The index of the lowest byte with its top bit set in each word (words with none: garbage), read from the
    exponent of that bit as a float."""
    np = _np()
    lowest = (marks & (~marks + np.uint64(1))).astype(np.float64).view(np.int64)
    return ((lowest >> 52) - 1030) >> 3


class _Kernel:
    """The array steps over one frame."""

    def __init__(self, frame: Frame, scratch: Scratch) -> None:
        self.np = _np()
        self.c = constants()
        self.frame = frame
        self.scratch = scratch
        self.arrays = scratch.for_pass(0)  # the pass's arrays: set for each pass

    def at(self, positions: Any) -> Any:
        return self.frame.words[positions]

    def byte(self, positions: Any) -> Any:
        return self.frame.bytes[positions]

    def nondigits(self, words: Any) -> Any:
        """Top bit set in every byte of ``words`` that is not an ASCII digit."""
        c = self.c
        shifted = words ^ c["zero"]
        return (shifted | ((shifted & c["low7"]) + c["digit_step"])) & c["high"]

    def equal_bytes(self, words: Any, every: Any) -> Any:
        """Top bit set in every byte equal to the byte repeated in ``every``."""
        c = self.c
        diff = words ^ every
        return ~(((diff & c["low7"]) + c["low7"]) | diff) & c["high"]

    def controls(self, words: Any) -> Any:
        """Top bit set in every byte at or below a space."""
        c = self.c
        return ~(((words & c["low7"]) + c["above_space"]) | words) & c["high"]

    def controls_into(self, words: Any, out: Any) -> Any:
        """``controls``, written into ``out``."""
        np, c = self.np, self.c
        np.bitwise_and(words, c["low7"], out=out)
        out += c["above_space"]
        out |= words
        np.invert(out, out=out)
        out &= c["high"]
        return out

    def fits(self, words: Any, template: bytes) -> Any:
        """Whether each word starts with ``template``: ``d`` an ASCII digit, any other byte itself."""
        mask, value, low, step, carry = _template(template)
        ok = (words & mask) == value  # literal bytes, and a digit's high nibble (3)
        if step:
            ok &= (((words & low) + step) & carry) == 0  # a digit's low nibble at most 9: adding 6 carries past it
        return ok

    def is_blank(self, values: Any) -> Any:
        return (values == 0x20) | (values == 0x09)

    def skip_blanks(self, positions: Any) -> tuple[Any, Any]:
        """The first byte at or after each position that is not a space or a tab, and where that was not found
        within ``_RUN_LIMIT`` bytes."""
        np, c = self.np, self.c
        found = positions.copy()
        lost = np.zeros(len(positions), dtype=np.bool_)
        todo = np.flatnonzero(self.is_blank(self.byte(positions)))
        step = 0
        while len(todo) and step < _RUN_LIMIT:
            words = self.at(found[todo])
            other = (self.equal_bytes(words, c["space"]) | self.equal_bytes(words, c["tab"])) ^ c["high"]
            done = other != 0
            hit = todo[done]
            found[hit] += _first_byte(other[done])
            found[todo[~done]] += 8
            todo = todo[~done]
            step += 8
        lost[todo] = True
        return found, lost

    def word_ends(self, positions: Any) -> tuple[Any, Any]:
        """The first byte at or below a space at or after each position, and where none was within the limit."""
        np = self.np
        near = self.controls(self.at(positions))
        far = self.controls(self.at(positions + 8))
        in_near = near != 0
        found = positions + _first_byte(np.where(in_near, near, far)) + np.where(in_near, 0, 8)
        todo = np.flatnonzero(~in_near & (far == 0))
        if len(todo):
            found[todo] = positions[todo] + 16
        step = 16
        while len(todo) and step < _RUN_LIMIT:
            marks = self.controls(self.at(found[todo]))
            done = marks != 0
            found[todo[done]] += _first_byte(marks[done])
            found[todo[~done]] += 8
            todo = todo[~done]
            step += 8
        lost = np.zeros(len(positions), dtype=np.bool_)
        lost[todo] = True
        return found, lost

    def level_at(self, positions: Any) -> Any:
        """Which level word (its index in ``LEVEL_WORDS``, or -1) starts at each position, after an optional
        ``[``, with a word boundary after it."""
        np, c = self.np, self.c
        words = self.at(positions)
        bracketed = np.flatnonzero((words & np.uint64(0xFF)) == 0x5B)
        if len(bracketed):
            positions = positions.copy()
            positions[bracketed] += 1
            words[bracketed] = self.at(positions[bracketed])
        slot = (((words & np.uint64(0xFFFFFFFF)) * np.uint64(_HASH)) & np.uint64(0xFFFFFFFF)) >> np.uint64(29)
        slot = slot.astype(np.intp)
        same = (words & c["masks"][slot]) == c["values"][slot]
        code = c["codes"][slot]  # the word's index, and its length times 16
        warning = (code == WARN + 4 * 16) & ((words & c["seven"]) == c["warning"])
        code = np.where(warning, WARNING + 7 * 16, code)
        after = self.byte(positions + (code >> 4))  # the byte after the word (a byte read is cheap)
        return np.where(same & ~c["wordy"][after], code & 15, -1)

    def stamps(self, starts: Any) -> tuple[Any, Any, Any, Any, Any, Any, Any, Any]:
        """The time at each line start, in any shape the pattern takes: the first two words, whether a date came
        first, the eight bytes of the time, whether the line has a time, whether RE2 must read it, where the
        blank after the time (and its fraction and zone) is, and where its zone's sign is (-1: no offset)."""
        np = self.np
        w0 = self.at(starts)
        w1 = self.at(starts + 8)
        third = (w1 >> np.uint64(16)) & np.uint64(0xFF)
        dated = self.fits(w0, b"dddd-dd-") & self.fits(w1, b"dd") & ((third == 0x54) | (third == 0x20))
        clock = starts + np.where(dated, 11, 0)
        when = self.at(clock)
        timed = self.fits(when, b"dd:dd:dd")
        after = self.at(clock + 8)  # what follows the seconds: a fraction, a zone, blanks
        first_byte = after & np.uint64(0xFF)
        fraction = (first_byte == 0x2E) | (first_byte == 0x2C)
        run = _first_byte(self.nondigits(after >> np.uint64(8)) | np.uint64(1 << 63))  # 7 when all were digits
        undecided = timed & fraction & (run >= 7)
        timed &= ~fraction | ((run >= 1) & (run < 7))
        zone_at = clock + 8 + np.where(fraction, run + 1, 0)
        zone_byte = self.byte(zone_at)
        signed = (zone_byte == 0x2B) | (zone_byte == 0x2D)
        zone_length = np.where(zone_byte == 0x5A, 1, 0)
        signed_rows = np.flatnonzero(signed & timed)
        zone = np.full(len(starts), -1, dtype=np.int64)
        if len(signed_rows):
            offset = self.at(zone_at[signed_rows])
            with_colon = self.fits(offset >> np.uint64(8), b"dd:dd")
            without = self.fits(offset >> np.uint64(8), b"dddd")
            zone_length[signed_rows] = np.where(with_colon, 6, np.where(without, 5, 0))
            zone[signed_rows] = np.where(zone_length[signed_rows] > 0, zone_at[signed_rows], -1)
        gap = zone_at + zone_length
        timed &= self.is_blank(self.byte(gap))
        return w0, w1, dated, when, timed, undecided, gap, zone

    def in_utc(self, minute: Any, day: Any, zone: Any) -> None:
        """Move ``minute`` (HH * 100 + MM) and ``day`` (a day key, 0 for a bare time) of the lines whose zone's sign
        is at ``zone`` (-1: no offset) to UTC, in place, as ``log_clock.utc_minute`` moves one line's."""
        rows = self.np.flatnonzero(zone >= 0)
        if len(rows):
            to_utc(self.np, minute, day, rows, self.at(zone[rows]))

    def stamps_like_the_first(self, starts: Any) -> tuple[Any, Any, Any, Any, Any, Any, Any, Any]:
        """``stamps``, faster where lines share the first line's time layout (most logs): a line whose bytes up
        to that layout's blank are of the same classes (digit for digit, other bytes equal) is read the same
        way by the pattern, so one template check per eight bytes decides it. Other lines: ``stamps``."""
        np = self.np
        head = self.stamps(starts[:1])
        if not len(starts) or not head[4][0] or head[5][0]:
            return self.stamps(starts)
        start = int(starts[0])
        width = int(head[6][0]) - start
        template = bytes(b"d"[0] if 0x30 <= byte <= 0x39 else byte for byte in self.frame.buffer[start : start + width])
        words = [self.at(starts + index) for index in range(0, width, 8)]
        fit = self.is_blank(self.byte(starts + width))
        for index, word in enumerate(words):
            fit &= self.fits(word, template[8 * index : 8 * index + 8])
        dated = np.full(len(starts), bool(head[2][0]))
        w0 = words[0]
        w1 = words[1] if len(words) > 1 else self.at(starts + 8)
        when = (w1 >> np.uint64(24)) | (words[2] << np.uint64(40)) if head[2][0] else w0  # the time's bytes
        undecided = np.zeros(len(starts), dtype=np.bool_)
        gap = starts + width
        # A line of the first line's classes has its zone's sign where the first line has it (if it has one).
        zone = starts + (int(head[7][0]) - start) if head[7][0] >= 0 else np.full(len(starts), -1, dtype=np.int64)
        other = np.flatnonzero(~fit)
        if len(other):
            w0, w1, when, gap = w0.copy(), w1.copy(), when.copy(), gap.copy()
            results = self.stamps(starts[other])
            for into, value in zip((w0, w1, dated, when, fit, undecided, gap, zone), results, strict=True):
                into[other] = value
        return w0, w1, dated, when, fit, undecided, gap, zone

    def parse(self, starts: Any, want_errors: bool) -> tuple[Any, Any, Any, Any, Any]:
        """For each line start: its level (or -1), minute (HH * 100 + MM), day key (0 without a date), whether
        RE2 must read it instead, and whether it may be an error line (for the first error)."""
        np = self.np
        w0, w1, dated, when, timed, undecided, gap, zone = self.stamps_like_the_first(starts)
        first, lost = self.skip_blanks(gap + 1)
        undecided |= timed & lost
        ends, lost = self.word_ends(first)
        undecided |= timed & lost
        end_byte = self.byte(ends)
        # A byte at or below a space that is not RE2's \s (\t \n \f \r space) belongs to the word: RE2 decides.
        whitespace = self.is_blank(end_byte) | (end_byte == 0x0A) | (end_byte == 0x0C) | (end_byte == 0x0D)
        undecided |= timed & ~whitespace
        sourced = timed & ~undecided & (ends > first) & self.is_blank(end_byte)
        second, lost = self.skip_blanks(ends + 1)
        undecided |= sourced & lost
        sourced &= ~lost
        level = np.where(sourced, self.level_at(second), -1)
        direct = np.flatnonzero(timed & ~undecided & ((level < 0) | want_errors))
        direct_level = self.level_at(first[direct])
        if want_errors:
            could_err = (level >= 0) & (level < ERROR_LEVELS)
            could_err[direct] |= (direct_level >= 0) & (direct_level < ERROR_LEVELS)
        else:
            could_err = np.zeros(0, dtype=np.bool_)
        level[direct] = np.where(level[direct] >= 0, level[direct], direct_level)
        level = np.where(timed & ~undecided, level, -1)
        # HH and MM as numbers: each pair's tens times ten plus its units lands in the pair's first byte.
        digits = when & np.uint64(0x0000000F0F000F0F)
        pairs = digits * np.uint64(10) + (digits >> np.uint64(8))
        minute = ((pairs & np.uint64(0xFF)) * np.uint64(100) + ((pairs >> np.uint64(24)) & np.uint64(0xFF))).astype(
            np.int64
        )
        day = (w0 & np.uint64(0x000F0F000F0F0F0F)) | ((w1 & np.uint64(0x0F)) << np.uint64(32))
        day |= ((w1 & np.uint64(0x0F00)) << np.uint64(48)) | np.uint64(1 << 63)
        day = np.where(dated, day, np.uint64(0))
        self.in_utc(minute, day, np.where(timed, zone, -1))
        return level, minute, day, undecided, could_err


@functools.cache
def minute_text(minute: int) -> bytes:
    return b"%02d:%02d" % divmod(minute, 100)


def _tally(level: Any, minute: Any, day: Any, found: Counter[Key], tallies: list[Tally], arrays: PassArrays) -> int:
    """Counts per (day, minute, level) of the lines with a level: one array of counts per slot where the pass
    holds one day (the common case, no Python per minute), else into ``found`` by key. Returns those lines."""
    np, a = _np(), arrays
    with_level = np.greater_equal(level, 0, out=a.with_level)
    count = int(np.count_nonzero(with_level))
    if not count:
        return 0
    if count < len(level):
        rows = np.flatnonzero(with_level)
        level = np.take(level, rows, out=a.tally_level[:count], mode="clip")
        minute = np.take(minute, rows, out=a.tally_minute[:count], mode="clip")
        day = np.take(day, rows, out=a.tally_day[:count], mode="clip")
    slot = np.multiply(minute, 8, out=a.t0i[:count])
    slot += level
    if day.min() == day.max():
        lowest = int(slot.min())
        slot -= lowest
        tallies.append((day_text(int(day[0])), lowest, np.bincount(slot)))  # bins: the pass's span
        return count
    unique_days, which = np.unique(day, return_inverse=True)
    keys, counts = np.unique(which.reshape(-1) * (MINUTE_CODES * 8) + slot, return_counts=True)
    day_texts = [day_text(int(key)) for key in unique_days.tolist()]
    for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
        day_index, rest = divmod(key, MINUTE_CODES * 8)
        found[(day_texts[day_index], minute_text(rest >> 3), LEVEL_WORDS[rest & 7])] += count
    return len(level)


def _read_alone(frame: Frame, start: int, line: LinearPattern, found: Counter[Key]) -> int:
    """Count the line at ``start`` as RE2 reads it (a shape the arrays do not follow); 1 if it has a level."""
    framed_line = bytes(frame.buffer[start - 1 : frame.buffer.find(b"\n", start)])
    for _whole, day, minute, zone, level in line.finditer(framed_line):
        written = (framed_line[day[0] : day[1]], framed_line[minute[0] : minute[1]], framed_line[zone[0] : zone[1]])
        found[(*utc_minute(*written), framed_line[level[0] : level[1]])] += 1
        return 1
    return 0


def _parse(kernel: _Kernel, starts: Any, want_errors: bool) -> tuple[Any, Any, Any, Any, Any]:
    """``_Kernel.parse``, with the lines in the first line's layout read by ``timeline_layout`` first."""
    np = _np()
    laid = read_in_layout(kernel, starts, want_errors)
    if laid is None:
        return kernel.parse(starts, want_errors)
    undecided = kernel.arrays.undecided
    undecided.fill(False)
    could_err = laid.could_err if want_errors else np.zeros(0, dtype=np.bool_)
    rest = np.flatnonzero(np.logical_not(laid.taken, out=kernel.arrays.not_taken))
    if len(rest):
        level, minute, day, undecided[rest], odd_err = kernel.parse(starts[rest], want_errors)
        laid.level[rest], laid.minute[rest], laid.day[rest] = level, minute, day
        if want_errors:
            could_err[rest] = odd_err
    return laid.level, laid.minute, laid.day, undecided, could_err


def levels_in(
    frame: Frame,
    size: int,
    line: LinearPattern,
    *,
    want_errors: bool,
    slice_bytes: int = SLICE_BYTES,
    lines_per_pass: int = LINES_PER_PASS,
    scratches: Scratches | None = None,
) -> ChunkLevels:
    """The counts of the lines of ``frame.buffer[:size]`` (a newline, then whole lines), as ``line.finditer``
    would find them line by line; with ``want_errors``, the starts of the lines that may hold an error. The lines
    are taken ``slice_bytes`` at a time (then ``lines_per_pass`` at a time), which bounds every per-line array.
    ``scratches``: the scan's scratch arrays (this thread takes its own set; default: a set for this chunk)."""
    np = _np()
    scratch = (scratches or Scratches()).mine()
    kernel = _Kernel(frame, scratch)
    found: Counter[Key] = Counter()
    tallies: list[Tally] = []
    parsed = lines = 0
    error_starts: list[Any] = []
    error_lines: list[Any] = []
    for starts in line_slices(frame, size, slice_bytes, scratch):
        for begin in range(0, len(starts), lines_per_pass):
            part = starts[begin : begin + lines_per_pass]
            kernel.arrays = scratch.for_pass(len(part))
            level, minute, day, undecided, could_err = _parse(kernel, part, want_errors)
            parsed += _tally(level, minute, day, found, tallies, kernel.arrays)
            for row in np.flatnonzero(undecided).tolist():
                parsed += _read_alone(frame, int(part[row]), line, found)
            if want_errors:
                candidates = np.flatnonzero(np.logical_or(could_err, undecided, out=kernel.arrays.candidates))
                error_starts.append(part[candidates])
                error_lines.append(candidates + (lines + begin))
        lines += len(starts)
    nothing = np.zeros(0, dtype=np.int64)
    return ChunkLevels(
        found,
        tallies,
        parsed,
        lines,
        np.concatenate(error_starts) if error_starts else nothing,
        np.concatenate(error_lines) if error_lines else nothing,
    )
