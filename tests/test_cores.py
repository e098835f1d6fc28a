"""The cores a process may use: the machine's, fewer under a CPU affinity or a cgroup's CPU quota; and the search's
second thread, its reading workers and the helper processes start only with one of them to spare."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from incident_desk.core import helper_pool
from incident_desk.core.search import parallel as log_parallel
from incident_desk.core.search import skim as log_skim


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Eight cores, all in this process's affinity, and a cgroup tree of its own (empty: no quota)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)), raising=False)
    monkeypatch.setattr(helper_pool, "CGROUP_ROOT", tmp_path)
    return tmp_path


def test_the_machines_cores_without_an_affinity_or_a_quota(machine: Path) -> None:
    assert helper_pool.usable_cores() == 8


def test_an_affinity_of_one_core_leaves_nothing_to_spare(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {3}, raising=False)
    monkeypatch.setattr(log_parallel, "_runnable_elsewhere", lambda: 0)
    assert helper_pool.usable_cores() == 1
    assert not log_skim._cores_to_share()
    assert helper_pool.default_processes() == 0
    assert log_parallel.free_workers() == 0


@pytest.mark.parametrize(
    ("cpu_max", "usable"),
    [("150000 100000", 1), ("400000 100000", 4), ("max 100000", 8), ("2000000 100000", 8), ("junk", 8)],
)
def test_a_cgroup_v2_quota_caps_the_cores(machine: Path, cpu_max: str, usable: int) -> None:
    (machine / "cpu.max").write_text(cpu_max + "\n")
    assert helper_pool.usable_cores() == usable


@pytest.mark.parametrize(("quota", "usable"), [("100000", 1), ("250000", 2), ("-1", 8)])
def test_a_cgroup_v1_quota_caps_the_cores(machine: Path, quota: str, usable: int) -> None:
    (machine / "cpu").mkdir()
    (machine / "cpu" / "cpu.cfs_quota_us").write_text(quota + "\n")
    (machine / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert helper_pool.usable_cores() == usable


def test_a_count_the_machine_does_not_know_is_one_core(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert helper_pool.usable_cores() == 1
