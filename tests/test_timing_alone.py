"""The ``timing`` mark keeps every other test out while a timing test's body runs (tests/timing_alone.py).

A small suite in a temporary folder runs on two workers: each test writes when its body began and ended. The
plain tests must overlap one another (so the two workers really ran side by side and the check below could fail),
and no test may overlap a timing test's body.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.timing_alone import SETTLE_SECONDS, left_running

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


LEFTOVER = """
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
time.sleep(1.5)
"""


def test_a_process_an_earlier_step_left_in_this_environment_is_found() -> None:
    # The leftover says it is up before it is looked for: once in a parallel run it was not found, and a process
    # that had already ended (a zombie, whose command line reads empty) would look just like that.
    with subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    ) as leftover:
        try:
            assert leftover.stdout is not None and leftover.stdout.readline() == "up\n", f"exit {leftover.poll()}"
            found = left_running()
            still_running = leftover.poll() is None
        finally:
            leftover.kill()
    assert still_running, "the leftover ended while it was looked for"
    assert any(line.startswith(f"{leftover.pid} ") for line in found), found
    assert not any(line.startswith(f"{os.getpid()} ") for line in found), "this process is no leftover"
    assert not any(line.startswith(f"{leftover.pid} ") for line in left_running())
    assert left_running(interpreter=f"nothing-runs-this-{os.getpid()}") == []


@pytest.mark.subprocess
def test_a_serial_timing_run_waits_for_what_an_earlier_step_left_running(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    timing: alone\n")
    collected = tmp_path / "collected"
    (tmp_path / "test_timed.py").write_text(f"open({str(collected)!r}, 'w').close()\n" + _module("timed", timing={0}))
    # Ends 1.5 s after the run has collected its tests; named apart from this run's own workers and desks, which
    # share this environment's interpreter.
    marker = f"leftover-{os.getpid()}-{tmp_path.name}"
    leftover = subprocess.Popen([sys.executable, "-c", LEFTOVER, str(collected), marker])
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "tests.timing_alone", "-n", "0", "-q"],
            cwd=tmp_path,
            env={
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": str(ROOT),
                "SPANS": str(tmp_path / "spans.jsonl"),
                "TIMING_SETTLE_COMMAND": marker,
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        leftover.kill()
        leftover.wait()
    assert run.returncode == 0, run.stdout + run.stderr
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("timing tests start after ")]
    waited = float(line.split()[4])
    assert 0.5 < waited < SETTLE_SECONDS, line
    assert "nothing of an earlier step still running" in line
    assert f"on {os.cpu_count()} cores" in line
