"""The one way the desk runs an operator's command: restart commands and log commands alike.

An argv list, never a shell; stdin closed; stdout and stderr together into a capped sink; one total deadline from
launch to the last byte. On POSIX the command gets its own session, so a timeout, a cut at the output cap or a
cancelled caller kills the whole process group, never leaving an orphan behind. On Linux the group also dies with
the desk (:func:`guarded`): a desk killed mid-restart frees its restart lock in the database, and no command of its
may still run once another replica can take that lock.

The child's environment is an allowlist (:data:`ALLOWED_ENV`, ``LC_*`` and ``SYSTEMD_*``, plus the names the
config declares in ``pass_env``), and never any ``INCIDENT_DESK_*`` variable: whatever the desk holds (its tokens,
a source's password) stays in the desk, whatever the case of the name.

:func:`run` blocks, so it belongs in a worker thread; :func:`run_async` puts it in one and turns a cancelled caller
into a kill.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Protocol

import anyio
import anyio.lowlevel
import anyio.to_thread

DESK_ENV_PREFIX = "INCIDENT_DESK_"
# What a command usually needs from the desk's environment: finding programs, the user, the locale and time zone,
# temporary files, and systemctl/journalctl talking to a user manager (XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS).
# The Windows names are what programs there fail without.
ALLOWED_ENV = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "USER",
        "LOGNAME",
        "TMPDIR",
        "XDG_RUNTIME_DIR",
        "DBUS_SESSION_BUS_ADDRESS",
        "SYSTEMROOT",
        "WINDIR",
        "COMSPEC",
        "PATHEXT",
        "TEMP",
        "TMP",
        "USERPROFILE",
        "USERNAME",
    }
)
ALLOWED_ENV_PREFIXES = ("LC_", "SYSTEMD_")
_POSIX = sys.platform != "win32"
# Run by a shell that setpriv gives a parent-death signal: when the desk's thread waiting on the command dies (the
# desk was killed), the shell kills its whole process group, the command and whatever it started. A command that
# ends by itself ends the shell too, and what it left running in the background is left alone, as without a guard.
_GUARD_SCRIPT = 'trap "kill -KILL 0" TERM; "$@" & wait $!'
_CHUNK = 1024 * 1024
# How often the wait wakes to look at the deadline, a cancel and the command's exit when no output comes.
_POLL_SECONDS = 0.05


def _is_env_name(name: str) -> bool:
    """A portable variable name: ASCII letters, digits and underscores, not starting with a digit."""
    return bool(name) and name.isascii() and not name[0].isdigit() and name.replace("_", "a").isalnum()


def check_pass_env(names: list[str]) -> list[str]:
    """Validate a config's ``pass_env``: plain variable names, none of the desk's own."""
    for name in names:
        if not _is_env_name(name):
            raise ValueError(f"pass_env entry {name!r} is not an environment variable name")
        if name.upper().startswith(DESK_ENV_PREFIX):
            raise ValueError(f"pass_env entry {name!r} is one of the desk's own {DESK_ENV_PREFIX}* variables")
    return names


def child_environment(pass_env: Iterable[str] = (), extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowlisted part of the desk's environment, plus ``pass_env`` names, then ``extra`` (the desk's own)."""
    chosen = {name.upper() for name in pass_env}
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.upper().startswith(DESK_ENV_PREFIX)
        and (name.upper() in ALLOWED_ENV or name.upper().startswith(ALLOWED_ENV_PREFIXES) or name.upper() in chosen)
    }
    env.update(extra or {})
    return env


class Output(Protocol):
    def add(self, chunk: bytes) -> bool:
        """Keep ``chunk``; False when the cap is reached and the command should be stopped."""


class TailOutput:
    """Keeps only the last ``limit`` bytes, so memory stays flat however much the command prints."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._dropped = 0

    def add(self, chunk: bytes) -> bool:
        self._buffer += chunk
        excess = len(self._buffer) - self._limit
        if excess > 0:
            del self._buffer[:excess]
            self._dropped += excess
        return True

    def text(self) -> str:
        data = bytes(self._buffer)
        if not self._dropped:
            return data.decode("utf-8", errors="replace")
        # Truncation may have cut a UTF-8 sequence in half; skip its orphaned continuation bytes.
        skip = 0
        while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
            skip += 1
        marker = f"[... {self._dropped + skip} earlier bytes of output dropped ...]\n"
        return marker + data[skip:].decode("utf-8", errors="replace")


class HeadOutput:
    """Writes the first ``limit`` bytes to ``out``; past them the command is stopped (``cut``)."""

    def __init__(self, out: BinaryIO, limit: int) -> None:
        self._out = out
        self._limit = limit
        self.written = 0
        self.cut = False
        self.last = b"\n"

    def add(self, chunk: bytes) -> bool:
        kept = chunk[: self._limit - self.written]
        if kept:
            self._out.write(kept)
            self.written += len(kept)
            self.last = kept[-1:]
        self.cut = len(kept) < len(chunk)
        return not self.cut


@dataclass(frozen=True)
class RunResult:
    """How a command ended. ``exit_status`` is negative when a POSIX signal ended it, None when it never ran or was
    left running (it exited only after the desk stopped waiting)."""

    launched: bool
    exit_status: int | None
    timed_out: bool
    cut: bool
    cancelled: bool
    duration_seconds: float
    launch_error: str | None = None


def launch_error(program: str, cwd: Path | None, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    if cwd is not None and exc.filename is not None and os.fsdecode(exc.filename) == os.fsdecode(cwd):
        return f"cannot run {program!r}: working directory {cwd} is unusable: {reason}"
    if isinstance(exc, FileNotFoundError):
        return f"cannot run {program!r}: program not found"
    if isinstance(exc, PermissionError):
        return f"cannot run {program!r}: not executable ({reason})"
    return f"cannot run {program!r}: {reason}"


def run(
    argv: list[str],
    output: Output,
    *,
    timeout: float,
    env: Mapping[str, str],
    cwd: Path | None = None,
    cancel: threading.Event | None = None,
    drain_grace: float = 2.0,
) -> RunResult:
    """Run ``argv`` to its end, its deadline, its output cap or ``cancel``; blocks, so call it from a thread.

    After the command exits, output still in flight is read for ``drain_grace`` seconds at most: a background
    process it left holding the pipe must not keep the caller waiting (what it started is left running then).
    """
    started = time.monotonic()
    try:
        process = subprocess.Popen(  # an argv list from the operator's config, never a shell of its making
            guarded(argv, env, cwd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=_POSIX,
        )
    except OSError as exc:
        return RunResult(False, None, False, False, False, time.monotonic() - started, launch_error(argv[0], cwd, exc))
    assert process.stdout is not None
    deadline = started + timeout
    stopped = ""
    exited_at: float | None = None
    ended = False
    reader = _PipeReader(process.stdout)
    try:
        while True:
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                stopped = "cancelled"
                break
            if now >= deadline:
                stopped = "timeout"
                break
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and (ended or now - exited_at >= drain_grace):
                break
            wait = min(_POLL_SECONDS, deadline - now)
            if ended:  # its output closed, the command still runs: wait for it to exit
                if cancel is not None:
                    cancel.wait(wait)
                else:
                    time.sleep(wait)
                continue
            chunk = reader.read(wait)
            if chunk == b"":
                ended = True
            elif chunk is not None and not output.add(chunk):
                stopped = "cut"
                break
    finally:
        reader.close()
        still_running = process.poll() is None
        if still_running:
            _kill(process)
    return RunResult(
        launched=True,
        exit_status=process.returncode,
        timed_out=stopped == "timeout" and still_running,
        cut=stopped == "cut",
        cancelled=stopped == "cancelled",
        duration_seconds=time.monotonic() - started,
    )


def guarded(argv: list[str], env: Mapping[str, str], cwd: Path | None) -> list[str]:
    """``argv`` wrapped so that its process group dies with the desk, where Linux and util-linux's ``setpriv`` allow.

    The operator's argv reaches the shell as positional parameters (``"$@"``), never as shell text. A program that
    cannot be found is left unwrapped, so launching it fails with the runner's own error rather than the shell's.
    """
    prefix = _guard_prefix()
    if not prefix or not _launchable(argv[0], env, cwd):
        return argv
    return [*prefix, *argv]


@functools.cache
def _guard_prefix() -> tuple[str, ...]:
    """How to start a guarded command here; empty where no parent-death signal can be set (not Linux, no setpriv)."""
    if not sys.platform.startswith("linux"):
        return ()
    setpriv, shell = shutil.which("setpriv"), shutil.which("sh")
    if setpriv is None or shell is None:
        return ()
    try:
        usage = subprocess.run([setpriv, "--help"], capture_output=True, timeout=5, check=False, env={}).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    if b"--pdeathsig" not in usage:
        return ()
    return (setpriv, "--pdeathsig", "TERM", "--", shell, "-c", _GUARD_SCRIPT, "incident-desk-guard")


def _launchable(program: str, env: Mapping[str, str], cwd: Path | None) -> bool:
    if os.sep in program:
        path = Path(program)
        if not path.is_absolute() and cwd is not None:
            path = cwd / path
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(program, path=env.get("PATH", os.defpath)) is not None


async def run_async(
    argv: list[str],
    output: Output,
    *,
    timeout: float,
    env: Mapping[str, str],
    cwd: Path | None = None,
    drain_grace: float = 2.0,
) -> RunResult:
    """:func:`run` in a worker thread; a cancelled caller kills the command, and waits for that, before unwinding."""
    cancel = threading.Event()

    async def kill_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancel.set()

    call = functools.partial(
        run, argv, output, timeout=timeout, env=env, cwd=cwd, cancel=cancel, drain_grace=drain_grace
    )
    async with anyio.create_task_group() as group:
        group.start_soon(kill_when_cancelled)
        result: RunResult = await anyio.to_thread.run_sync(call)  # not abandoned: the kill is waited for
        group.cancel_scope.cancel()
    await anyio.lowlevel.checkpoint()  # a caller cancelled meanwhile unwinds here
    return result


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the command and, on POSIX, everything in its session's process group, then reap it."""
    if _POSIX:
        # The group id is the command's pid (start_new_session); it cannot be reused while unreaped.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        if process.poll() is None:
            process.kill()
    process.wait()


class _PipeReader:
    """Reads of the command's output that give up after a timeout: a selector on POSIX, a pump thread elsewhere."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._selector: selectors.BaseSelector | None = None
        self._chunks: queue.Queue[bytes] | None = None
        self._closed = threading.Event()
        if _POSIX:
            self._selector = selectors.DefaultSelector()
            self._selector.register(pipe, selectors.EVENT_READ)
        else:
            self._chunks = queue.Queue()
            threading.Thread(target=self._pump, name="command-output", daemon=True).start()

    def read(self, timeout: float) -> bytes | None:
        """Some output, ``b""`` at its end, or None when nothing came within ``timeout``."""
        if self._selector is not None:
            if not self._selector.select(max(timeout, 0)):
                return None
            return os.read(self._pipe.fileno(), _CHUNK)
        assert self._chunks is not None
        try:
            return self._chunks.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None

    def _pump(self) -> None:
        assert self._chunks is not None
        try:
            while not self._closed.is_set() and (chunk := os.read(self._pipe.fileno(), _CHUNK)):
                self._chunks.put(chunk)
        except OSError:
            pass
        self._chunks.put(b"")

    def close(self) -> None:
        self._closed.set()
        if self._selector is not None:
            self._selector.close()
            self._pipe.close()
        # Without a selector the pump thread may be blocked in a read: it closes nothing, and ends with the pipe.
