"""Helper processes that work on a big log's stretches, a stretch each, while the desk's own process merges.

Threads cannot share the counting: the kernel's numpy calls are short and two threads hand the interpreter lock to
each other thousands of times a second (``timeline_chunks.WORKERS``). Processes each have their own lock and core.
A helper gets the open log itself (its descriptor, over a pipe), never its path: a path opened again could lead to
another file. It reads with ``pread`` (the shared offset of the caller's handle is left alone), counts the lines
that start in its stretch with the same kernel and sends back per-minute counts, a few hundred numbers. The
helpers start after the first scan that needed them, never during it (a second or so of a new interpreter loading
numpy, on the cores that scan needs), and stay for the next;
a helper that dies, hangs past its stretch or is busy with another scan costs only speed: the caller counts the
rest itself. A helper idle for ``IDLE_SECONDS`` ends, giving its memory (some 60 MiB: numpy, RE2, its buffers) back.

Both the timeline (``core.timeline.helped``) and the search (``core.search.processes``) lend them:
``helped_stretches`` asks them for any work on a log's stretches (``("run", function, arguments)``, the function
pickled by name), in log order. This module knows neither kind of work.

How many cores the desk may use is counted here too (``usable_cores``), for the pool and for the search's own
threads: the machine's, fewer where the process's CPU affinity (``taskset``) or its cgroup's CPU quota (a container
started with ``--cpus``) says so. Counted by ``os.cpu_count()`` alone, a container held to one core of a large host
would start helpers and threads to compete for that one core.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import itertools
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator
from multiprocessing import reduction
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, BinaryIO

import structlog

from incident_desk.core import errors

STRETCH_BYTES = 32 * 1024 * 1024  # a helper's share at a time: some 50 ms of counting, so budgets stay close
_FIND_LINE_BYTES = 64 * 1024  # read at a time while looking for a line's start
# A stretch takes some 50 ms, up to 40 s of hostile lines (10 ms per 8 KiB); a helper later than this is taken as
# stopped or starved and ended (the caller goes on without it). A caller may give a stretch less (the search: what
# leaves it time to read the stretch itself), and its time budget may end its wait sooner still.
STRETCH_SECONDS = 60.0
_WAIT_SECONDS = 0.02  # how often a caller waiting for a count looks at its budget
# How long a scan waits, before it is lent helpers, for what an earlier scan that stopped early had asked of them:
# a healthy helper's stretch is some 50 ms. One still busy after that is not lent this time (a stopped one would
# cost the scan its budget), and is ended once its oldest stretch is ``STRETCH_SECONDS`` old.
_DRAIN_SECONDS = 0.1
GIVE_UP_AFTER = 3
# Modules a helper loads (and warms up, through their ``warm_up()``) before it says it is ready: the timeline's
# counting by default, since a helper's first stretch must not wait on numpy; other work adds its own. By name, so
# that this module imports none of the work it serves.
PRELOADED: list[str] = ["incident_desk.core.timeline.helped"]
IDLE_SECONDS = 600.0  # a helper left idle this long ends
_log = structlog.get_logger(__name__)


CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cores() -> int:
    """The cores this process may use: the machine's, its affinity's and its cgroup quota's least (at least 1)."""
    cores = os.cpu_count() or 1
    affinity = getattr(os, "sched_getaffinity", None)  # Linux only: elsewhere the machine's count stands
    if affinity is not None:
        with contextlib.suppress(OSError):
            cores = min(cores, len(affinity(0)))
    quota = cgroup_cpu_quota(CGROUP_ROOT)
    if quota is not None:
        cores = min(cores, int(quota))
    return max(1, cores)


@functools.lru_cache(maxsize=4)
def cgroup_cpu_quota(root: Path) -> float | None:
    """The CPUs this process's cgroup may use (``1.5``), None where no quota is set or none can be read: cgroup v2's
    ``cpu.max`` of the process's own group, else v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``. Read once:
    a quota is set when the container starts."""
    try:
        own = Path("/proc/self/cgroup").read_text(encoding="ascii", errors="replace")
    except OSError:
        own = ""
    group = next((line[3:].strip() for line in own.splitlines() if line.startswith("0::")), None)
    if group is not None:
        limit = _read(root / group.lstrip("/") / "cpu.max") or _read(root / "cpu.max")
        if limit is not None:
            quota, _, period = limit.partition(" ")
            return _ratio(quota, period)
    quota_text, period_text = _read(root / "cpu" / "cpu.cfs_quota_us"), _read(root / "cpu" / "cpu.cfs_period_us")
    if quota_text is None or period_text is None:
        return None
    return _ratio(quota_text, period_text)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _ratio(quota: str, period: str) -> float | None:
    """``quota / period`` as CPUs; None for no quota (``max``, ``-1``) or a text that is not one."""
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return quota_us / period_us


def default_processes() -> int:
    """Helpers worth starting here: one per core on two cores or more, at most two. None on Windows: handing a
    helper the log is written for POSIX descriptors (Windows would need its handles) and has not run there."""
    cores = usable_cores()
    return 0 if cores < 2 or sys.platform == "win32" else min(cores, 2)


class Span:
    """``handle``-like reads of ``begin .. end`` of a descriptor by position."""

    def __init__(self, fd: int, begin: int, end: int) -> None:
        self.fd, self.at, self.end = fd, begin, end

    def readinto(self, into: memoryview) -> int:
        size = min(len(into), self.end - self.at)
        if size <= 0:
            return 0
        if hasattr(os, "preadv"):
            got = os.preadv(self.fd, [into[:size]], self.at)
        else:  # macOS before 11: one copy more
            block = os.pread(self.fd, size, self.at)
            got = len(block)
            into[:got] = block
        self.at += got
        return got


def on_disk(handle: BinaryIO) -> bool:
    """Whether the handle is an open file helpers can be given (a test's BytesIO is not)."""
    try:
        handle.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    return True


def line_start_at(fd: int, offset: int) -> int | None:
    """The first line start at or after ``offset``; None when the log ends first (past a last line with no
    newline)."""
    if offset <= 0:
        return 0
    at = offset - 1
    while True:
        block = os.pread(fd, _FIND_LINE_BYTES, at)
        if not block:
            return None
        newline = block.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(block)


def _serve(connection: Connection, idle_seconds: float, preloaded: tuple[str, ...] = ()) -> None:
    """A helper's life: load the kernel (and ``preloaded``) and say so, take a log's descriptor, do the work on
    its stretches asked of it (count them for a timeline, ``run`` a function for a search), until the desk hangs
    up."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # the desk's stdin and stdout carry its protocol: never read or write them here
    os.dup2(devnull, 1)
    for name in preloaded:
        module = importlib.import_module(name)
        warm_up = getattr(module, "warm_up", None)
        if callable(warm_up):
            warm_up()
    connection.send(_READY)
    fd: int | None = None
    while True:
        try:
            if fd is None and not connection.poll(idle_seconds):
                return  # its memory back to the machine; the next big timeline starts another
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message[0] == "log":
            if fd is not None:
                os.close(fd)
            fd = reduction.recv_handle(connection)
        elif message[0] == "run" and fd is not None:
            try:
                answer: tuple[str, Any] = ("done", message[1](fd, *message[2]))
            except Exception as exc:  # any failure is the desk's to report; the helper lives on
                answer = ("failed", f"{type(exc).__name__}: {exc}")
            connection.send(answer)
        elif message[0] == "close" and fd is not None:
            os.close(fd)
            fd = None


_READY = ("ready",)


class Helper:
    """One helper process and the desk's end of its pipe; ``asked_at``: when each of its stretches under way was
    asked, oldest first. It is asked for nothing before it says it is ready (its interpreter started, numpy and RE2
    loaded)."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")  # never fork a process that runs threads
        self.connection, theirs = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(theirs, IDLE_SECONDS, tuple(PRELOADED)), name="incident-desk-helper", daemon=True
        )
        self.process.start()
        theirs.close()
        self.asked_at: collections.deque[float] = collections.deque()  # when each stretch under way was asked
        self.is_ready = False

    @property
    def asked(self) -> int:
        """Stretches asked of it and not yet answered."""
        return len(self.asked_at)

    def ask(self, message: tuple[Any, ...]) -> None:
        self.connection.send(message)
        self.asked_at.append(time.monotonic())

    def answered(self) -> tuple[str, Any]:
        """Its oldest answer (it has one waiting)."""
        answer: tuple[str, Any] = self.connection.recv()
        self.asked_at.popleft()
        return answer

    def overdue(self) -> bool:
        """Whether its oldest stretch under way was asked more than ``STRETCH_SECONDS`` ago."""
        return bool(self.asked_at) and time.monotonic() - self.asked_at[0] > STRETCH_SECONDS

    def ready(self) -> bool:
        """Whether it said it is ready; never waits."""
        if not self.is_ready:
            with contextlib.suppress(EOFError, OSError):
                if self.connection.poll(0):
                    self.is_ready = self.connection.recv() == _READY
        return self.is_ready

    def wait_ready(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not self.ready() and self.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.ready()

    def alive(self) -> bool:
        return self.process.is_alive() and not self.connection.closed

    def end(self) -> None:
        self.connection.close()
        self.process.kill()
        self.process.join(1)


class _Helpers:
    """The desk's helpers, lent to one scan at a time: a second scan meanwhile counts in its own process. After
    ``GIVE_UP_AFTER`` scans in a row that lost a helper, the desk counts alone (helpers cannot run here, say)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._helpers: list[Helper] = []
        self.failures = 0

    @contextlib.contextmanager
    def lent(self, count: int) -> Iterator[list[Helper]]:
        if count <= 0 or self.failures >= GIVE_UP_AFTER or not self._lock.acquire(blocking=False):
            yield []
            return
        lent: list[Helper] = []
        try:
            states: dict[str, list[Helper]] = {"idle": [], "busy": [], "gone": []}
            for helper in self._helpers:
                states[_state(helper)].append(helper)
            idle, busy, gone = states["idle"], states["busy"], states["gone"]
            if any(not helper.is_ready for helper in gone):
                self.failed("a timeline helper ended before it was ready")
            self._helpers = idle + busy
            try:
                while len(self._helpers) < count:
                    started = Helper()
                    self._helpers.append(started)
                    idle.append(started)
            except OSError as exc:  # no processes left to the desk, say: its own process counts
                _log.warning("timeline helpers not started", error=str(exc))
            lent = idle[:count]
            yield lent
        finally:
            for helper in lent:
                with contextlib.suppress(OSError):
                    helper.connection.send(("close",))  # after the counts under way: read before the next scan
            self._lock.release()

    def failed(self, reason: str) -> None:
        self.failures += 1
        _log.warning("timeline counted without helpers", error=reason, failures_in_a_row=self.failures)
        if self.failures == GIVE_UP_AFTER:
            _log.warning("timeline helpers given up: the desk counts alone from now on")

    def succeeded(self) -> None:
        self.failures = 0

    def pids(self) -> list[int]:
        """The helpers' process ids (for a look from outside: tests, diagnostics)."""
        return [helper.process.pid for helper in self._helpers if helper.alive() and helper.process.pid is not None]

    def ready(self, count: int) -> bool:
        """Whether ``count`` helpers are started, free and ready now; never starts one, never waits."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return len(self._helpers) >= count and all(helper.ready() for helper in self._helpers[:count])
        finally:
            self._lock.release()

    def start(self, count: int, *, wait_seconds: float = 0.0) -> bool:
        """Start ``count`` helpers now, and wait up to ``wait_seconds`` for them to be ready (tests, benches)."""
        with self.lent(count) as helpers:
            return len(helpers) == count and all(helper.wait_ready(wait_seconds) for helper in helpers)

    def end_all(self) -> None:
        with self._lock:
            for helper in self._helpers:
                helper.end()
            self._helpers.clear()
            self.failures = 0


def _state(helper: Helper) -> str:
    """``idle`` (alive, the answers left from an earlier scan read and dropped), ``busy`` (alive, still working
    on an earlier scan's stretch after ``_DRAIN_SECONDS``: kept, not lent) or ``gone`` (dead, or its oldest
    stretch overdue: ended)."""
    drain_until = time.monotonic() + _DRAIN_SECONDS
    try:
        while helper.alive() and helper.asked:
            if not helper.connection.poll(max(drain_until - time.monotonic(), 0)):
                break
            helper.answered()
    except (EOFError, OSError):
        helper.end()
        return "gone"
    if helper.alive() and not helper.asked:
        return "idle"
    if helper.alive() and not helper.overdue():
        return "busy"
    helper.end()
    return "gone"


HELPERS = _Helpers()


class _Failed(errors.Unavailable):
    """A helper died, failed or hung: the caller counts the rest itself."""


def helped_stretches(
    helpers: list[Helper],
    handle: BinaryIO,
    begin: int,
    end: int,
    *,
    ask: Callable[[int, int], tuple[Any, ...]],
    should_stop: Callable[[], bool],
    stretch_bytes: int = STRETCH_BYTES,
    announce: bool = False,
    stretch_seconds: Callable[[], float] | None = None,
) -> Generator[Any, None, None]:
    """The answers of ``helpers`` (lent and ready) to ``ask(stretch_begin, stretch_end)`` (the message asking for
    a stretch's work), for each stretch of ``begin .. end`` of the open log in log order; stops early as
    ``stretch_counts`` does. ``announce``: first yield None once the helpers have their first stretches, so the
    caller can work meanwhile. ``stretch_seconds``: how long the caller waits for the next answer from now
    (default ``STRETCH_SECONDS``); a helper later than that is ended and the generator stops, so the caller reads
    that stretch itself. Stop asking at any point."""
    asked: list[Helper] = []  # who works on each stretch, in log order
    try:
        for helper in helpers:
            helper.connection.send(("log",))
            reduction.send_handle(helper.connection, handle.fileno(), helper.process.pid)
        cuts = [*range(begin, end, stretch_bytes), end]
        for stretch in itertools.pairwise(cuts):
            # Two each, in turn: a helper always has its next stretch waiting.
            while min(helper.asked for helper in helpers) >= 2:
                if announce:
                    announce = False
                    yield None
                yield _answer(asked.pop(0), should_stop, stretch_seconds)
            helper = min(helpers, key=lambda h: h.asked)
            helper.ask(ask(*stretch))
            asked.append(helper)
        if announce:
            yield None
        while asked:
            yield _answer(asked.pop(0), should_stop, stretch_seconds)
        HELPERS.succeeded()
    except _Stopped:
        return
    except _Failed as exc:
        HELPERS.failed(str(exc))
    except (EOFError, OSError) as exc:
        HELPERS.failed(f"a timeline helper ended: {exc or type(exc).__name__}")


class _Stopped(errors.Unavailable):
    """The caller's budget ran out while it waited."""


def _answer(helper: Helper, should_stop: Callable[[], bool], stretch_seconds: Callable[[], float] | None) -> Any:
    """``helper``'s oldest answer asked for, once it comes; a helper that does not answer within
    ``stretch_seconds()`` (default ``STRETCH_SECONDS``) is ended."""
    due = STRETCH_SECONDS if stretch_seconds is None else min(stretch_seconds(), STRETCH_SECONDS)
    given_up_at = time.monotonic() + due
    while not helper.connection.poll(_WAIT_SECONDS):
        if should_stop():
            raise _Stopped
        if time.monotonic() > given_up_at:
            helper.end()
            raise _Failed(f"a timeline helper took over {due:.2g} s for one stretch")
    kind, answer = helper.answered()
    if kind != "done":
        raise _Failed(f"a timeline helper failed: {answer}")
    return answer
