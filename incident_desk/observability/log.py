"""Logging to stderr only: in stdio mode stdout carries the protocol, and one stray line breaks every client.

structlog renders the desk's own events; the standard library's loggers (the SDK, uvicorn) are routed through
the same renderer so a JSON log stays JSON from end to end. Those loggers are where a hostile HTTP peer can make
lines repeat (a malformed request, a refused connection, each thousands of times a second), so their repeats are
rate-limited; and the access log never writes a query string, which is where a misplaced token would be.
"""

from __future__ import annotations

import logging
import select
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TextIO, cast

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
REPEATS_PER_WINDOW = 5
REPEAT_WINDOW_SECONDS = 60.0
_MAX_TRACKED_MESSAGES = 1000


@dataclass
class _Window:
    start: float
    shown: int = 1
    held_back: int = 0


class RepeatLimiter(logging.Filter):
    """At most ``burst`` lines per logger, level and message template in each ``window`` seconds.

    The first line after a window in which some were held back says how many, so nothing vanishes unannounced.
    """

    def __init__(
        self,
        burst: int = REPEATS_PER_WINDOW,
        window: float = REPEAT_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._burst = burst
        self._window = window
        self._clock = clock
        self._seen: dict[tuple[str, int, str], _Window] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen.start < self._window:
            if seen.shown < self._burst:
                seen.shown += 1
                return True
            seen.held_back += 1
            return False
        if len(self._seen) >= _MAX_TRACKED_MESSAGES:
            self._seen = {k: w for k, w in self._seen.items() if now - w.start < self._window and w.held_back}
        self._seen[key] = _Window(start=now)
        if seen is not None and seen.held_back:
            record.msg = f"{record.msg} [{seen.held_back} more like this held back in the previous window]"
        return True


APPROVAL_LINKS = "/approvals/"  # the approval page's prefix (auth.APPROVAL_PAGE_PREFIX)
APPROVAL_SIGN_IN = "/approvals/sign-in/callback"


class WithholdQueryStrings(logging.Filter):
    """uvicorn's access log writes the request target with its query string: keep the path, drop the query; and
    an approval page's path carries its single-use link, which is withheld too."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) == 5 and isinstance(record.args[2], str):
            path, separator, _ = record.args[2].partition("?")
            if path.startswith(APPROVAL_LINKS) and path != APPROVAL_SIGN_IN:
                path = APPROVAL_LINKS + "[link withheld]"
            shown = path + ("?[query withheld]" if separator else "")
            record.args = (*record.args[:2], shown, *record.args[3:])
        return True


def _would_block(stream: TextIO) -> bool:
    """Whether writing a line to ``stream`` now could wait: its pipe is full because nobody reads it. Unknown (not
    a file, or Windows, where pipes cannot be polled) counts as free."""
    if sys.platform == "win32":
        return False
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
        return not poller.poll(0)
    except (AttributeError, OSError, ValueError):
        return False


class _CurrentStderr:
    """Whatever ``sys.stderr`` is when a line is written, not when logging was configured.

    A command run in-process (by tests, or by an embedding program that swaps stderr) must not leave the log
    bound to a stream that has since been closed. A line that would wait (a client that pipes the desk's stderr
    and never reads it, once the pipe is full) is dropped and counted, never left to hold the event loop; the
    next line written says how many went.
    """

    def __init__(self) -> None:
        self.dropped = 0

    def write(self, text: str) -> int:
        stream = sys.stderr
        if _would_block(stream):
            self.dropped += 1
            return len(text)
        if self.dropped:
            dropped, self.dropped = self.dropped, 0
            stream.write(f"[incident-desk: {dropped} log lines dropped while nothing read stderr]\n")
        return stream.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure(
    level: Literal["debug", "info", "warning", "error"] = "info",
    fmt: Literal["auto", "console", "json"] = "auto",
    stream: TextIO | None = None,
) -> None:
    """Point structlog and stdlib logging at stderr with one renderer."""
    stream = stream or cast(TextIO, _CurrentStderr())
    use_json = fmt == "json" or (fmt == "auto" and not stream.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.WriteLoggerFactory(stream),  # one write per line: a line goes whole or not at all
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.addFilter(RepeatLimiter())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(_LEVELS[level])
    # The SDK and HTTP stack are chatty at INFO (one line per request); keep them at WARNING unless debugging.
    for noisy in ("mcp", "uvicorn.access", "httpx2", "sse_starlette"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if level == "debug" else logging.WARNING)
    access = logging.getLogger("uvicorn.access")
    for existing_filter in list(access.filters):
        if isinstance(existing_filter, WithholdQueryStrings):
            access.removeFilter(existing_filter)
    access.addFilter(WithholdQueryStrings())
