"""A timeline over a big log counts in worker threads: the event loop keeps answering pings meanwhile, and the
counts over the whole log equal a line-by-line count of the same generated lines."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from incident_desk.server import build_server
from tests.helpers import AppFactory, connect, pinging

pytestmark = [pytest.mark.anyio, pytest.mark.timing]

_BLOCK_LINES = 4000


def _block() -> tuple[bytes, dict[str, int]]:
    """Bench-like lines (every line a different minute than the one before), and their levels."""
    levels = ["INFO"] * 20 + ["WARN"] * 3 + ["ERROR", "DEBUG"]
    services = ["payments-api", "search-api", "auth", "ledger", "gateway"]
    lines, counts = [], dict.fromkeys(("error", "warn", "info", "debug"), 0)
    for number in range(_BLOCK_LINES):
        level = levels[number * 7 % len(levels)]
        stamp = f"2026-11-29T10:{number % 60:02d}:{number * 7 % 60:02d}.{number % 1000:03d}Z"
        lines.append(f"{stamp} {services[number % 5]} {level} request served latency_ms={number}\n")
        counts[level.lower()] += 1
    return "".join(lines).encode(), counts


def big_timeline_desk(root: Path, mib: int) -> tuple[Path, dict[str, int]]:
    """A data directory whose INC-BIG has a log of about ``mib`` MiB of bench-like lines, and its counts per level."""
    block, per_block = _block()
    copies = (mib << 20) // len(block)
    entry = root / "desk" / "incidents" / "INC-BIG"
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        'title="t"\nservice="ledger"\nseverity="SEV2"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
    )
    (entry / "log.txt").write_bytes(block * copies)
    return root / "desk", {level: count * copies for level, count in per_block.items()}


async def test_a_64_mib_timeline_leaves_the_loop_free(make_app: AppFactory, tmp_path: Path) -> None:
    data_dir, expected = big_timeline_desk(tmp_path, 64)
    app = make_app(data_dir=data_dir, search_time_budget_seconds=60)
    async with connect(build_server(app), "legacy") as client, pinging(client) as pings:
        shown = await client.call_tool("show_incident_timeline", {"incidentId": "INC-BIG"})
    assert not shown.is_error, shown
    view = shown.structured_content or {}
    assert view["stopped"] == "end of log"
    totals = {level: sum(minute[level] for minute in view["minutes"]) for level in ("error", "warn", "info", "debug")}
    assert totals == expected
    assert len(pings) >= 3
    assert statistics.median(pings) < 0.1 and max(pings) < 0.5, pings
