"""Per-service logs that live outside the data directory: rotated files, a command's output, a unit's journal.

Each becomes one regular file in the desk's spool (:mod:`.spool`, a private directory under a total size cap), so
the tail window, paging cursors and RE2 search (which read by offset and ``pread``) work on it exactly as on a
``log.txt``. A spool is rebuilt only when its inputs change (files) or its cache time runs out (commands), so the
byte offsets in a cursor stay valid while a client pages.

``files`` matches are opened the way data files are (:class:`~incident_desk.core.datafiles.DataRoot`): resolved one
component at a time beneath their root, each directory opened relative to the last without the kernel following a
link, so a directory swapped for a link mid-read never serves a file outside the roots. A match that cannot be
served (a link out, a FIFO, a file that will not decompress) is left out of the log with a note naming it.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import secrets
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from glob import glob
from pathlib import Path
from typing import BinaryIO

from incident_desk.core import errors
from incident_desk.core.datafiles import OUTSIDE, DataRoot, Refused
from incident_desk.core.neighbours import runner
from incident_desk.core.sources.config import CommandLogConfig, FilesLogConfig, JournaldLogConfig, window_values
from incident_desk.core.sources.spool import Spool

_CHUNK = 1024 * 1024
_OUTSIDE_ROOTS = "leads outside the allowed roots"


class LogSourceError(errors.Unavailable):
    """A service's log cannot be produced; the message is safe to show a client (no secrets, no environment)."""


@dataclass(frozen=True)
class _Input:
    name: str  # the match as the glob spelled it: for notes and rotation order
    root: int  # which of the allowed roots it is opened beneath
    parts: tuple[str, ...]  # its names beneath that root
    signature: tuple[int, int, int, int]  # device, inode, size, mtime of the file opened
    gzipped: bool
    estimate: int  # bytes it adds to the log: its size, or what its gzip trailer claims (checked while read)


def _rotation_key(item: _Input) -> tuple[int, int, str]:
    """Oldest first: app.log.3.gz, app.log.2, app.log.1, app.log; unnumbered rotations by modification time."""
    _stem, dot, digits = item.name.removesuffix(".gz").rpartition(".")
    number = int(digits) if dot and digits.isascii() and digits.isdigit() else 0
    return (-number, item.signature[3], item.name)


def _note(text: str) -> bytes:
    return f"[incident-desk: {text}]\n".encode()


class FilesLog:
    """A glob (or several) read as one log in rotation order, each match opened beneath the allowed roots."""

    def __init__(self, service: str, config: FilesLogConfig, spool: Spool | None = None) -> None:
        self.service = service
        self.config = config
        self._spool = spool or Spool()
        self._name = f"files-{service}-{secrets.token_hex(4)}"  # one log source, one spool name
        self._lock = threading.Lock()
        self._current: tuple[tuple[_Input, ...], tuple[str, ...]] | None = None

    def _roots(self) -> list[tuple[DataRoot, list[str]]]:
        """Each allowed root, with the spellings a match beneath it may have (as configured, as resolved)."""
        found = []
        for root in self.config.allowed_roots:
            data_root = DataRoot(root)
            as_given = os.path.abspath(root)  # noqa: PTH100 -- lexical: resolving would follow links
            spellings = sorted({data_root.real, as_given}, key=len, reverse=True)
            found.append((data_root, spellings))
        return found

    def _scan(self) -> tuple[tuple[_Input, ...], tuple[str, ...]]:
        """The matches that can be served, oldest first, and a sentence for each that cannot."""
        roots = self._roots()
        found: dict[tuple[int, int], _Input] = {}
        problems: list[str] = []
        for pattern in self.config.paths:
            for match in sorted(glob(pattern)):  # noqa: PTH207 -- absolute patterns
                try:
                    item = self._examine(match, roots)
                except Refused as exc:
                    reason = _OUTSIDE_ROOTS if str(exc) == OUTSIDE else str(exc)
                    problems.append(f"{match} {reason}")
                    continue
                except OSError as exc:
                    problems.append(f"{match} cannot be read: {exc.strerror or exc.__class__.__name__}")
                    continue
                found.setdefault(item.signature[:2], item)
        inputs = tuple(sorted(found.values(), key=_rotation_key))
        if not inputs:
            if problems:
                raise LogSourceError("no file can be served: " + "; ".join(problems))
            raise LogSourceError(f"no file matches {', '.join(self.config.paths)}")
        return inputs, tuple(problems)

    @staticmethod
    def _examine(match: str, roots: list[tuple[DataRoot, list[str]]]) -> _Input:
        normal = os.path.normpath(os.path.abspath(match))  # noqa: PTH100 -- lexical, as the glob spelled it
        for number, (root, spellings) in enumerate(roots):
            for spelling in spellings:
                prefix = spelling.rstrip(os.sep) + os.sep
                if not normal.startswith(prefix):
                    continue
                parts = tuple(normal[len(prefix) :].split(os.sep))  # noqa: PTH206 -- names, not a path
                with root.open_file(parts) as handle:
                    info = os.fstat(handle.fileno())
                    gzipped = match.endswith(".gz")
                    estimate = info.st_size
                    if gzipped:  # gzip keeps the uncompressed size (mod 2**32) in its last 4 bytes: a claim only
                        estimate = int.from_bytes(os.pread(handle.fileno(), 4, max(info.st_size - 4, 0)), "little")
                signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
                return _Input(match, number, parts, signature, gzipped, estimate)
        raise Refused(OUTSIDE)

    def open_for(self, incident_id: str, opened: datetime) -> BinaryIO:
        """The service's log for any incident: the same files whichever incident asks."""
        return self.open()

    def open(self) -> BinaryIO:
        with self._lock:
            inputs, problems = self._scan()
            current = self._current
            if current is not None and current[1] == problems:
                handle = None
                if current[0] == inputs:
                    handle = self._spool.open(self._name)
                elif self._only_grew(current[0], inputs):
                    handle = self._spool.append(
                        self._name, lambda out: self._append_growth(current[0][-1], inputs[-1], out)
                    )
                if handle is not None:
                    self._current = (inputs, problems)
                    return handle
            handle = self._spool.write(self._name, lambda out: self._concatenate(inputs, problems, out))
            self._current = (inputs, problems)
            return handle  # the caller closes it

    def _only_grew(self, before: tuple[_Input, ...], now: tuple[_Input, ...]) -> bool:
        """Whether the only change is the newest (plain) file growing: the usual case of a live log."""
        if len(before) != len(now) or before[:-1] != now[:-1] or now[-1].gzipped or before[-1].name != now[-1].name:
            return False
        (dev, ino, size, _), (new_dev, new_ino, new_size, _) = before[-1].signature, now[-1].signature
        spooled = self._spool.size_of(self._name)
        return (
            spooled is not None
            and (dev, ino) == (new_dev, new_ino)
            and new_size > size
            and spooled + new_size - size <= self.config.max_bytes
        )

    def _append_growth(self, before: _Input, grown: _Input, out: BinaryIO) -> None:
        """Append what the newest file gained to the spool: offsets already handed out stay where they were."""
        start, end = before.signature[2], grown.signature[2]
        with self._open_input(grown) as handle:
            fd = handle.fileno()
            while start < end and (chunk := os.pread(fd, min(_CHUNK, end - start), start)):
                out.write(chunk)
                start += len(chunk)

    def _open_input(self, item: _Input) -> BinaryIO:
        """The very file that was examined, opened beneath its root again; LogSourceError if it is another now."""
        roots = self._roots()
        try:
            handle = roots[item.root][0].open_file(item.parts)
        except Refused as exc:
            raise LogSourceError(f"{item.name} {_OUTSIDE_ROOTS if str(exc) == OUTSIDE else exc}") from None
        except OSError as exc:
            raise LogSourceError(f"{item.name} cannot be read: {exc.strerror or exc.__class__.__name__}") from None
        info = os.fstat(handle.fileno())
        if (info.st_dev, info.st_ino) != item.signature[:2]:
            handle.close()
            raise LogSourceError(f"{item.name} was replaced while the log was read")
        return handle

    def _concatenate(self, inputs: tuple[_Input, ...], problems: tuple[str, ...], out: BinaryIO) -> None:
        """The log: notes first, then the newest files that fit ``max_bytes``, oldest first, never past the cap.

        What a file adds is known only as it is read (a gzip trailer can lie), so each file may use the cap less what
        the files after it are expected to add: the newest lines always have their room.
        """
        cap = self.config.max_bytes
        for problem in problems:
            out.write(_note(f"{problem}; it is left out of this log"))
        kept = _newest_within(inputs, cap)
        if len(kept) < len(inputs):
            left_out = len(inputs) - len(kept)
            out.write(
                _note(f"{left_out} older rotated file(s) left out: the log is over its max_bytes cap of {cap} bytes")
            )
        after = [sum(item.estimate for item in kept[number + 1 :]) for number in range(len(kept))]
        written = 0
        for number, item in enumerate(kept):
            room = max(cap - written - after[number], 0)
            produced, last, trouble = 0, b"\n", None
            try:
                for chunk in _read_input(self._open_input(item), item):
                    piece = chunk[: room - produced]
                    out.write(piece)
                    produced += len(piece)
                    last = piece[-1:] or last
                    if len(piece) < len(chunk):
                        trouble = (
                            f"{item.name} is cut after {produced} bytes: it expands past the log's max_bytes cap "
                            f"of {cap} bytes"
                        )
                        break
            except LogSourceError as exc:
                trouble = f"{exc}; the rest of it is left out of this log"
            written += produced
            if last != b"\n" and (trouble or number < len(kept) - 1):
                out.write(b"\n")  # the next file (or the note) starts a line of its own
            if trouble:
                out.write(_note(trouble))


def _newest_within(inputs: tuple[_Input, ...], cap: int) -> list[_Input]:
    kept: list[_Input] = []
    total = 0
    for item in reversed(inputs):
        total += item.estimate
        if kept and total > cap:
            break
        kept.insert(0, item)
    return kept


def _read_input(raw: BinaryIO, item: _Input) -> Iterator[bytes]:
    """The file's bytes (decompressed as they are produced, never all at once), closing it at the end."""
    with raw:
        reader: BinaryIO = gzip.GzipFile(fileobj=raw) if item.gzipped else raw  # type: ignore[assignment]
        try:
            while chunk := reader.read(_CHUNK):
                yield chunk
        except (OSError, EOFError, zlib.error) as exc:
            raise LogSourceError(f"{item.name} cannot be decompressed: {exc}") from None


@dataclass(frozen=True)
class CommandOutcome:
    written: int
    cut: bool
    timed_out: bool
    exit_status: int | None


def run_to_spool(
    argv: list[str], out: BinaryIO, *, max_bytes: int, timeout: float, cwd: Path | None, pass_env: list[str]
) -> CommandOutcome:
    """Run ``argv`` (no shell) with its output into ``out``, stopped at ``max_bytes`` or ``timeout``; then say so."""
    head = runner.HeadOutput(out, max_bytes)
    run = runner.run(argv, head, timeout=timeout, env=runner.child_environment(pass_env), cwd=cwd)
    if not run.launched:
        reason = (run.launch_error or "").split(": ", 1)[-1]
        raise LogSourceError(f"log command {argv[0]!r} could not start: {reason}")
    status = None if run.cut or run.timed_out else run.exit_status
    notes = []
    if run.cut:
        notes.append(f"[incident-desk: output cut at {max_bytes} bytes (max_bytes); the command was stopped]")
    if run.timed_out:
        notes.append(f"[incident-desk: the command was stopped at its {timeout:g}s timeout]")
    if status is not None and status != 0:
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        notes.append(f"[incident-desk: the command {how}]")
    if notes:
        out.write((b"" if head.last == b"\n" else b"\n") + "\n".join(notes).encode() + b"\n")
    return CommandOutcome(head.written, run.cut, run.timed_out, status)


# Log commands a desk runs at once, over all its services: a handful of incidents are read side by side, and a
# burst of reads over many alerts still does not start a process for each.
LOG_COMMANDS_AT_ONCE = 4


class CommandSlots:
    """The log commands a desk runs now, at most ``limit``: shared by all its command logs."""

    def __init__(self, limit: int = LOG_COMMANDS_AT_ONCE) -> None:
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)

    @contextmanager
    def held(self, what: str, wait: float) -> Iterator[None]:
        """A slot for the duration; LogSourceError when none frees up within ``wait`` seconds."""
        if not self._free.acquire(timeout=wait):
            raise LogSourceError(
                f"{what} did not start within {wait:g}s: the desk runs at most {self.limit} log commands at once, "
                f"and {self.limit} were running"
            )
        try:
            yield
        finally:
            self._free.release()


class CommandLog:
    """A command's output for one incident's window, spooled once per cache period so paging stays stable.

    A burst of reads of one incident runs its command once; reads of different incidents run theirs side by side,
    as many at once as the desk's :class:`CommandSlots` allow."""

    def __init__(
        self,
        service: str,
        config: CommandLogConfig | JournaldLogConfig,
        spool: Spool | None = None,
        slots: CommandSlots | None = None,
    ) -> None:
        self.service = service
        self.config = config.as_command() if isinstance(config, JournaldLogConfig) else config
        self._spool = spool or Spool()
        self._slots = slots or CommandSlots()
        self._prefix = f"command-{service}-{secrets.token_hex(4)}"  # one log source, its own spool names
        self._lock = threading.Lock()
        self._making: dict[str, tuple[threading.Lock, int]] = {}  # each spool being made: its lock, its waiters

    def open_for(self, incident_id: str, opened: datetime) -> BinaryIO:
        """The command's output for this incident's window."""
        return self.open(incident_id, opened)

    def open(self, incident_id: str, opened: datetime) -> BinaryIO:
        config = self.config
        name = f"{self._prefix}-{hashlib.sha256(incident_id.encode()).hexdigest()[:16]}"
        with self._one_at_a_time(name):  # a burst of reads of this incident runs the command once
            handle = self._spool.open(name, max_age=config.cache_seconds)
            if handle is not None:
                return handle
            values = window_values(self.service, incident_id, opened, datetime.now(UTC), config.lookback_minutes)
            argv = [word.format_map(values) for word in config.argv]
            with self._slots.held(f"the log command of {self.service}", config.timeout_seconds):
                return self._spool.write(  # the caller closes it
                    name,
                    lambda out: run_to_spool(
                        argv,
                        out,
                        max_bytes=config.max_bytes,
                        timeout=config.timeout_seconds,
                        cwd=config.cwd,
                        pass_env=config.pass_env,
                    ),
                )

    @contextmanager
    def _one_at_a_time(self, name: str) -> Iterator[None]:
        """Hold the lock of one spool name; the lock is dropped when nobody holds or waits for it."""
        with self._lock:
            lock, users = self._making.get(name, (threading.Lock(), 0))
            self._making[name] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._making[name]
                if users == 1:
                    del self._making[name]
                else:
                    self._making[name] = (lock, users - 1)
