"""The log spool and the `files` source under attack: a total spool cap with eviction, a gzip bomb that lies about
its size, a middle directory swapped for a link while reads run."""

from __future__ import annotations

import gzip
import os
import shlex
import shutil
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from incident_desk.core.incidents import DataFolder, LogUnavailable
from incident_desk.core.sources import IncidentSources
from incident_desk.core.sources.config import FilesLogConfig
from incident_desk.core.sources.logs import FilesLog, LogSourceError
from incident_desk.core.sources.spool import Spool
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import load_settings

OPENED = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
MIB = 1024 * 1024
SH = shutil.which("sh") or ""


def sources_for(tmp_path: Path, logs: dict[str, Any], **settings: Any) -> IncidentSources:
    loaded = load_settings({"services": {name: {"logs": config} for name, config in logs.items()}, **settings})
    return IncidentSources(DataFolder(tmp_path), [], loaded.service_logs, spool_max_bytes=loaded.log_spool_max_bytes)


def spool_bytes(directory: Path) -> int:
    return sum(entry.stat().st_size for entry in directory.iterdir())


@pytest.mark.skipif(not SH, reason="needs sh(1)")
def test_the_spool_stays_within_its_cap_evicting_the_least_recently_used(tmp_path: Path) -> None:
    """150 incidents of 400 KB each used to leave 60 MB behind; the cap is 4 MiB."""
    runs = tmp_path / "runs"
    # sh, yes and head: 150 runs of a shell cost far less than 150 Python starts on a loaded machine.
    prints = f'echo "$1" >> {shlex.quote(str(runs))}; yes "$1" | tr "\\n" " " | head -c 400000'
    argv = [SH, "-c", prints, "sh", "{incident}"]
    config = {"kind": "command", "argv": argv, "cache_seconds": 3600, "max_bytes": MIB}
    sources = sources_for(tmp_path, {"api": config}, log_spool_max_bytes=4 * MIB)
    held = sources.service_log("INC-0", "api", OPENED)  # a reader that keeps its spool file open throughout
    try:
        largest = 0
        for number in range(1, 150):
            with sources.service_log(f"INC-{number}", "api", OPENED) as handle:
                word = f"INC-{number} ".encode()  # yes prints "INC-n", tr joins them with spaces
                assert handle.read(3 * len(word)) == word * 3
            largest = max(largest, spool_bytes(sources.spool.directory))
        assert largest <= 4 * MIB + 600 * 1024  # at most the cap plus the file being written
        assert spool_bytes(sources.spool.directory) <= 4 * MIB
        assert sources.spool.total_bytes() <= 4 * MIB
        # The file in use was never evicted: it is still in the spool directory, whole.
        assert os.fstat(held.fileno()).st_nlink == 1
        assert held.read(9) == b"INC-0 INC"
        # The most recently used spools are still there (no new run); the oldest were evicted (they run again).
        for number in (149, 148):
            with sources.service_log(f"INC-{number}", "api", OPENED):
                pass
        with sources.service_log("INC-1", "api", OPENED):
            pass
        ran = runs.read_text().split()
        assert ran.count("INC-149") == 1 and ran.count("INC-148") == 1
        assert ran.count("INC-1") == 2
        assert sources.spool.evicted >= 130
    finally:
        held.close()
    assert spool_bytes(sources.spool.directory) <= 4 * MIB


def test_a_replaced_spool_file_stays_readable_until_its_reader_closes_it(tmp_path: Path) -> None:
    spool = Spool(MIB)
    first = spool.write("log", lambda out: out.write(b"first\n"))
    second = spool.write("log", lambda out: out.write(b"second\n"))
    assert (first.read(), second.read()) == (b"first\n", b"second\n")
    assert len(list(spool.directory.iterdir())) == 2
    first.close()
    assert [path.read_bytes() for path in spool.directory.iterdir()] == [b"second\n"]
    second.close()
    again = spool.open("log")
    assert again is not None
    with again:
        assert again.read() == b"second\n"


def test_a_log_larger_than_the_spool_is_refused_when_the_config_loads() -> None:
    logs = {"kind": "command", "argv": ["true"], "max_bytes": 8 * MIB}
    with pytest.raises(SettingsError, match=r"services.api.logs.max_bytes \(8388608\) is larger than log_spool_max"):
        load_settings({"services": {"api": {"logs": logs}}, "log_spool_max_bytes": 4 * MIB})


def gzip_bomb(expands_to: int) -> bytes:
    """A small .gz that expands to ``expands_to`` bytes while its trailer claims 2 (a second, tiny member)."""
    line = b"boom " * 20 + b"\n"
    body = line * (expands_to // len(line))
    return gzip.compress(body, compresslevel=1) + gzip.compress(b"x\n")


def test_a_gzip_bomb_is_cut_at_the_cap_counting_what_it_expands_to(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log.2.gz").write_bytes(gzip.compress(b"old line\n"))
    bomb = gzip_bomb(64 * MIB)
    assert len(bomb) < MIB and int.from_bytes(bomb[-4:], "little") == 2
    (logs / "app.log.1.gz").write_bytes(bomb)
    (logs / "app.log").write_bytes(b"newest line\n")
    config = {"kind": "files", "paths": [str(logs / "app.log*")], "max_bytes": MIB}
    sources = sources_for(tmp_path, {"payments": config})
    started = time.monotonic()
    with sources.service_log("X", "payments", OPENED) as handle:
        served = handle.read()
    assert time.monotonic() - started < 20
    assert len(served) <= MIB + 1024
    assert served.startswith(b"old line\nboom boom")
    note = f"[incident-desk: {logs}/app.log.1.gz is cut after ".encode()
    assert note in served
    assert b"bytes: it expands past the log's max_bytes cap of 1048576 bytes]\n" in served
    assert served.endswith(b"]\nnewest line\n"), "the newest file keeps its room"
    assert spool_bytes(sources.spool.directory) <= MIB + 1024


def test_a_file_that_will_not_decompress_costs_only_itself(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    broken = b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"garbage!garbage" + (2).to_bytes(4, "little")
    (logs / "app.log.1.gz").write_bytes(gzip.compress(b"kept line\n" * 10) + broken)
    (logs / "app.log").write_bytes(b"newest line\n")
    sources = sources_for(tmp_path, {"payments": {"kind": "files", "paths": [str(logs / "app.log*")]}})
    with sources.service_log("X", "payments", OPENED) as handle:
        served = handle.read()
    assert f"[incident-desk: {logs}/app.log.1.gz cannot be decompressed".encode() in served
    assert served.endswith(b"; the rest of it is left out of this log]\nnewest line\n")


@pytest.mark.skipif(sys.platform == "win32", reason="directory descriptors")
def test_swapping_a_middle_directory_for_a_link_never_serves_a_file_outside(tmp_path: Path) -> None:
    """A thread swaps logs/mid for a link to an outside directory holding an app.log, over and over, while fresh
    log sources read logs/mid/app.log (each read resolves, spools and serves it): no read may serve the outside."""
    root, outside = tmp_path / "logs", tmp_path / "outside"
    (root / "mid").mkdir(parents=True)
    outside.mkdir()
    (root / "mid/app.log").write_bytes(b"inside line\n" * 200)
    (outside / "app.log").write_bytes(b"OUTSIDE secret\n" * 200)
    config = FilesLogConfig(kind="files", paths=[str(root / "mid/app.log")], roots=[root])
    spool = Spool(64 * MIB)
    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            (root / "mid").rename(root / "mid.real")
            (root / "mid").symlink_to(outside, target_is_directory=True)
            time.sleep(0.0005)
            (root / "mid").unlink()
            (root / "mid.real").rename(root / "mid")
            swaps += 1
            time.sleep(0.0005)

    served = {"inside": 0, "outside": 0, "refused": 0}
    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            try:
                with FilesLog("payments", config, spool).open() as handle:
                    data = handle.read()
            except (LogSourceError, LogUnavailable):
                served["refused"] += 1
                continue
            if b"OUTSIDE" in data:
                served["outside"] += 1
            elif b"inside line\n" * 200 in data:
                served["inside"] += 1
            else:
                served["refused"] += 1  # left out with a note, mid-read
    finally:
        stop.set()
        swapper.join()
    assert served["outside"] == 0, served
    assert served["inside"] > 0 and served["refused"] > 0 and swaps > 10, (served, swaps)
