"""The two 30-second load runs that used to sit in the test suite, at full size, with the same checks.

- 50 clients sharing one token on one HTTP desk for 30 s, half long-lived and half reconnecting for every round:
  no error, no wrong answer, no session refused or closed under a live client;
- two replicas behind Debian's nginx on one PostgreSQL journal, 25 clients each for 30 s, each approving simulated
  restarts of its own service in both eras: every returned decision journalled by exactly one replica, each
  replica deciding at least a quarter of them.

The suite runs the same paths briefly (tests/load_runs.py). This is a check of what holds under load, not a
timing: it reports the rounds each run answered and exits 1 if a check failed. Needs Debian's PostgreSQL and nginx
for the second run (as the tests do).
Run: .venv/bin/python bench/bench_load.py [seconds per run, default 30]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.load_runs import clients_sharing_one_token, replicas_behind_nginx  # noqa: E402
from tests.postgres_cluster import running_cluster  # noqa: E402 -- the tests' throwaway servers, on the path set above

CLIENTS = 50
CLIENTS_PER_REPLICA = 25


async def main(seconds: float) -> int:
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        try:
            done = await clients_sharing_one_token(Path(scratch), CLIENTS, seconds)
            print(f"{CLIENTS} clients, one token, one desk: {done.rounds} rounds in {done.seconds:.0f} s, checks held")
        except AssertionError as failure:
            failed += 1
            print(f"{CLIENTS} clients, one token, one desk: FAILED {failure}")
    with tempfile.TemporaryDirectory() as scratch, running_cluster() as cluster:
        try:
            done = await replicas_behind_nginx(
                Path(scratch), cluster.new_database("load"), CLIENTS_PER_REPLICA, seconds
            )
            print(f"2 replicas x {CLIENTS_PER_REPLICA} clients behind nginx: {done.rounds} decisions, checks held")
        except AssertionError as failure:
            failed += 1
            print(f"2 replicas x {CLIENTS_PER_REPLICA} clients behind nginx: FAILED {failure}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, float(sys.argv[1]) if len(sys.argv) > 1 else 30.0))
