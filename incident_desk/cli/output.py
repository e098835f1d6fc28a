"""What a subcommand prints: the output it exists to give alone on stdout (it gets piped), every remark on stderr.

Serving never prints: in stdio mode stdout belongs to the protocol, and the desk's own log goes through structlog.
"""

from __future__ import annotations

import sys


def out(text: str) -> None:
    """A line of the command's output."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def err(text: str) -> None:
    """A remark for the person at the terminal."""
    sys.stderr.write(f"incident-desk: {text}\n")
