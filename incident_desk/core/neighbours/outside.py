"""Calls to other systems (Alertmanager, model providers, and the neighbours to come) with a total deadline and a
size cap, so no neighbour can hold the desk: not one that hangs, not one that drips a byte a second, not one that
sends 200 MB.

httpx's timeouts bound each connect, write and read, not the exchange: a server sending one byte per second
never trips a 5 s read timeout. :func:`exchange` therefore runs the HTTP exchange in a thread of its own and
waits for it at most ``deadline_seconds`` of wall-clock time (connect, headers and body together); when the time
is up it answers :class:`DeadlineExceeded` at once and tells the exchange to stop, which it does at its next chunk
or when its own per-phase timeout (the same deadline) ends the blocked read. The body is streamed and counted as
it is decoded; past ``max_bytes`` the reading stops with :class:`TooLarge`, so the desk holds at most the cap.

:func:`exchange` blocks its caller: an event loop uses :func:`exchange_from_loop`, which runs it (and whatever
parses the body) in a worker thread of the outside calls' own pool, never the loop's default one.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import httpx2

from incident_desk.core import errors

T = TypeVar("T")

# Worker threads for outside calls, apart from the default pool: the stdio transport reads stdin and writes
# stdout through that pool, so calls stuck on a neighbour must never be able to fill it.
OUTSIDE_THREADS = 8
_tls: list[ssl.SSLContext] = []
_tls_lock = threading.Lock()
_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, anyio.CapacityLimiter]] = (
    weakref.WeakKeyDictionary()
)


class OutsideError(errors.Unavailable):
    """The neighbour gave no usable answer; the message names it (``what``) and why (``detail``), never a header or
    a secret."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"{what} {detail}")
        self.what = what
        self.detail = detail


class DeadlineExceeded(OutsideError):
    def __init__(self, what: str, deadline_seconds: float) -> None:
        super().__init__(what, f"did not answer within {deadline_seconds:g}s")
        self.deadline_seconds = deadline_seconds


class TooLarge(OutsideError):
    """Nothing past the cap was read: an announced length over it stops the exchange before the body."""

    def __init__(self, what: str, cap: int, announced: int | None) -> None:
        how = f"announced {announced} bytes" if announced is not None else f"sent more than {cap} bytes"
        super().__init__(what, f"answered too large a body: it {how}, over the cap of {cap} bytes; stopped reading")
        self.cap = cap


class Unreachable(OutsideError):
    """No answer came: ``reason`` says why (``connect`` when no connection was made)."""

    def __init__(self, what: str, reason: str, *, connect: bool = False) -> None:
        super().__init__(what, f"cannot be reached: {reason}")
        self.reason = reason
        self.connect = connect


class BadURL(Unreachable):
    def __init__(self, what: str) -> None:
        super().__init__(what, "its URL is not valid", connect=True)


@dataclass(frozen=True)
class Request:
    """One HTTP exchange: what to send, whom it is (``what``, for messages), and its deadline and cap."""

    method: str
    url: str
    what: str
    deadline_seconds: float
    max_bytes: int
    params: Mapping[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    json_body: Any = None
    form: Mapping[str, str] | None = None  # an application/x-www-form-urlencoded body (OAuth endpoints)
    auth: tuple[str, str] | None = None  # basic auth (user, password)


@dataclass(frozen=True)
class Response:
    """A whole answer, body included (at most the request's ``max_bytes``)."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]
    content: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    def json(self) -> Any:
        """The body as JSON (ValueError when it is not); call it off the event loop, as parsing holds the GIL."""
        return json.loads(self.content)


def exchange(request: Request) -> Response:
    """The whole answer within ``request.deadline_seconds`` and ``request.max_bytes``, else an OutsideError.

    Blocks the calling thread for at most the deadline (plus the time to start a thread).
    """
    stop = threading.Event()
    outcome: list[Response | OutsideError] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append(_exchange(request, stop))
        except OutsideError as exc:
            # Without its traceback: the exchange's frames hold the body read so far (up to the cap), which must
            # not live as long as the error does (a source caches its last failure).
            outcome.append(exc.with_traceback(None))
        except Exception as exc:  # a failure httpx does not translate: name its type only
            outcome.append(OutsideError(request.what, f"failed unexpectedly ({type(exc).__name__})"))
        finally:
            done.set()

    worker = threading.Thread(target=run, name=f"outside {request.what}", daemon=True)
    worker.start()
    if not done.wait(request.deadline_seconds):
        stop.set()
        raise DeadlineExceeded(request.what, request.deadline_seconds)
    result = outcome.pop()
    if isinstance(result, OutsideError):
        raise result
    return result


async def exchange_from_loop(request: Request, then: Callable[[Response], T]) -> T:
    """:func:`exchange` and ``then`` (parsing, checking) for a caller on the event loop, in a worker thread. A
    cancelled caller does not wait for it: the thread ends by the deadline on its own."""

    def whole() -> T:
        return then(exchange(request))

    return await anyio.to_thread.run_sync(whole, limiter=outside_threads(), abandon_on_cancel=True)


def outside_threads() -> anyio.CapacityLimiter:
    """The worker threads of outside calls in the running event loop."""
    return worker_threads("outside", OUTSIDE_THREADS)


def worker_threads(purpose: str, size: int) -> anyio.CapacityLimiter:
    """A pool of ``size`` worker threads for ``purpose`` in the running event loop, made there on first use
    (a limiter belongs to one loop; tests run several, one after the other)."""
    loop = asyncio.get_running_loop()
    pools = _limiters.setdefault(loop, {})
    limiter = pools.get(purpose)
    if limiter is None:
        limiter = pools[purpose] = anyio.CapacityLimiter(size)
    return limiter


def _tls_context() -> ssl.SSLContext:
    """One TLS context for every exchange: loading the CA bundle holds the interpreter lock long enough to stall
    the event loop, too much to pay on every call."""
    with _tls_lock:
        if not _tls:
            _tls.append(httpx2.create_ssl_context())
        return _tls[0]


def _exchange(request: Request, stop: threading.Event) -> Response:
    """The exchange itself, on its own thread; gives up at ``stop`` or at the deadline, whichever comes first."""
    what, deadline = request.what, request.deadline_seconds
    ends = time.monotonic() + deadline
    try:
        with (
            httpx2.Client(timeout=deadline, follow_redirects=False, verify=_tls_context()) as client,
            client.stream(
                request.method,
                request.url,
                params=request.params,
                headers=dict(request.headers),
                json=request.json_body,
                data=dict(request.form) if request.form is not None else None,
                auth=httpx2.BasicAuth(*request.auth) if request.auth else None,
            ) as response,
        ):
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > request.max_bytes:
                raise TooLarge(what, request.max_bytes, int(declared))
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                if stop.is_set() or time.monotonic() > ends:
                    raise DeadlineExceeded(what, deadline)
                chunks.append(chunk)
                size += len(chunk)
                if size > request.max_bytes:
                    raise TooLarge(what, request.max_bytes, None)
            return Response(response.status_code, response.reason_phrase, dict(response.headers), b"".join(chunks))
    except httpx2.TimeoutException:
        raise DeadlineExceeded(what, deadline) from None
    except (httpx2.InvalidURL, httpx2.UnsupportedProtocol):
        raise BadURL(what) from None
    except httpx2.ConnectError as exc:
        raise Unreachable(what, connect_failure(exc), connect=True) from None
    except httpx2.DecodingError as exc:
        raise OutsideError(what, f"failed unexpectedly ({type(exc).__name__})") from None
    except httpx2.HTTPError as exc:
        raise Unreachable(what, f"{exc.__class__.__name__}: {exc}") from None


def connect_failure(exc: BaseException) -> str:
    """The root cause of a failed connect: httpx only says "All connection attempts failed" and chains it."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return "host name could not be resolved"
        seen = seen.__cause__ or seen.__context__
    return f"could not connect ({exc.__class__.__name__})"


__all__ = [
    "BadURL",
    "DeadlineExceeded",
    "OutsideError",
    "Request",
    "Response",
    "TooLarge",
    "Unreachable",
    "connect_failure",
    "exchange",
    "exchange_from_loop",
    "outside_threads",
    "worker_threads",
]
