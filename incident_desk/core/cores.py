"""How many cores this process may run on: fewer than the machine has where its CPU affinity (``taskset``) or its
cgroup's CPU quota (a container started with ``--cpus``) says so.

The search's second skim thread, its reading workers and the helper processes each start only with a core to
spare; counted by ``os.cpu_count()`` alone, a container held to one core of a large host would start them all to
compete for that one core.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cores() -> int:
    """The cores this process may use: the machine's, its affinity's and its cgroup quota's least (at least 1)."""
    cores = os.cpu_count() or 1
    affinity = getattr(os, "sched_getaffinity", None)  # Linux only: elsewhere the machine's count stands
    if affinity is not None:
        with contextlib.suppress(OSError):
            cores = min(cores, len(affinity(0)))
    quota = cgroup_cpu_quota(CGROUP_ROOT)
    if quota is not None:
        cores = min(cores, int(quota))
    return max(1, cores)


@functools.lru_cache(maxsize=4)
def cgroup_cpu_quota(root: Path) -> float | None:
    """The CPUs this process's cgroup may use (``1.5``), None where no quota is set or none can be read: cgroup v2's
    ``cpu.max`` of the process's own group, else v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``. Read once:
    a quota is set when the container starts."""
    try:
        own = Path("/proc/self/cgroup").read_text(encoding="ascii", errors="replace")
    except OSError:
        own = ""
    group = next((line[3:].strip() for line in own.splitlines() if line.startswith("0::")), None)
    if group is not None:
        limit = _read(root / group.lstrip("/") / "cpu.max") or _read(root / "cpu.max")
        if limit is not None:
            quota, _, period = limit.partition(" ")
            return _ratio(quota, period)
    quota_text, period_text = _read(root / "cpu" / "cpu.cfs_quota_us"), _read(root / "cpu" / "cpu.cfs_period_us")
    if quota_text is None or period_text is None:
        return None
    return _ratio(quota_text, period_text)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _ratio(quota: str, period: str) -> float | None:
    """``quota / period`` as CPUs; None for no quota (``max``, ``-1``) or a text that is not one."""
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return quota_us / period_us
