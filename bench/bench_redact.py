"""Cost of redaction with the current rules, as a ratio against the rules before the secrets corpus.

Redaction runs on every line the desk shows: one line at a time (a search hit), a page of lines, a tail window
of 256 KiB, and a search block of lines that hold none of the rules' triggers (the worst case for the new rules,
which have more triggers to look for). Both rule sets run on the same generated log (realistic service lines,
about one in a hundred carrying a secret) in interleaved rounds, so machine noise hits both alike.
Run: .venv/bin/python bench/bench_redact.py [rounds]
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import redact_baseline
from incident_desk.core.redaction import face as redact_current

ORDINARY = (
    "{ts} INFO payments-api request_id={uuid} method=POST path=/v1/charges status=200 duration_ms={n}",
    "{ts} WARN search-api index segment merge running shard={n} docs={n}",
    "{ts} INFO search-api p99 latency {n}ms (SLO 500ms), p50 {n}ms",
    '10.0.{n}.12 - - [01/May/2024:10:00:03 +0000] "GET /api/v1/users/{n}?page=2 HTTP/1.1" 200 1532 "-" "curl/8.5"',
    "{ts} ERROR payments-api upstream timeout after 30s calling https://ledger.internal:8443/v2/entries",
    '  File "/usr/lib/python3.11/site-packages/sqlalchemy/engine/base.py", line {n}, in _exec_single_context',
    "    at com.example.payments.ChargeService.process(ChargeService.java:{n})",
    "{ts} DEBUG worker[{n}] picked job {uuid} from queue charges attempt=1",
    "{ts} INFO deploy checked out 3f2a9c4e1b7d8a6f5e4c3b2a1908f7e6d5c4b3a2 (main) in {n}ms",
    "{ts} INFO llm call model=gpt-4o max_tokens=120 tokens_used={n} temperature=0.2",
    "{ts} INFO cache hit ratio 0.93 keyspace=payments evicted_keys={n}",
    "{ts} WARN session pool near capacity active={n} max=500",
)
SECRET = (
    "{ts} ERROR db connect failed dsn=postgres://app:Hunter2{n}xQ@db.internal:5432/payments",
    "{ts} DEBUG outgoing headers Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ7bn0ifQ.sig{n}Abc",
    "{ts} INFO env SECRET_KEY=django-insecure-{n}k2^z&y!q",
    "{ts} WARN retrying with api_key=AbC{n}xyz987QWE",
)


def generate_log(lines: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for index in range(lines):
        templates = SECRET if rng.random() < 0.01 else ORDINARY
        template = templates[rng.randrange(len(templates))]
        out.append(
            template.format(
                ts=f"2024-05-01T10:{index // 600 % 60:02d}:{index // 10 % 60:02d}.{index % 1000:03d}Z",
                uuid=f"{rng.getrandbits(128):032x}",
                n=rng.randrange(1, 100_000),
            )
        )
    return out


def _time(function: Callable[[], object], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        function()
    return (time.perf_counter() - start) / repeat


def main(rounds: int) -> None:
    lines = generate_log(20_000)
    window = "\n".join(lines)[-256 * 1024 :]
    window = window[window.index("\n") + 1 :]
    page = lines[:100]
    quiet = ("2026-11-29T10:58:12Z payments-api INFO request served status=200 latency_ms=12 " + "." * 20 + "\n") * (
        1024 * 1024 // 100
    )
    shapes: dict[str, Callable[[Callable[[str], str]], Callable[[], object]]] = {
        "one line at a time (1,000 lines)": lambda redact: lambda: [redact(line) for line in lines[:1000]],
        "a page of 100 lines as one block": lambda redact: lambda: redact("\n".join(page)),
        "a 256 KiB tail window": lambda redact: lambda: redact(window),
        "1 MiB of lines with no trigger at all": lambda redact: lambda: redact(quiet),
    }
    print(f"redact(): current rules / rules before the corpus, median of {rounds} interleaved rounds")
    for name, shape in shapes.items():
        old_times, new_times = [], []
        for _ in range(rounds):
            old_times.append(_time(shape(redact_baseline.redact), 5))
            new_times.append(_time(shape(redact_current.redact), 5))
        old, new = statistics.median(old_times), statistics.median(new_times)
        print(f"  {name:36s} before {old * 1000:8.3f} ms  now {new * 1000:8.3f} ms  ratio {new / old:5.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
