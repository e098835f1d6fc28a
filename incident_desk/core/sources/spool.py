"""A private directory of spool files under one total size cap, least recently used evicted first.

A log source writes its spool under a name and reads it back by name. Every handle the spool gives out is counted
until it is closed: a file in use (open by a reader, or being written) is never evicted, and a replaced file is
removed only when its last reader closes it. Once no reader holds more than the cap, the directory stays within it.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import itertools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

DEFAULT_MAX_BYTES = 1024 * 1024 * 1024


@dataclass
class _File:
    path: Path
    made: float
    size: int = 0
    users: int = 0  # open handles, plus one while it is written
    last_used: float = field(default_factory=time.monotonic)
    name: str | None = None  # None once replaced: removed when its last user is done


class _Handle(io.FileIO):
    """A spool file open for reading that tells the spool when it is closed."""

    def __init__(self, path: Path, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = None
        super().__init__(path, "rb")
        self._release = release

    def close(self) -> None:
        try:
            super().close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class Spool:
    """Named spool files in one private directory (mode 0700), within ``max_bytes`` in total."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        # Re-entrant: a handle dropped in a reference cycle is closed by the collector, which may run anywhere,
        # including inside this class while it holds the lock.
        self._lock = threading.RLock()
        self._dir: Path | None = None
        self._current: dict[str, _File] = {}
        self._files: dict[Path, _File] = {}
        self._serial = itertools.count()
        self.evicted = 0

    @property
    def directory(self) -> Path:
        with self._lock:
            return self._directory()

    def _directory(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="incident-desk-logs-"))
            atexit.register(shutil.rmtree, self._dir, ignore_errors=True)
        return self._dir

    def total_bytes(self) -> int:
        with self._lock:
            return sum(item.size for item in self._files.values())

    def open(self, name: str, *, max_age: float | None = None) -> BinaryIO | None:
        """The spool file ``name`` open for reading; None when there is none (never made, evicted, or older than
        ``max_age`` seconds)."""
        with self._lock:
            item = self._current.get(name)
            if item is None or (max_age is not None and time.monotonic() - item.made >= max_age):
                return None
            try:
                return self._hand_out(item)
            except FileNotFoundError:
                return None

    def write(self, name: str, produce: Callable[[BinaryIO], object]) -> BinaryIO:
        """Make the spool file ``name`` anew with ``produce`` and return it open for reading."""
        with self._lock:
            directory = self._directory()
            path = directory / f"{name}.{next(self._serial)}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                produce(out)
        except BaseException:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        with self._lock:
            item = _File(path, made=time.monotonic(), size=path.stat().st_size, name=name)
            self._files[path] = item
            previous = self._current.get(name)
            self._current[name] = item
            handle = self._hand_out(item)
            if previous is not None:
                previous.name = None
                self._remove_if_unused(previous)
            self._evict()
            return handle

    def append(self, name: str, produce: Callable[[BinaryIO], object]) -> BinaryIO | None:
        """Add ``produce``'s output to the end of ``name`` (offsets handed out stay valid) and return it open for
        reading; None when there is no such file (it was evicted)."""
        with self._lock:
            item = self._current.get(name)
            if item is None:
                return None
            item.users += 1
        try:
            with item.path.open("ab") as out:
                produce(out)
        finally:
            with self._lock:
                item.users -= 1
                item.size = item.path.stat().st_size
        with self._lock:
            handle = self._hand_out(item)
            self._evict()
            return handle

    def size_of(self, name: str) -> int | None:
        with self._lock:
            item = self._current.get(name)
            return None if item is None else item.size

    def _hand_out(self, item: _File) -> BinaryIO:
        try:
            handle = _Handle(item.path, lambda: self._release(item))
        except FileNotFoundError:  # removed behind the desk's back: as good as evicted
            self._forget(item)
            raise
        item.users += 1
        item.last_used = time.monotonic()
        return handle

    def _release(self, item: _File) -> None:
        with self._lock:
            item.users -= 1
            item.last_used = time.monotonic()
            self._remove_if_unused(item)
            self._evict()

    def _remove_if_unused(self, item: _File) -> None:
        if item.name is None and item.users == 0:
            self._forget(item)

    def _forget(self, item: _File) -> None:
        self._files.pop(item.path, None)
        if item.name is not None and self._current.get(item.name) is item:
            del self._current[item.name]
        with contextlib.suppress(OSError):
            item.path.unlink()

    def _evict(self) -> None:
        """Least recently used first, never a file in use, until the total is within the cap."""
        total = sum(item.size for item in self._files.values())
        if total <= self.max_bytes:
            return
        for item in sorted(self._files.values(), key=lambda each: each.last_used):
            if item.users:
                continue
            total -= item.size
            self._forget(item)
            self.evicted += 1
            if total <= self.max_bytes:
                return
