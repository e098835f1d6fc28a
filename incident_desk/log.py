"""Logging to stderr only: in stdio mode stdout carries the protocol, and one stray line breaks every client.

structlog renders the desk's own events; the standard library's loggers (the SDK, uvicorn) are routed through
the same renderer so a JSON log stays JSON from end to end.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO, cast

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _CurrentStderr:
    """Whatever ``sys.stderr`` is when a line is written, not when logging was configured.

    A command run in-process (by tests, or by an embedding program that swaps stderr) must not leave the log
    bound to a stream that has since been closed.
    """

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

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
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
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
