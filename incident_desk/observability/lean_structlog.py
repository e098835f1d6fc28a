"""structlog imported without rich: the command line imports it first, before anything else does.

When rich is installed (the SDK's extra, hypothesis, twine), structlog's ``dev`` and ``tracebacks`` modules import
its console, traceback and pretty-printer, and pygments and attrs with them: about a tenth of a stdio desk's
start before its ``initialize`` answer, for tracebacks the desk never draws that way (``log.configure`` formats
exceptions as plain text before its renderer sees them; a console renderer then falls back to plain tracebacks).
The SDK's own logging still imports the parts of rich it uses, as it would without the desk.
"""

from __future__ import annotations

import sys


def import_structlog() -> None:
    """Import structlog as if rich were absent, unless either is imported already (then nothing changes)."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError while this is set
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]
