"""Opening the data directory's files so that whoever can write there can neither reach outside it nor stall the desk.

Names are resolved by the desk itself, one component at a time, each relative to a directory it already holds
open: the kernel never follows a link (``O_NOFOLLOW``). A link the desk meets is read and resolved beneath the data
directory, or refused when it leads out, so a link that stays inside keeps working and no descriptor outside the
data directory is ever opened. Files are opened without blocking (``O_NONBLOCK``: a FIFO would otherwise wait for
a writer forever) and judged by ``fstat`` of the descriptor, never by the path: a regular file, within a size
limit. What was judged is what is read, so swapping a file for a link between a check and a read changes nothing.

Where ``open`` cannot be given a directory descriptor (Windows), the same rules are applied to the resolved path,
and after opening, the path is resolved again and must still lead, beneath the data directory, to the very file
that was opened; an outside file may be opened for that moment, but it is closed unread.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from incident_desk.core import errors

MAX_LINKS = 40  # as many links as the kernel follows in one lookup before it gives up (ELOOP)
OUTSIDE = "points outside the data directory"

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_COMMON = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOINHERIT", 0)  # Windows' name for close-on-exec
    | getattr(os, "O_BINARY", 0)
)
_FILE_FLAGS = _COMMON | _O_NOFOLLOW | getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS = _COMMON | _O_NOFOLLOW | _O_DIRECTORY
# Errors an O_NOFOLLOW open gives for a link: ELOOP (Linux, macOS), EMLINK (FreeBSD), ENOTDIR (with O_DIRECTORY).
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})

DESCRIPTORS_SUPPORTED = bool(
    _O_NOFOLLOW
    and _O_DIRECTORY
    and os.open in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and os.readlink in os.supports_dir_fd
    and os.listdir in os.supports_fd
)


class Refused(errors.Refused):
    """A data-directory name the desk will not open; the message completes a sentence that starts with the name."""


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def _judge(fd: int, max_bytes: int | None) -> None:
    """Refuse the opened descriptor unless it is a regular file within ``max_bytes``; it is closed when refused."""
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise Refused(f"is {_kind(opened.st_mode)}, not a regular file")
        if max_bytes is not None and opened.st_size > max_bytes:
            raise Refused(f"is {opened.st_size} bytes, over the limit of {max_bytes} bytes for data files")
    except BaseException:
        os.close(fd)
        raise


def _refuse_special(name: str, dir_fd: int) -> None:
    """Refuse a FIFO, device or socket before opening it at all: opening some devices does something."""
    try:
        found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return  # the open that follows says what is wrong
    if not (stat.S_ISREG(found.st_mode) or stat.S_ISLNK(found.st_mode)):
        raise Refused(f"is {_kind(found.st_mode)}, not a regular file")


def _components(parts: Sequence[str]) -> list[str]:
    return [name for part in parts for name in part.split("/")]


class DataRoot:
    """One data directory, resolved once; every open beneath it follows the rules in the module docstring."""

    def __init__(self, root: Path, *, use_descriptors: bool = DESCRIPTORS_SUPPORTED) -> None:
        self.path = root
        self.real = os.path.realpath(root)
        # Absolute link targets may name the root as configured or as resolved; both mean the same directory.
        self._spellings = sorted({self.real, os.path.abspath(root)}, key=len, reverse=True)
        self._use_descriptors = use_descriptors

    def open_file(self, parts: Sequence[str], *, max_bytes: int | None = None) -> BinaryIO:
        """The regular file at ``parts`` beneath the root, open for binary reading.

        Raises Refused (it is not a regular file, is too big, or leads outside), or OSError (it does not exist,
        cannot be read).
        """
        if self._use_descriptors:
            fd = self._walk(_components(parts), want_file=True)
        else:
            fd = self._open_by_path(_components(parts))
        _judge(fd, max_bytes)
        return os.fdopen(fd, "rb")

    def read_bytes(self, parts: Sequence[str], *, max_bytes: int) -> bytes:
        """The whole of a small file, never more than ``max_bytes`` of it even if it grows while it is read."""
        with self.open_file(parts, max_bytes=max_bytes) as handle:
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise Refused(f"grew over the limit of {max_bytes} bytes for data files while it was read")
        return data

    @contextmanager
    def directory(self, parts: Sequence[str]) -> Iterator[Directory]:
        """The directory at ``parts``, held open while the block runs."""
        if not self._use_descriptors:
            resolved = self._resolve_by_path(_components(parts))
            found = os.stat(resolved)
            if not stat.S_ISDIR(found.st_mode):
                raise Refused(f"is {_kind(found.st_mode)}, not a directory")
            yield Directory(resolved, None)
            return
        fd = self._walk(_components(parts), want_file=False)
        try:
            yield Directory(None, fd)
        finally:
            os.close(fd)

    def _walk(self, names: list[str], *, want_file: bool) -> int:
        """A descriptor for ``names`` beneath the root, found without the kernel following any link."""
        chain = [os.open(self.real, _DIR_FLAGS)]  # the directories from the root down to where the walk is
        pending = list(reversed(names))
        hops = 0
        try:
            while pending:
                name = pending.pop()
                if name in ("", "."):
                    continue
                if name == "..":
                    if len(chain) == 1:
                        raise Refused(OUTSIDE)
                    os.close(chain.pop())
                    continue
                last_file = want_file and not pending
                if last_file:
                    _refuse_special(name, chain[-1])
                try:
                    fd = os.open(name, _FILE_FLAGS if last_file else _DIR_FLAGS, dir_fd=chain[-1])
                except OSError as exc:
                    hops += 1
                    if hops > MAX_LINKS:
                        raise Refused(f"leads through more than {MAX_LINKS} symbolic links") from None
                    target = self._why_not_opened(exc, name, chain[-1], want_directory=not last_file)
                    if target is None:  # it changed under the open: look again
                        pending.append(name)
                    elif posixpath.isabs(target):
                        relative = self._beneath_root(target)
                        while len(chain) > 1:
                            os.close(chain.pop())
                        pending.extend(reversed(relative))
                    else:
                        pending.extend(reversed(target.split("/")))
                    continue
                if last_file:
                    return fd
                chain.append(fd)
            if want_file:
                raise Refused("is a directory, not a regular file")
            return chain.pop()
        finally:
            for fd in chain:
                os.close(fd)

    @staticmethod
    def _why_not_opened(exc: OSError, name: str, dir_fd: int, *, want_directory: bool) -> str | None:
        """The target of the link that refused an O_NOFOLLOW open, None to retry; else raise why it failed."""
        if exc.errno not in _LINK_ERRNOS:
            raise exc
        try:
            found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            raise exc from None
        if stat.S_ISLNK(found.st_mode):
            try:
                return os.readlink(name, dir_fd=dir_fd)
            except OSError:
                return None
        if want_directory and not stat.S_ISDIR(found.st_mode):
            raise Refused(f"is {_kind(found.st_mode)}, not a directory") from None
        return None

    def _beneath_root(self, target: str) -> list[str]:
        """An absolute link target as names beneath the root, or Refused when it leads elsewhere."""
        normal = posixpath.normpath(target)
        for root in self._spellings:
            if normal == root:
                return []
            prefix = root.rstrip("/") + "/"
            if normal.startswith(prefix):
                return normal[len(prefix) :].split("/")
        raise Refused(OUTSIDE)

    def _resolve_by_path(self, names: list[str]) -> str:
        """Without directory descriptors: the resolved path of ``names``, refused unless it is beneath the root."""
        resolved = os.path.realpath(os.path.join(self.real, *names))
        try:
            beneath = os.path.commonpath([resolved, self.real]) == self.real
        except ValueError:  # on another drive
            beneath = False
        if not beneath:
            raise Refused(OUTSIDE)
        return resolved

    def _open_by_path(self, names: list[str]) -> int:
        resolved = self._resolve_by_path(names)
        found = os.stat(resolved)
        if not stat.S_ISREG(found.st_mode):
            raise Refused(f"is {_kind(found.st_mode)}, not a regular file")
        fd = os.open(resolved, _COMMON)
        try:
            opened = os.fstat(fd)
            again = os.stat(self._resolve_by_path(names))
            if (again.st_dev, again.st_ino) != (opened.st_dev, opened.st_ino):
                raise Refused("changed while it was opened")
        except BaseException:
            os.close(fd)
            raise
        return fd


class Directory:
    """A directory beneath the data root, held open (or, without directory descriptors, by its resolved path)."""

    def __init__(self, path: str | None, fd: int | None) -> None:
        self._path = path
        self._fd = fd

    def names(self) -> list[str]:
        return os.listdir(self._fd if self._fd is not None else self._path or ".")

    def stat(self, *names: str) -> os.stat_result:
        """Metadata of ``names`` inside this directory, links followed: for noticing changes, never for trusting."""
        if self._fd is not None:
            return os.stat("/".join(names), dir_fd=self._fd)
        return os.stat(os.path.join(self._path or ".", *names))
