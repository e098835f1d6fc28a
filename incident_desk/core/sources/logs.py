"""Per-service logs that live outside the data directory: rotated files, a command's output, a unit's journal.

Each becomes one regular file in a private spool directory, so the tail window, paging cursors and RE2 search
(which read by offset and ``pread``) work on it exactly as on a ``log.txt``. A spool is rebuilt only when its
inputs change (files) or its cache time runs out (commands), so the byte offsets in a cursor stay valid while
a client pages.
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import hashlib
import os
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from glob import glob
from pathlib import Path
from typing import BinaryIO

from incident_desk.core.credentials import ENV_PREFIX
from incident_desk.core.sources.config import (
    CommandLogConfig,
    FilesLogConfig,
    JournaldLogConfig,
    window_values,
    within,
)

_CHUNK = 1024 * 1024


class LogSourceError(Exception):
    """A service's log cannot be produced; the message is safe to show a client (no secrets, no environment)."""


def _rotation_key(path: str) -> tuple[int, int, str]:
    """Oldest first: app.log.3.gz, app.log.2, app.log.1, app.log; unnumbered rotations by modification time."""
    _stem, dot, digits = path.removesuffix(".gz").rpartition(".")
    number = int(digits) if dot and digits.isascii() and digits.isdigit() else 0
    try:
        mtime = Path(path).stat().st_mtime_ns
    except OSError:
        mtime = 0
    return (-number, mtime, path)


@dataclass(frozen=True)
class _Input:
    path: str  # resolved, no link left
    signature: tuple[int, int, int, int]
    gzipped: bool


class _Spool:
    """A private directory of spool files, removed with the process; each read opens its own description."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="incident-desk-logs-"))  # mode 0700: this user only
        atexit.register(shutil.rmtree, self._dir, ignore_errors=True)

    def write(self, name: str, produce: Callable[[BinaryIO], object]) -> Path:
        final = self._dir / name
        fd, temporary = tempfile.mkstemp(dir=self._dir, prefix=".partial-")
        try:
            with os.fdopen(fd, "wb") as out:
                produce(out)
            Path(temporary).replace(final)
        except BaseException:
            with contextlib.suppress(OSError):
                Path(temporary).unlink()
            raise
        return final

    def discard(self, path: Path | None) -> None:
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()


_SPOOL: _Spool | None = None
_SPOOL_LOCK = threading.Lock()


def spool() -> _Spool:
    global _SPOOL  # one private spool directory per process, made on first use
    with _SPOOL_LOCK:
        if _SPOOL is None:
            _SPOOL = _Spool()
        return _SPOOL


class FilesLog:
    """A glob (or several) read as one log in rotation order; links leading outside the roots are refused."""

    def __init__(self, service: str, config: FilesLogConfig) -> None:
        self.service = service
        self.config = config
        self._lock = threading.Lock()
        self._current: tuple[tuple[_Input, ...], Path] | None = None

    def _inputs(self) -> list[_Input]:
        roots = [Path(os.path.realpath(root)) for root in self.config.allowed_roots]
        found: dict[str, _Input] = {}
        for pattern in self.config.paths:
            for match in sorted(glob(pattern), key=_rotation_key):  # noqa: PTH207 -- absolute patterns
                resolved = os.path.realpath(match)
                if not any(within(Path(resolved), root) for root in roots):
                    raise LogSourceError(f"{match} leads outside the allowed roots ({', '.join(map(str, roots))})")
                try:
                    info = Path(resolved).stat()
                except OSError as exc:
                    raise LogSourceError(f"{match} cannot be read: {exc.strerror}") from None
                if not stat.S_ISREG(info.st_mode):
                    raise LogSourceError(f"{match} is not a regular file")
                signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
                found.setdefault(resolved, _Input(resolved, signature, resolved.endswith(".gz")))
        inputs = sorted(found.values(), key=lambda item: _rotation_key(item.path))
        if not inputs:
            raise LogSourceError(f"no file matches {', '.join(self.config.paths)}")
        return inputs

    def open(self) -> BinaryIO:
        with self._lock:
            inputs = tuple(self._inputs())
            if self._current is not None and self._only_grew(self._current[0], inputs):
                self._append_growth(self._current, inputs[-1])
                self._current = (inputs, self._current[1])
            elif self._current is None or self._current[0] != inputs:
                previous = self._current[1] if self._current else None
                digest = hashlib.sha256(repr(inputs).encode()).hexdigest()[:16]
                path = spool().write(f"files-{self.service}-{digest}", lambda out: self._concatenate(inputs, out))
                if previous != path:
                    spool().discard(previous)
                self._current = (inputs, path)
            return self._current[1].open("rb")  # the caller closes it

    def _only_grew(self, before: tuple[_Input, ...], now: tuple[_Input, ...]) -> bool:
        """Whether the only change is the newest (plain) file growing: the usual case of a live log."""
        if len(before) != len(now) or before[:-1] != now[:-1] or now[-1].gzipped or before[-1].path != now[-1].path:
            return False
        (dev, ino, size, _), (new_dev, new_ino, new_size, _) = before[-1].signature, now[-1].signature
        spooled = self._current[1].stat().st_size if self._current else 0
        return (
            (dev, ino) == (new_dev, new_ino) and new_size > size and spooled + new_size - size <= self.config.max_bytes
        )

    def _append_growth(self, current: tuple[tuple[_Input, ...], Path], grown: _Input) -> None:
        """Append what the newest file gained to the spool: offsets already handed out stay where they were."""
        start, end = current[0][-1].signature[2], grown.signature[2]
        fd = os.open(grown.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LogSourceError(f"{grown.path} is not a regular file")
            with current[1].open("ab") as out:
                while start < end and (chunk := os.pread(fd, min(_CHUNK, end - start), start)):
                    out.write(chunk)
                    start += len(chunk)
        finally:
            os.close(fd)

    def _concatenate(self, inputs: tuple[_Input, ...], out: BinaryIO) -> None:
        kept = _newest_within(inputs, self.config.max_bytes)
        if len(kept) < len(inputs):
            left_out = len(inputs) - len(kept)
            out.write(
                f"[incident-desk: {left_out} older rotated file(s) left out: the log is over its max_bytes "
                f"cap of {self.config.max_bytes} bytes]\n".encode()
            )
        for number, item in enumerate(kept, start=1):
            last = b"\n"
            for chunk in _read_input(item):
                out.write(chunk)
                last = chunk[-1:]
            if last != b"\n" and number < len(kept):
                out.write(b"\n")  # the next file starts a line of its own


def _expanded_size(item: _Input) -> int:
    if not item.gzipped:
        return item.signature[2]
    with Path(item.path).open("rb") as handle:  # gzip keeps the uncompressed size (mod 2**32) in its last 4 bytes
        handle.seek(max(item.signature[2] - 4, 0))
        return int.from_bytes(handle.read(4), "little")


def _newest_within(inputs: tuple[_Input, ...], cap: int) -> list[_Input]:
    kept: list[_Input] = []
    total = 0
    for item in reversed(inputs):
        total += _expanded_size(item)
        if kept and total > cap:
            break
        kept.insert(0, item)
    return kept


def _read_input(item: _Input) -> Iterator[bytes]:
    fd = os.open(item.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as raw:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LogSourceError(f"{item.path} is not a regular file")
        reader: BinaryIO = gzip.GzipFile(fileobj=raw) if item.gzipped else raw  # type: ignore[assignment]
        try:
            while chunk := reader.read(_CHUNK):
                yield chunk
        except (OSError, EOFError) as exc:
            raise LogSourceError(f"{item.path} cannot be decompressed: {exc}") from None


def command_environment() -> dict[str, str]:
    """The desk's environment without any of its own settings: no secret (nor source password) reaches a command."""
    return {name: value for name, value in os.environ.items() if not name.upper().startswith(ENV_PREFIX)}


@dataclass(frozen=True)
class CommandOutcome:
    written: int
    cut: bool
    timed_out: bool
    exit_status: int | None


def run_to_spool(argv: list[str], out: BinaryIO, *, max_bytes: int, timeout: float, cwd: Path | None) -> CommandOutcome:
    """Run ``argv`` (no shell) with its output into ``out``, stopped at ``max_bytes`` or ``timeout``; then say so."""
    try:
        process = subprocess.Popen(  # an argv list from the operator's config, never a shell
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=command_environment(),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        raise LogSourceError(f"log command {argv[0]!r} could not start: {exc.strerror or exc}") from None
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    written, cut, timed_out, last = 0, False, False, b"\n"
    with selectors.DefaultSelector() as selector, process.stdout:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if not selector.select(remaining):
                continue
            chunk = os.read(process.stdout.fileno(), _CHUNK)
            if not chunk:
                break
            room = max_bytes - written
            out.write(chunk[:room])
            written += min(room, len(chunk))
            last = chunk[:room][-1:] or last
            if len(chunk) > room:
                cut = True
                break
    status: int | None = None
    if not (cut or timed_out):
        try:
            status = process.wait(max(deadline - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired:
            timed_out = True
    if status is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    notes = []
    if cut:
        notes.append(f"[incident-desk: output cut at {max_bytes} bytes (max_bytes); the command was stopped]")
    if timed_out:
        notes.append(f"[incident-desk: the command was stopped at its {timeout:g}s timeout]")
    if status is not None and status != 0:
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        notes.append(f"[incident-desk: the command {how}]")
    if notes:
        out.write((b"" if last == b"\n" else b"\n") + "\n".join(notes).encode() + b"\n")
    return CommandOutcome(written, cut, timed_out, status)


class CommandLog:
    """A command's output for one incident's window, spooled once per cache period so paging stays stable."""

    def __init__(self, service: str, config: CommandLogConfig | JournaldLogConfig) -> None:
        self.service = service
        self.config = config.as_command() if isinstance(config, JournaldLogConfig) else config
        self._lock = threading.Lock()
        self._spools: dict[str, tuple[float, Path]] = {}

    def open(self, incident_id: str, opened: datetime) -> BinaryIO:
        config = self.config
        with self._lock:  # a burst of reads runs the command once
            made = self._spools.get(incident_id)
            if made is None or time.monotonic() - made[0] >= config.cache_seconds:
                values = window_values(self.service, incident_id, opened, datetime.now(UTC), config.lookback_minutes)
                argv = [word.format_map(values) for word in config.argv]
                digest = hashlib.sha256(incident_id.encode()).hexdigest()[:16]
                path = spool().write(
                    f"command-{self.service}-{digest}",
                    lambda out: run_to_spool(
                        argv, out, max_bytes=config.max_bytes, timeout=config.timeout_seconds, cwd=config.cwd
                    ),
                )
                made = (time.monotonic(), path)
                self._spools[incident_id] = made
            return made[1].open("rb")  # the caller closes it
