"""structlog and the SDK's server imported without rich: the desk draws nothing with it.

When rich is installed (the SDK's extra, hypothesis, twine), structlog's ``dev`` and ``tracebacks`` modules import
its console, traceback and pretty-printer, and pygments and attrs with them: about a tenth of a stdio desk's
start before its ``initialize`` answer, for tracebacks the desk never draws that way (``log.configure`` formats
exceptions as plain text before its renderer sees them; a console renderer then falls back to plain tracebacks).
The command line imports structlog first, before anything else does.

``MCPServer`` then sets up logging on its own: it imports rich's console to make a handler for ``basicConfig``,
which drops it, because the desk's handler is on the root logger already (``log.configure``). That import was
13 ms of a stdio desk's start; built without rich, the SDK makes a plain handler and drops that instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def rich_absent() -> Iterator[None]:
    """``import rich`` raises ImportError inside, unless rich is imported already (then nothing changes)."""
    if "rich" in sys.modules:
        yield
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError while this is set
    try:
        yield
    finally:
        del sys.modules["rich"]


def import_structlog() -> None:
    """Import structlog as if rich were absent, unless either is imported already (then nothing changes)."""
    if "structlog" in sys.modules:
        return
    with rich_absent():
        import structlog  # noqa: F401
