"""The ``timing`` mark keeps every other test out while a timing test's body runs (tests/timing_alone.py).

A small suite in a temporary folder runs on two workers: each test writes when its body began and ended. The
plain tests must overlap one another (so the two workers really ran side by side and the check below could fail),
and no test may overlap a timing test's body.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

_SUITE = """
import json, os, time
import pytest

def _record(name, seconds):
    began = time.monotonic()
    time.sleep(seconds)
    with open(os.environ["SPANS"], "a") as spans:
        spans.write(json.dumps([name, began, time.monotonic()]) + "\\n")

{tests}
"""


def _module(prefix: str, timing: set[int]) -> str:
    tests = [
        f"{'@pytest.mark.timing' if number in timing else ''}\ndef test_{prefix}{number}():\n"
        f"    _record('{prefix}{number}{'*' if number in timing else ''}', 0.3)\n"
        for number in range(6)
    ]
    return _SUITE.format(tests="\n".join(tests))


@pytest.mark.subprocess
def test_no_test_runs_beside_a_timing_tests_body(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    timing: alone\n")
    (tmp_path / "test_left.py").write_text(_module("left", timing={2}))
    (tmp_path / "test_right.py").write_text(_module("right", timing={4}))
    spans_file = tmp_path / "spans.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.timing_alone", "-n", "2", "--dist", "loadfile", "-q"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "SPANS": str(spans_file)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    assert len(spans) == 12

    def overlapping(one: list[str | float], other: list[str | float]) -> bool:
        return one is not other and float(one[1]) < float(other[2]) and float(other[1]) < float(one[2])

    timing = [span for span in spans if str(span[0]).endswith("*")]
    plain = [span for span in spans if span not in timing]
    assert len(timing) == 2
    assert any(overlapping(one, other) for one in plain for other in plain), "the two workers never ran side by side"
    beside = [(span[0], other[0]) for span in timing for other in spans if overlapping(span, other)]
    assert beside == [], "tests ran beside a timing test's body"
