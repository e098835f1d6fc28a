"""Runbook action test helpers: a `flush` action (with choices, and an optional preview) running a script the test
wrote, which appends one line per run, so each test can count exactly what ran."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.restart_helpers import SERVICE, Restarts

FLUSH_SCRIPT = """\
import sys, time
ran, service, cache = sys.argv[1:4]
with open(ran, "a", encoding="utf-8") as f:
    f.write(f"{service} {cache}\\n")
print(f"flushed {cache} of {service}", flush=True)
time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 0)
"""

PREVIEW_SCRIPT = """\
import sys
print(f"would flush 42 keys from {sys.argv[1]} of {sys.argv[2]}")
print("token=sk_live_abcdefghijklmnopqrstuvwx")
"""


class Flush:
    """A `flush` action the test controls: ``runs()`` lists each run's service and cache."""

    def __init__(self, tmp_path: Path) -> None:
        self.script, self.preview_script = tmp_path / "flush.py", tmp_path / "flush_preview.py"
        self.script.write_text(FLUSH_SCRIPT, encoding="utf-8")
        self.preview_script.write_text(PREVIEW_SCRIPT, encoding="utf-8")
        self.ran = tmp_path / "flushed.txt"

    def action(self, *, preview: bool = False, sleep: float = 0.0, **more: Any) -> dict[str, Any]:
        table: dict[str, Any] = {
            "description": "Flush one of the service's caches",
            "argv": [sys.executable, str(self.script), str(self.ran), "{service}", "{cache}", str(sleep)],
            "parameters": {"cache": {"choices": ["sessions", "prices"], "description": "which cache"}},
            "timeout_seconds": 30,
            **more,
        }
        if preview:
            table["preview_argv"] = [sys.executable, str(self.preview_script), "{cache}", "{service}"]
        return table

    def services(self, restarts: Restarts | None = None, **action: Any) -> dict[str, Any]:
        base = restarts.action() if restarts is not None else {}
        return {SERVICE: {**base, "actions": {"flush": self.action(**action)}}}

    def runs(self) -> list[str]:
        return self.ran.read_text(encoding="utf-8").splitlines() if self.ran.exists() else []


@pytest.fixture(name="flush")
def flush_fixture(tmp_path: Path) -> Flush:
    return Flush(tmp_path)
