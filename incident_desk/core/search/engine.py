"""Log search: the lines matching a pattern, from a cursor on, until a match limit or the scan's budget.

RE2 scans raw bytes a window at a time, without the interpreter lock, after a SIMD prefilter finds the lines that
hold one of the pattern's literals; only candidate lines are decoded, redacted and checked again as shown. Runs
of whole lines are read in fixed stretches into a small pool of buffers (``core.log_parallel``), each stretch
read, searched for where its first raw match may be and for its long lines by one thread while the bytes are in
cache, so memory stays flat and the scan skips a run without a candidate. Newlines are counted only where a number
is needed, as ripgrep does: a run with a numbered line is counted from its bytes, the runs before it read again
(``_Search.settle``), and counts are remembered for bytes searched again (``core.run_indexes``). A search that
finds nothing counts nothing.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from incident_desk.core.activity import ACTIVITY, main_thread_finished
from incident_desk.core.helper_pool import HELPERS, default_processes, line_start_at
from incident_desk.core.scan_budget import SCAN_BUDGET_BYTES, ScanBudget, StopReason
from incident_desk.core.search.literals import LiteralSet
from incident_desk.core.search.paging import (
    MAX_LINE_BYTES,
    START,
    Cursor,
    Line,
    LogSource,
    Redactor,
    check_cursor,
    cut,
    decode,
    decode_after,
    identity,
    may_dangle,
    opened,
)
from incident_desk.core.search.parallel import ParallelRuns, PreparedRun, free_workers
from incident_desk.core.search.processes import STRETCH_BYTES, helped_scan
from incident_desk.core.search.run_indexes import RUN_INDEXES, RunIndex
from incident_desk.core.search.runs import (
    ROW,
    HugeLine,
    LineNumbers,
    RawReader,
    Run,
    RunState,
    long_lines,
    newlines_and_long_lines,
    undecodable_lines,
)
from incident_desk.core.search.skim import skim

if TYPE_CHECKING:
    from incident_desk.core.redaction.face import Redaction
    from incident_desk.core.search.pattern import SearchPattern

_WINDOW_SECONDS = 0.02  # a window's scan time: how often budgets and cancellation are looked at
_PAUSE_SECONDS = 0.002  # after a window of candidates, the interpreter lock is left to other threads this long
# What counting a run left uncounted costs, read again and counted (conservative): when the time left would not
# cover counting what is left uncounted, it is counted at once, so a scan stopped by its time budget can still say
# where it stopped (its cursor's line number) within about that budget.
_SETTLE_SECONDS_PER_BYTE = 1e-9
# The least a skim splits between two threads: below it the second thread's start costs more than it saves.
SPLIT_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class SearchSizes:
    """The sizes a search works in. The defaults keep memory flat; tests pass small ones to put every boundary
    (reads, windows, index pieces) through a small log.

    ``read_bytes``: each read buffer (a longer line is skipped to its end, its head kept);
    ``first_window``/``min_window``: the first window RE2 scans, and the least one as windows are sized to a
    scan time; ``index_piece``: how much of a run the newline index compares at a time (a multiple of ``ROW``);
    ``workers``: how many threads read, index and prefilter runs (0: the searching thread; None: decided by the
    machine's load, ``log_parallel.free_workers``); ``stretch_bytes``: a helper process's share at a time, and a
    log of two or more of them is prefiltered by helpers (``core.search_processes``); ``split_bytes``: a skim with
    this much left reads its second half in a second thread when a core is free (``core.search.skim``; 0: never).
    """

    read_bytes: int = 1024 * 1024
    first_window: int = 256 * 1024
    min_window: int = 16 * 1024
    index_piece: int = 128 * ROW
    workers: int | None = None
    stretch_bytes: int = STRETCH_BYTES
    split_bytes: int = SPLIT_BYTES

    def __post_init__(self) -> None:
        if self.read_bytes <= MAX_LINE_BYTES:
            raise ValueError(f"read_bytes must exceed a line's shown length ({MAX_LINE_BYTES}): {self.read_bytes}")
        if not 0 < self.min_window <= self.first_window:
            raise ValueError(f"windows must be positive, the first at least the least: {self}")
        if self.index_piece <= 0 or self.index_piece % ROW:
            raise ValueError(f"index_piece must be a positive multiple of {ROW}: {self.index_piece}")
        if self.workers is not None and self.workers < 0:
            raise ValueError(f"workers must not be negative: {self.workers}")
        if self.stretch_bytes <= 0:
            raise ValueError(f"stretch_bytes must be positive: {self.stretch_bytes}")
        if self.split_bytes < 0:
            raise ValueError(f"split_bytes must not be negative: {self.split_bytes}")


@dataclass(frozen=True)
class SearchResult:
    matches: list[Line]
    next_cursor: Cursor | None
    scanned_bytes: int
    total_bytes: int
    stopped: StopReason


def _keep(run: Run) -> None:
    """Where a finished scan's runs go: nowhere, their buffers are freed with the reader."""


# A line ending in a run of base64 may be the last line of a private key's body; the key block above it says so.
_BASE64_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _ends_in_base64(raw: bytes) -> bool:
    """Whether ``raw`` ends (before a carriage return) in two or more base64 characters: two byte tests."""
    tail = raw[-3:-1] if raw.endswith(b"\r") else raw[-2:]
    return len(tail) == 2 and not tail.translate(None, _BASE64_BYTES)


def _all_base64(raw: bytes) -> bool:
    """Whether ``raw`` (before a carriage return) is base64 alone, as a PEM key body line is: one byte test."""
    line = raw[:-1] if raw.endswith(b"\r") else raw
    return len(line) >= 2 and not line.translate(None, _BASE64_BYTES)


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
        budget: ScanBudget,
        sizes: SearchSizes,
        fileno: int,
    ) -> None:
        self.pattern, self.finder, self.redactor, self.limit = pattern, finder, redactor, limit
        # The literals say where a match of the pattern itself may be; one of redaction's triggers may be elsewhere.
        literals = (pattern.literal,) if pattern.literal is not None else pattern.prefilter
        self.literals = literals if finder is pattern.block else None
        self.fileno = fileno  # read with pread for context, never moving the scan's own position
        status = os.fstat(fileno)
        self.log = (status.st_dev, status.st_ino)  # whose run indexes are remembered
        self.start, self.budget, self.sizes = start, budget, sizes
        self.matches: list[Line] = []
        # The number of the line at self.offset, once the pending run's count and the uncounted runs' are added.
        self._line = start.line
        self.uncounted: list[tuple[int, int]] = []  # runs (offset, length) whose newlines are not counted yet
        self.uncounted_bytes = 0
        self.before_uncounted = (start.offset, start.line)  # where the first uncounted run starts, and its number
        self.recount: tuple[bytearray, Any] | None = None  # settle's buffer and numpy scratch, made when needed
        self.skim_buffer: bytearray | None = None  # what ``core.search.skim`` reads into, made when needed
        self.pending: RunState | None = None  # the last run scanned, until finish_pending
        self.offset = start.offset  # how far the scan has got: always the start of a line
        self.stopped: StopReason | None = None
        self.window = sizes.first_window
        self.indexer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-index")
        import stringzilla  # only searches need it (and numpy): imported on the first, not at start-up

        # A SIMD substring search: RE2 finds "needle-xyz" by looking for its first byte, n, which is everywhere in a
        # log, and bytes.find is slower still (docs/performance.md has the figures).
        # One case-insensitive pass finds all the case variants of a window (a superset of RE2's matches of it).
        folded = stringzilla.utf8_uncased_search
        self.prefilter = None if self.literals is None else LiteralSet(self.literals, stringzilla.find, folded)
        self.searches = () if self.prefilter is None else self.prefilter.searches
        self.release: Callable[[Run], None] = _keep  # a finished run's buffer, back to the reader

    @property
    def line(self) -> int:
        """The number of the line at ``self.offset`` (with the pending run's count added): the runs left uncounted
        are counted first (``settle``)."""
        self.settle()
        return self._line

    @line.setter
    def line(self, number: int) -> None:
        # Set from a number just worked out (``LineNumbers.at`` or ``line`` itself), which settled what came before.
        self._line = number
        self.uncounted.clear()
        self.uncounted_bytes = 0

    def settle(self) -> None:
        """Count the newlines of the runs left uncounted, reading them again, and remember their indexes.

        A run without a candidate is not counted when scanned (ripgrep numbers lines lazily too): a search that
        finds nothing, or only near the start, never pays for counting a whole log. Counted runs are remembered
        (``core.run_indexes``), so a log searched again is numbered from the counts."""
        if not self.uncounted:
            return
        buffer = self._recount()[0]
        with memoryview(buffer) as view:
            for offset, length in self.uncounted:
                got = os.preadv(self.fileno, [view[:length]], offset) if length else 0
                # A run that shrank since it was scanned is counted as it is now, not remembered.
                self._line += self._counted(Run(offset, buffer, got, terminated=True), remember=got == length)
        self.uncounted.clear()
        self.uncounted_bytes = 0

    def back_to_counted(self) -> None:
        """Stop where the count got to, before the first run left uncounted, rather than count the rest: for a
        cancelled scan, whose caller has gone. Every match found lies before it (numbering one counts all before)."""
        if self.uncounted:
            (self.offset, self._line), self.pending = self.before_uncounted, None
            self.uncounted.clear()
            self.uncounted_bytes = 0

    def _recount(self) -> tuple[bytearray, Any]:
        """``settle``'s read buffer and the numpy scratch runs are counted with (once numpy is loaded), made the
        first time."""
        if self.recount is None:
            self.recount = bytearray(self.sizes.read_bytes), None
        if self.recount[1] is None and "numpy" in sys.modules:
            import numpy as np

            self.recount = self.recount[0], np.empty(self.sizes.index_piece, dtype=np.bool_)
        return self.recount

    def _counted(self, run: Run, *, remember: bool = True) -> int:
        """The newlines of ``run``, counted now and remembered (``core.run_indexes``): by numpy at memory speed
        once it is loaded (``DeskApp.load_search_stack`` loads it when no search is under way); until then by
        ``bytes.count``, since importing numpy here would hold the interpreter from the event loop."""
        if "numpy" not in sys.modules:
            newlines, long = run.buffer.count(b"\n", 0, run.length), long_lines(run.buffer, run.length)
        else:
            newlines, long = newlines_and_long_lines(run, self._recount()[1])
        if remember:
            digest = RUN_INDEXES.digest(run.buffer, run.length)
            RUN_INDEXES.put((*self.log, run.offset, run.length), digest, RunIndex(newlines, tuple(long), None))
        return newlines

    def clear_until(self, buffer: bytearray, length: int) -> int:
        """A line start in a run before which no line holds a raw match (``length``: none in the run does).

        Run by whoever reads the run (a worker, or the scan itself), over the whole run or as much of it as RE2
        covers in a window's time; the scan skips its windows before it. Windows are whole lines, so a match a
        window holds is one the run holds too.
        """
        if self.literals is not None:
            hits = [find(buffer, literal, 0, length) for find, literal in self.searches]
            found = min((hit for hit in hits if hit >= 0), default=-1)
            return length if found < 0 else buffer.rfind(b"\n", 0, found) + 1
        # RE2 a window of whole lines at a time, for at most a window's scan time: a slow pattern then delays
        # the scan's look at its budgets (reading inline) no more than a window of its own would.
        position, began = 0, time.monotonic()
        with memoryview(buffer) as view:
            while position < length:
                end = buffer.find(b"\n", min(position + self.sizes.first_window, length) - 1, length) + 1 or length
                match = self.finder.search(view[position:end])
                if match is not None:
                    return buffer.rfind(b"\n", 0, position + match.start()) + 1
                position = end
                if time.monotonic() - began >= _WINDOW_SECONDS:
                    break
        return position

    def should_stop(self, offset: int, *, out_of_bytes: bool = False) -> bool:
        """Whether a budget ran out or the call was cancelled; only once the scan has moved, so each call does.

        ``out_of_bytes``: the next line would take the scan past its byte budget.
        """
        if offset == self.start.offset:
            return False
        self.stopped = self.budget.stop_reason(offset - self.start.offset, out_of_bytes=out_of_bytes)
        return self.stopped is not None

    def consider(self, number: int, raw: bytes, true_length: int, offset: int) -> None:
        """Decode and redact one candidate line; keep it if the pattern matches what would be shown."""
        text = decode(cut(raw, true_length), self.redactor)
        # A key body line may be masked only by its block: a pattern aimed at the mask must see it so.
        maybe_masked_by_block = not self.pattern.mask_blind and _all_base64(raw)
        if self.redactor is not identity and (maybe_masked_by_block or self.pattern.matches(text)):
            if _ends_in_base64(raw):
                # A private key's short last body line is only recognisable by the key block above it: shown
                # alone, it would be unmasked. Redact it as a page would, with the lines before it.
                text = self._redacted_in_context(raw, true_length, offset)
            before = self._line_before(offset)
            if before is not None and may_dangle(before):
                # The value of a name that ends the line before ("password:" then the value).
                text = decode_after(before, text.encode("utf-8", "surrogatepass"), self.redactor)
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
        """The line at ``offset`` as shown after redacting it together with up to _KEY_CONTEXT_BYTES on each side:
        the block's BEGIN above, and its END below, which decides whether a body line with a log prefix is key."""
        start = max(0, offset - _KEY_CONTEXT_BYTES)
        before = os.pread(self.fileno, offset - start, start)
        if start > 0:
            before = before[before.find(b"\n") + 1 :]  # from the first whole line
        if b"private" not in before.lower():  # no key block began above: the line alone was right
            return decode(cut(raw, true_length), self.redactor)
        after = os.pread(self.fileno, _KEY_CONTEXT_BYTES, offset + true_length + 1)
        after = after[: after.rfind(b"\n") + 1] if len(after) == _KEY_CONTEXT_BYTES else after
        # Redaction keeps the number of lines, so the line is the one after as many newlines as ``before`` has.
        shown = decode(before + cut(raw, true_length) + (b"\n" + after if after else b""), self.redactor)
        return shown.split("\n")[before.count(b"\n")]

    def finish_pending(self) -> bool:
        """Finish the previous run: its special lines left after its last candidate, and its newline count (known,
        counted now because a line of it was numbered, or left uncounted for ``settle``).

        Deferred so that finding its special lines overlaps with reading and scanning the next run; done before
        that run numbers or shows a line, stops, or ends (after which the previous run's buffer is read into).
        True when one of its lines reached the match limit.
        """
        pending, self.pending = self.pending, None
        if pending is None:
            return False
        for start, end in pending.specials_before(pending.run.length + 1):
            if self._candidate(pending, start, end):
                return True
        newlines = pending.newlines()
        if newlines is None and pending.numbers.line is not None:
            # A line of it was numbered, so what came before is counted: count it too, from the bytes scanned.
            newlines = self._counted(pending.run)
        self._add(pending.run.offset, pending.run.length, newlines)
        self.release(pending.run)
        return False

    def _add(self, offset: int, length: int, newlines: int | None) -> None:
        """Number on past a run: by its count, or (None) by leaving it for ``settle``, counted at once when the
        time left would not cover counting all that is left."""
        if newlines is not None:
            self._line += newlines
            return
        if not self.uncounted:
            self.before_uncounted = (offset, self._line)
        self.uncounted.append((offset, length))
        self.uncounted_bytes += length
        if self.uncounted_bytes * _SETTLE_SECONDS_PER_BYTE >= self.budget.deadline - time.monotonic():
            self.settle()

    def pass_run(self, offset: int, length: int, newlines: int | None) -> None:
        """Move past a run at ``self.offset`` that holds no candidate (``core.search.skim``)."""
        self._add(offset, length, newlines)
        self.offset = offset + length

    def within_bytes(self, end: int) -> bool:
        """Whether scanning up to ``end`` stays within the byte budget."""
        return end - self.start.offset <= self.budget.max_bytes

    def huge_line(self, line: HugeLine) -> None:
        if self.finish_pending() or self.should_stop(line.offset):
            return
        self.consider(self.line, line.head, line.length, line.offset)
        self.line += 1
        self.offset = line.offset + line.length + 1

    def run(self, run: Run) -> None:
        """Scan one run of lines window by window; only candidate lines are decoded, redacted and re-checked.

        The run's long (and undecodable) lines are found, and its remembered newline count looked up, on the
        indexer thread while this thread scans it and reads and scans the next; the scan waits for that index only
        to number a candidate or where it stops, and at the next run's end (see ``finish_pending``).
        """
        if isinstance(run, PreparedRun):
            index, clear_until = run.index, run.clear_until
        else:  # a run read line by line, indexed on the indexer thread
            index, clear_until = self.indexer.submit(self._index, run), 0
        state = RunState(run, index, LineNumbers(run.buffer, lambda: self.line))
        buffer, length = run.buffer, run.length

        def candidate(start: int, end: int) -> bool:
            return self.finish_pending() or self._candidate(state, start, end)

        position = 0
        candidates = 0
        with memoryview(buffer) as view:
            while position < length:
                end = self._window_end(run, position)
                over_bytes = run.offset + end - self.start.offset > self.budget.max_bytes
                if self.should_stop(run.offset + position, out_of_bytes=over_bytes):
                    stopped, self.stopped = self.stopped, None  # the previous run's lines come first
                    if self.finish_pending():
                        return
                    self.stopped = stopped
                    for start, stop in state.specials_before(position):
                        if self._candidate(state, start, stop):
                            return
                    if state.numbers.line is None:  # nothing numbered here: the runs before may stay uncounted
                        self.offset = run.offset + position
                        self._line += buffer.count(b"\n", 0, position)
                    else:
                        self.offset, self.line = run.offset + position, state.numbers.at(position)
                    return
                if end <= clear_until:  # no line of this window holds a raw match
                    position = end
                    continue
                began = time.monotonic()
                hit_from = position
                literals = None if self.prefilter is None else self.prefilter.window(buffer, end)
                while hit_from < end:
                    search_from, search_end = hit_from, end
                    if literals is not None:
                        # Every match contains one of the literals: RE2 runs only on the lines that have one.
                        found = literals.first(hit_from)
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
                    if time.monotonic() - began >= _WINDOW_SECONDS:
                        # Candidates decided for a window's time: the window ends at this line, so budgets and
                        # cancellation are looked at as often however dense the candidates (a first window too).
                        end = min(hit_from, end)
                        break
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

    def _index(self, run: Run) -> tuple[int | None, list[tuple[int, int]]]:
        """The run's newline count (None: not counted, see ``settle``) and its special lines: too long to scan
        raw, or (when it matters) not UTF-8.

        Remembered across searches for the same bytes at the same place of the same log (``core.run_indexes``);
        a run not seen before has its long lines found without counting its newlines.
        """
        key = (*self.log, run.offset, run.length)
        digest = RUN_INDEXES.digest(run.buffer, run.length)
        known = RUN_INDEXES.get(key, digest)
        blind = self.pattern.replacement_blind
        if known is None:
            specials = long_lines(run.buffer, run.length)
            if not blind:
                specials = sorted(set(specials) | set(undecodable_lines(run)))
            return None, specials
        if not blind and known.undecodable is None:
            known = dataclasses.replace(known, undecodable=tuple(undecodable_lines(run)))
            RUN_INDEXES.put(key, digest, known)
        if blind or not known.undecodable:
            return known.newlines, list(known.long_lines)
        return known.newlines, sorted(set(known.long_lines) | set(known.undecodable))

    def _candidate(self, state: RunState, start: int, end: int) -> bool:
        """Consider the line at ``start``..``end`` of a run; True when that stopped the scan (the match limit)."""
        number = state.numbers.at(start)
        run = state.run
        self.consider(number, bytes(run.buffer[start:end]), end - start, run.offset + start)
        if self.stopped is None:
            return False
        self.offset, self.line = run.offset + end + 1, number + 1
        return True

    def _window_end(self, run: Run, position: int) -> int:
        """The end of the next window: whole lines, about ``self.window`` bytes of them, within the byte budget."""
        buffer, length = run.buffer, run.length
        left = self.budget.max_bytes - (run.offset + position - self.start.offset)
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
        self.window = int(min(self.sizes.read_bytes, max(self.sizes.min_window, rate * _WINDOW_SECONDS)))


def load_numpy_when_quiet(quiet_seconds: float = 1.0, every: float = 0.05) -> bool:
    """Import numpy once nothing has run for ``quiet_seconds`` (looking ``every`` seconds): its import holds the
    interpreter, so not while a search or another request runs, nor between a model's searches in a row.
    Blocking: a loader's thread calls it; a search counts newlines without numpy until it is loaded. Not once
    the main thread has finished (the process is exiting, and waits for the loader): False then."""
    if not ACTIVITY.wait_until_quiet(quiet_seconds, every, unless=main_thread_finished):
        return False
    importlib.import_module("numpy")
    return True


def search(
    source: LogSource,
    pattern: SearchPattern,
    *,
    cursor: Cursor = START,
    limit: int,
    byte_budget: int = SCAN_BUDGET_BYTES,
    time_budget: float | None = None,
    redaction: Redaction | None = None,
    cancelled: threading.Event | None = None,
    sizes: SearchSizes = SearchSizes(),
    processes: int | None = None,
) -> SearchResult:
    """Lines matching ``pattern`` from ``cursor`` on, until ``limit`` matches, a budget, cancellation or the end.

    RE2 scans raw bytes a window at a time, without the interpreter lock. Only candidate lines are decoded and
    redacted, and a line is returned only if the pattern matches its text as shown (redacted, cut), so a search
    cannot probe a secret's value. Candidates are the lines with a raw match, plus every line whose shown text
    could match where its raw bytes do not: lines redaction may change (unless the pattern cannot touch the
    mask), lines cut for length, and lines that are not UTF-8 (unless the pattern cannot match U+FFFD). Each call
    moves on by at least one line, however long, so paging with next_cursor always ends. ``time_budget``,
    ``byte_budget`` and ``cancelled`` make the scan's ``ScanBudget``. ``processes``: helper processes that
    prefilter a big log's stretches for a pattern with literals (default
    ``helper_pool.default_processes()``; 0: this process reads alone).
    """
    with ACTIVITY.busy():
        return _search(source, pattern, cursor, limit, byte_budget, time_budget, redaction, cancelled, sizes, processes)


def _search(
    source: LogSource,
    pattern: SearchPattern,
    cursor: Cursor,
    limit: int,
    byte_budget: int,
    time_budget: float | None,
    redaction: Redaction | None,
    cancelled: threading.Event | None,
    sizes: SearchSizes,
    processes: int | None,
) -> SearchResult:
    budget = ScanBudget.starting_now(time_budget=time_budget, byte_budget=byte_budget, cancelled=cancelled)
    if redaction is None or pattern.mask_blind:
        finder = pattern.block
    else:
        finder = pattern.block_with(redaction.trigger_pattern())
    redactor = redaction.apply if redaction is not None else identity
    with opened(source) as handle:
        total = handle.seek(0, os.SEEK_END)
        check_cursor(handle, cursor, total)
        scan = _Search(pattern, finder, redactor, limit, cursor, budget, sizes, handle.fileno())
        processes = default_processes() if processes is None else processes
        wants_helpers = False
        try:
            if processes and scan.literals is not None and total - cursor.offset >= 2 * sizes.stretch_bytes:
                wants_helpers = helped_scan(scan, handle, total, processes, partial(_read_and_scan, scan, handle))
            if scan.stopped is None:
                _read_and_scan(scan, handle, scan.offset, None)
        finally:
            scan.indexer.shutdown(wait=True)
        if scan.stopped == "cancelled":
            scan.back_to_counted()
        # Its line number may need the runs left uncounted, read again through the handle.
        next_cursor = None if scan.stopped is None or scan.offset >= total else Cursor(scan.line, scan.offset)
    if wants_helpers:
        HELPERS.start(processes)  # this search is done with the cores: they load while its answer goes out
    return SearchResult(
        matches=scan.matches,
        next_cursor=next_cursor,
        scanned_bytes=scan.offset - cursor.offset,
        total_bytes=total,
        stopped="end of log" if scan.stopped is None or next_cursor is None else scan.stopped,
    )


# The most a full scan reads past a run with a candidate before the skim takes over again (see _read_and_scan).
_MAX_SCANNED_SPAN = 64 * 1024 * 1024


def _read_and_scan(scan: _Search, handle: BinaryIO, start: int, end: int | None) -> None:
    """Read the log from ``start`` to ``end`` (line starts; None: its end) and scan it, until the scan stops.

    For a pattern with literals, the runs without a candidate are skimmed (``core.search.skim``) and only the
    runs that may hold one are scanned in full, with as many runs after them as the last skims passed none
    (doubling, so that a log with candidates everywhere is read nearly once). ``start`` is where the scan is."""
    if scan.literals is not None:
        fd, span = handle.fileno(), 0
        if scan.skim_buffer is None:
            scan.skim_buffer = bytearray(scan.sizes.read_bytes)
        buffer = scan.skim_buffer
        undecodable = not scan.pattern.replacement_blind
        last_skim: int | None = None  # how far the last skim went: about as far as the next one is expected to go
        while True:
            skimmed_from = scan.offset
            until = skim(
                scan, fd, buffer, end, undecodable=undecodable, split_bytes=scan.sizes.split_bytes, expected=last_skim
            )
            last_skim = scan.offset - skimmed_from
            if scan.stopped is not None:
                return
            if until is None:
                break
            span = min(2 * span or scan.sizes.read_bytes, _MAX_SCANNED_SPAN) if scan.offset == skimmed_from else 0
            if span:
                further = line_start_at(fd, until + span)
                until = end if further is None or (end is not None and further >= end) else further
            _read_runs(scan, handle, scan.offset, until)
            if scan.stopped is not None or until is None or scan.offset != until:
                return
    _read_runs(scan, handle, scan.offset, end)


def _read_runs(scan: _Search, handle: BinaryIO, start: int, end: int | None) -> None:
    """Read the log from ``start`` to ``end`` (line starts; None: its end) run by run and scan each in full."""
    # Every handle the desk reads is a binary file object that can read straight into a buffer.
    sizes = scan.sizes
    workers = free_workers() if sizes.workers is None else sizes.workers
    reader = ParallelRuns(cast(RawReader, handle), start, sizes.read_bytes, scan._index, scan.clear_until, workers, end)
    scan.release = reader.release
    try:
        for run in reader.runs():
            if isinstance(run, HugeLine):
                scan.huge_line(run)
            else:
                scan.run(run)
            if scan.stopped is not None:
                return
        scan.finish_pending()
    finally:
        reader.close()  # the workers and the indexer read buffers that are reused: they must be done first
        # The reader holds the scan (its index and prefilter) and the scan the reader (release): without this
        # cycle both, and the read buffers, are freed on return rather than at the next garbage collection.
        scan.release = _keep
