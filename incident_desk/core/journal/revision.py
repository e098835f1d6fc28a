"""Whether an SQLite journal changed, for the price of one counter read.

What the desk derives from the journal again and again (every listing's acknowledged and resolved states) can be
kept while the journal stands still, instead of opening the file and reading every such row for each request. A
connection kept open for this alone asks SQLite's ``data_version``, which changes whenever any other connection
(of this process or another) commits; the file's identity, size and time are part of the revision too, so a
journal replaced or rewritten behind SQLite's back counts as changed.

The event loop may ask too (``at_once``), since a stat and a counter read take microseconds on a local disk; on a
network filesystem a stat can wait as long as the server does, so there only worker threads ask.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
import weakref
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from incident_desk.core.journal.activity import Event, Standing, standings

# (device, inode) of the file, its size and modification time in ns, how many watchers were opened so far, and
# SQLite's data_version. data_version is the watcher's own count: a watcher opened again on the same file starts
# from the same number, though commits came in between (WAL commits leave the file's size and time alone).
Revision = tuple[tuple[int, int], int, int, int, int]


# Filesystems whose stat may wait on a server. FUSE counts too: sshfs, rclone and the cloud buckets are FUSE.
_NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "ceph", "glusterfs", "lustre", "gpfs", "beegfs", "afs", "9p"}
)
MOUNTINFO = Path("/proc/self/mountinfo")
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def filesystem_type(path: Path, mountinfo: str) -> str | None:
    """The type of the filesystem holding the absolute, resolved ``path``, from the text of a Linux
    ``/proc/self/mountinfo``: the mount with the longest mount point above it. None when no mount holds it."""
    found: tuple[int, str] | None = None
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        parts = fields.split(" ")
        if len(parts) < 5 or not rest:
            continue
        mount_point = Path(_unescaped(parts[4]))
        if (path == mount_point or mount_point in path.parents) and (
            found is None or len(mount_point.parts) > found[0]
        ):
            found = (len(mount_point.parts), rest.split(" ")[0])
    return None if found is None else found[1]


def _unescaped(field: str) -> str:
    """A mountinfo field's text: mountinfo spells a space ``\\040``, a tab ``\\011`` and a backslash ``\\134``."""
    first, *escaped = field.split("\\")
    pieces = [first]
    for piece in escaped:
        code = piece[:3]
        if len(code) == 3 and all(digit in "01234567" for digit in code):
            pieces.append(chr(int(code, 8)) + piece[3:])
        else:
            pieces.append("\\" + piece)
    return "".join(pieces)


def on_network_filesystem(path: Path) -> bool:
    """Whether a stat of ``path`` may wait on a network: a Windows share, or a network or FUSE filesystem on Linux.
    Elsewhere, and where it cannot be told, the disk is taken to be local."""
    if sys.platform == "win32":
        return path.absolute().drive.startswith("\\\\")  # a UNC share; a mapped drive letter is not told apart
    try:
        kind = filesystem_type(path.resolve(), MOUNTINFO.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False
    return kind is not None and (kind in _NETWORK_FILESYSTEMS or kind.startswith("fuse"))


class SQLiteRevision:
    """The revision of the SQLite file at ``path`` (see the module docstring); safe to call from any thread.

    The watching connection never waits for a lock: a journal busy with a writer is a revision not known now, and
    the caller's own read (which does wait) says what is there."""

    def __init__(self, path: Path, *, on_network: bool | None = None) -> None:
        """``on_network``: whether the file lives on a network filesystem (told from the mounts when None); then
        ``at_once`` never answers."""
        self._path = path
        self._on_network = on_network_filesystem(path) if on_network is None else on_network
        self._uri = f"{path.absolute().as_uri()}?mode=rw"  # never creates a journal that is gone
        self._lock = threading.Lock()
        self._watcher: sqlite3.Connection | None = None
        self._watched: tuple[int, int] | None = None
        self._opened = 0
        self._finalizer: weakref.finalize[[], SQLiteRevision] | None = None

    def __call__(self) -> Revision | None:
        """The journal's revision now, opening the watcher when needed; None when it cannot be read now."""
        with self._lock:
            return self._read(may_open=True)

    def at_once(self) -> Revision | None:
        """The revision when it can be told without waiting for anything or opening anything: a stat and a counter
        read on a watcher already open on the file (microseconds on a local disk, so an event loop may call it).
        None on a network filesystem, when another thread is asking, when no watcher is open on the file now at the
        path, or when it cannot be read; closing a watcher that failed (which may checkpoint) is left to the next
        call in a worker thread."""
        if self._on_network or not self._lock.acquire(blocking=False):
            return None
        try:
            return self._read(may_open=False)
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _read(self, may_open: bool) -> Revision | None:
        try:
            found = self._path.stat()
            identity = (found.st_dev, found.st_ino)
            if self._watcher is None or self._watched != identity:
                if not may_open:
                    return None
                # A connection opened on another file than the one at the path now sees none of its commits.
                self._close()
                self._watcher = sqlite3.connect(
                    self._uri, uri=True, timeout=0, isolation_level=None, check_same_thread=False
                )
                # Closed with its journal, even one nobody closes (a connection left to the collector warns).
                self._finalizer = weakref.finalize(self, self._watcher.close)
                self._watched = identity
                self._opened += 1
            (version,) = self._watcher.execute("PRAGMA data_version").fetchone()
        except (OSError, sqlite3.Error) as exc:
            # A busy file keeps its watcher (extended codes too); the loop leaves closing one to a worker thread.
            busy = isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode & 0xFF in _BUSY
            if may_open and not busy:
                self._close()
            return None
        return identity, found.st_size, found.st_mtime_ns, self._opened, int(version)

    def _close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # closes the watcher once, and forgets it
        self._finalizer = None
        self._watcher = None
        self._watched = None


class _Journal(Protocol):
    def revision(self) -> Hashable | None: ...
    def activity(self, incident_id: str | None, limit: int = 500, acts: tuple[str, ...] = ()) -> list[Event]: ...


class KeptStandings:
    """Who acknowledged and who resolved each incident, read from ``journal`` once per revision of it and shared,
    unchangeable, until it changes (every read when the journal cannot tell its revision). Call in a worker thread."""

    def __init__(self, journal: _Journal) -> None:
        self._journal = journal
        self._kept: tuple[Hashable, Mapping[str, Standing]] | None = None

    def __call__(self) -> Mapping[str, Standing]:
        # Taken before the read: a write landing between the two makes the next call read again.
        revision = self._journal.revision()
        kept = self._kept
        if revision is not None and kept is not None and kept[0] == revision:
            return kept[1]
        events = self._journal.activity(None, 100_000, ("acknowledge", "resolve"))
        found = MappingProxyType(standings(reversed(events)))
        self._kept = None if revision is None else (revision, found)
        return found

    def at_once(self, revision_at_once: Callable[[], Hashable | None]) -> Mapping[str, Standing] | None:
        """The standings kept, when the journal's revision, told at once (``SQLiteRevision.at_once``), is the one
        they were read at; None otherwise (call this object in a worker thread then). Safe on an event loop."""
        kept = self._kept
        if kept is None:
            return None
        revision = revision_at_once()
        return kept[1] if revision is not None and revision == kept[0] else None
