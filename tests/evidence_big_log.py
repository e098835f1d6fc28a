"""A big service log for investigate_incident: two hours of noise, written a minute at a time from one template
block, with an error template that starts five minutes before the incident opened."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

OPENED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MINUTES = 120
INJECTED_FROM = 5  # minutes before the opening


def _minute_block(service: str, bytes_per_minute: int, rng: random.Random) -> bytes:
    """Lines of one minute with ``HH:MM`` as ``@@:@@``, filled in per minute."""
    lines: list[str] = []
    size = 0
    while size < bytes_per_minute:
        second = len(lines) * 60 // max(1, bytes_per_minute // 90)
        kind = rng.random()
        if kind < 0.7:
            text = f"INFO request served status=200 latency_ms={rng.randint(1, 900)} id=req-{rng.getrandbits(40):010x}"
        elif kind < 0.85:
            query = f"select * from orders where id = {rng.randint(1, 99999)}"  # noqa: S608 (a log line, not a query)
            text = f'WARN slow query "{query}" took {rng.randint(100, 999)}ms'
        else:
            text = f"ERROR failed to refresh token for client {rng.randint(1, 9999)}: upstream timeout"
        line = f"@@:@@:{min(59, second):02d} {service} {text}\n"
        lines.append(line)
        size += len(line)
    return "".join(lines).encode()


def write_big_log(path: Path, total_bytes: int, service: str = "payments-api") -> None:
    rng = random.Random(7)
    per_minute = total_bytes // MINUTES
    block = _minute_block(service, per_minute, rng)
    injected = f"00:00:30 {service} ERROR ledger-db refused connection: too many clients already\n".encode()
    start = OPENED - timedelta(minutes=MINUTES - 10)
    with path.open("wb") as handle:
        for minute in range(MINUTES):
            at = start + timedelta(minutes=minute)
            handle.write(block.replace(b"@@:@@", f"{at:%H:%M}".encode()))
            if at >= OPENED - timedelta(minutes=INJECTED_FROM):
                handle.write(injected.replace(b"00:00", f"{at:%H:%M}".encode()) * 20)
