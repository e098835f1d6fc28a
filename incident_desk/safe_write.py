"""Writing a file for a person (a demo transcript, a client config and its backup) without following a planted link.

A file is written to a fresh, unpredictable temporary name created exclusively (``O_EXCL``: never through an existing
name or link) and then renamed over its final name, which replaces a directory entry and never writes through it.
An existing link at the final name is refused rather than replaced, so the person learns it is there. Where the
platform allows, every step runs relative to the directory held open, so a directory swapped meanwhile changes
nothing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_DIR_FDS = bool(_O_DIRECTORY and os.open in os.supports_dir_fd and os.replace in os.supports_dir_fd)


class UnsafeTarget(Exception):
    """The file cannot be written safely; the message names it and says why."""


@contextlib.contextmanager
def _directory(directory: Path) -> Iterator[int | None]:
    if not _DIR_FDS:
        yield None
        return
    try:
        fd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnsafeTarget(f"{directory} cannot be opened as a directory: {exc.strerror or exc}") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _place(directory: Path, name: str, dir_fd: int | None) -> str:
    return name if dir_fd is not None else str(directory / name)


def create_exclusive(directory: Path, name: str, data: bytes, mode: int = 0o600) -> None:
    """Create ``name`` in ``directory`` holding ``data``; FileExistsError when anything (a link too) has that name."""
    with _directory(directory) as dir_fd:
        _create(directory, name, data, mode, dir_fd)


def _create(directory: Path, name: str, data: bytes, mode: int, dir_fd: int | None) -> None:
    fd = os.open(_place(directory, name, dir_fd), _CREATE, mode, dir_fd=dir_fd)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, mode)  # exactly this mode, whatever the umask: a backup keeps its original's
        with os.fdopen(fd, "wb") as handle:
            fd = -1
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(_place(directory, name, dir_fd), dir_fd=dir_fd)
        raise


def replace_file(directory: Path, name: str, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` as ``directory/name`` through a temporary file renamed over it; a link there is refused."""
    with _directory(directory) as dir_fd:
        target = _place(directory, name, dir_fd)
        try:
            found = os.stat(target, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            found = None
        except OSError as exc:
            raise UnsafeTarget(f"{directory / name} cannot be examined: {exc.strerror or exc}") from None
        if found is not None and stat.S_ISLNK(found.st_mode):
            raise UnsafeTarget(f"{directory / name} is a symbolic link; refusing to write through or over it")
        if found is not None and not stat.S_ISREG(found.st_mode):
            raise UnsafeTarget(f"{directory / name} exists and is not a regular file")
        temporary = f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            _create(directory, temporary, data, mode, dir_fd)
            os.replace(
                _place(directory, temporary, dir_fd),
                target,
                src_dir_fd=dir_fd,
                dst_dir_fd=dir_fd,
            )
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(_place(directory, temporary, dir_fd), dir_fd=dir_fd)
            raise UnsafeTarget(f"{directory / name} cannot be written: {exc.strerror or exc}") from None
