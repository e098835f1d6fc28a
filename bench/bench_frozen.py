"""Cold start of the PyInstaller onedir build against the same desk run from the venv, as a ratio in one run.

Both are spawned as a desktop client spawns them and timed from spawn to the initialize answer, in interleaved
rounds (alternating which goes first). Build first with ``python packaging/build.py``.
Run: .venv/bin/python bench/bench_frozen.py [rounds] [executable]
"""

from __future__ import annotations

import compileall
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXECUTABLE = ROOT / "packaging" / "dist" / "onedir" / "incident-desk" / "incident-desk"


async def _cold_start(params: StdioServerParameters) -> float:
    start = time.perf_counter()
    async with Client(params, mode="legacy"):
        return time.perf_counter() - start


async def main(rounds: int, executable: Path) -> None:
    # As an install does (pip byte-compiles; uv and Python write .pyc on first import): never time compiling the
    # desk's sources, which happens on every start where .pyc cannot be written (PYTHONDONTWRITEBYTECODE).
    compileall.compile_dir(ROOT / "incident_desk", quiet=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    scratch = tempfile.mkdtemp(prefix="desk-bench-frozen-")
    env.update(
        INCIDENT_DESK_AUDIT_DB=f"{scratch}/audit.sqlite3",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        INCIDENT_DESK_LOG_LEVEL="warning",
    )
    venv = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    frozen = StdioServerParameters(command=str(executable), args=[], cwd=str(ROOT), env=env)
    await _cold_start(frozen)  # the first start after a build reads the files from disk
    await _cold_start(venv)
    times: dict[str, list[float]] = {"venv": [], "onedir": []}
    for number in range(rounds):
        order = [("venv", venv), ("onedir", frozen)]
        for name, params in order if number % 2 == 0 else reversed(order):
            times[name].append(await _cold_start(params))
    venv_median, frozen_median = statistics.median(times["venv"]), statistics.median(times["onedir"])
    # Each round's onedir start against the venv start next to it: steadier than the ratio of the medians when
    # the machine drifts during the run.
    per_round = [frozen / venv for venv, frozen in zip(times["venv"], times["onedir"], strict=True)]
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cores; {rounds} interleaved rounds")
    print(
        f"cold start to initialized: venv {venv_median:.3f} s, onedir {frozen_median:.3f} s, "
        f"ratio {frozen_median / venv_median:.2f}; per round {statistics.median(per_round):.2f} "
        f"({min(per_round):.2f}-{max(per_round):.2f})"
    )


if __name__ == "__main__":
    anyio.run(
        main,
        int(sys.argv[1]) if len(sys.argv) > 1 else 10,
        Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_EXECUTABLE,
    )
