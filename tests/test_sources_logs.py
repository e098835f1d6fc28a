"""Per-service log sources: rotated and gzip files read as one log, and a command's output spooled with caps."""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from incident_desk.core.incidents import DataFolder, LogUnavailable
from incident_desk.core.search import engine as log_search
from incident_desk.core.search import paging as logfile
from incident_desk.core.search.pattern import compile_pattern
from incident_desk.core.sources import IncidentSources
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import load_settings

OPENED = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def rotated_logs(directory: Path) -> bytes:
    """app.log.3.gz (oldest) .. app.log (newest), with lines that say where they are; the concatenation."""
    directory.mkdir(parents=True)
    whole = b""
    for generation in (3, 2, 1, 0):
        body = b"".join(f"gen{generation} line {n} payments ERROR code={n % 7}\n".encode() for n in range(400))
        whole += body
        name = "app.log" if generation == 0 else f"app.log.{generation}"
        if generation >= 2:
            (directory / f"{name}.gz").write_bytes(gzip.compress(body))
        else:
            (directory / name).write_bytes(body)
    (directory / "other.txt").write_bytes(b"not matched by the glob\n")
    return whole


def desk_with_logs(tmp_path: Path, logs: dict[str, Any]) -> IncidentSources:
    settings = load_settings({"services": {name: {"logs": config} for name, config in logs.items()}})
    return IncidentSources(DataFolder(tmp_path), [], settings.service_logs)


def test_rotated_and_gzip_files_read_as_the_concatenated_log(tmp_path: Path) -> None:
    whole = rotated_logs(tmp_path / "logs")
    reference = tmp_path / "reference.log"
    reference.write_bytes(whole)
    sources = desk_with_logs(tmp_path, {"payments": {"kind": "files", "paths": [str(tmp_path / "logs/app.log*")]}})

    def served() -> Any:
        return sources.service_log("X", "payments", OPENED)

    with served() as handle:
        assert handle.read() == whole
    with served() as handle, reference.open("rb") as expected:
        assert logfile.read_tail(handle, max_lines=50, max_bytes=1 << 20) == logfile.read_tail(
            expected, max_lines=50, max_bytes=1 << 20
        )
    cursor, pages, expected_pages = logfile.START, [], []
    while True:  # pages of 170 lines cross every file boundary (400 lines each)
        with served() as handle:
            page = logfile.read_page(handle, cursor=cursor, limit=170)
        with reference.open("rb") as expected:
            expected_pages.append(logfile.read_page(expected, cursor=cursor, limit=170))
        pages.append(page)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == expected_pages
    assert [line.number for page in pages for line in page.lines] == list(range(1, 1601))
    assert (pages[2].lines[60].number, pages[2].lines[60].text) == (401, "gen2 line 0 payments ERROR code=0")
    pattern = compile_pattern(r"gen[12] line 39\d")
    with served() as handle, reference.open("rb") as expected:
        found = log_search.search(handle, pattern, limit=100)
        assert found == log_search.search(expected, pattern, limit=100)
    assert [line.number for line in found.matches] == [*range(791, 801), *range(1191, 1201)]


def test_appended_lines_show_up_and_older_cursors_stay_valid(tmp_path: Path) -> None:
    rotated_logs(tmp_path / "logs")
    sources = desk_with_logs(tmp_path, {"payments": {"kind": "files", "paths": [str(tmp_path / "logs/app.log*")]}})
    with sources.service_log("X", "payments", OPENED) as handle:
        first = logfile.read_page(handle, limit=1599)
        spool_identity = os.fstat(handle.fileno()).st_ino
    with (tmp_path / "logs/app.log").open("ab") as log:
        log.write(b"fresh line\nhalf a li")
    with sources.service_log("X", "payments", OPENED) as handle:
        assert first.next_cursor is not None
        rest = logfile.read_page(handle, cursor=first.next_cursor, limit=10)
    with (tmp_path / "logs/app.log").open("ab") as log:
        log.write(b"ne\n")
    with sources.service_log("X", "payments", OPENED) as handle:
        assert os.fstat(handle.fileno()).st_ino == spool_identity, "a growing log is appended to, not re-spooled"
        assert rest.next_cursor is None
        whole = handle.read()
    assert [(line.number, line.text) for line in rest.lines] == [
        (1600, "gen0 line 399 payments ERROR code=0"),
        (1601, "fresh line"),
        (1602, "half a li"),
    ]
    assert whole.endswith(b"code=0\nfresh line\nhalf a line\n")


def test_a_glob_outside_its_roots_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"reaches outside the allowed roots"):
        load_settings(
            {
                "services": {
                    "payments": {
                        "logs": {"kind": "files", "paths": ["/etc/*"], "roots": [str(tmp_path / "logs")]},
                    }
                }
            }
        )


def test_a_link_leading_outside_the_roots_costs_only_that_file(tmp_path: Path) -> None:
    """One planted link used to make the whole log unreadable; now it is that file left out, named in a note."""
    whole = rotated_logs(tmp_path / "logs")
    (tmp_path / "secret.txt").write_text("password=hunter2\n", encoding="utf-8")
    (tmp_path / "logs/app.log.9").symlink_to(tmp_path / "secret.txt")
    os.mkfifo(tmp_path / "logs/app.log.8")
    sources = desk_with_logs(tmp_path, {"payments": {"kind": "files", "paths": [str(tmp_path / "logs/app.log*")]}})
    with sources.service_log("X", "payments", OPENED) as handle:
        served = handle.read()
    notes = (
        f"[incident-desk: {tmp_path}/logs/app.log.8 is a FIFO, not a regular file; it is left out of this log]\n"
        f"[incident-desk: {tmp_path}/logs/app.log.9 leads outside the allowed roots; it is left out of this log]\n"
    )
    assert served == notes.encode() + whole
    assert b"hunter2" not in served


def test_a_log_whose_every_file_is_bad_names_them(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "secret.txt").write_text("password=hunter2\n", encoding="utf-8")
    (tmp_path / "logs/app.log").symlink_to(tmp_path / "secret.txt")
    sources = desk_with_logs(tmp_path, {"payments": {"kind": "files", "paths": [str(tmp_path / "logs/app.log*")]}})
    with pytest.raises(LogUnavailable, match=r"no file can be served: .*app.log leads outside the allowed roots"):
        sources.service_log("X", "payments", OPENED)


def test_a_link_that_stays_inside_the_roots_is_followed(tmp_path: Path) -> None:
    (tmp_path / "logs/dated").mkdir(parents=True)
    (tmp_path / "logs/dated/app-2026-11-30.log").write_bytes(b"inside line\n")
    (tmp_path / "logs/app.log").symlink_to(tmp_path / "logs/dated/app-2026-11-30.log")
    (tmp_path / "logs/app.log.1").symlink_to("dated/app-2026-11-30.log")  # the same file twice: served once
    sources = desk_with_logs(tmp_path, {"payments": {"kind": "files", "paths": [str(tmp_path / "logs/app.log*")]}})
    with sources.service_log("X", "payments", OPENED) as handle:
        assert handle.read() == b"inside line\n"


def command(code: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "command", "argv": [sys.executable, "-c", code], **extra}


def test_a_command_printing_100_mb_is_cut_at_the_cap(tmp_path: Path) -> None:
    prints = "import sys\nfor _ in range(100):\n    sys.stdout.write(('x' * 1023 + chr(10)) * 1024)"
    sources = desk_with_logs(tmp_path, {"api": command(prints, max_bytes=1024 * 1024, timeout_seconds=60)})
    started = time.monotonic()
    with sources.service_log("X", "api", OPENED) as handle:
        data = handle.read()
    assert time.monotonic() - started < 30
    assert len(data) < 1024 * 1024 + 200
    assert data.endswith(b"\n[incident-desk: output cut at 1048576 bytes (max_bytes); the command was stopped]\n")


def test_a_hanging_command_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    hangs = "import sys, time\nprint('started', flush=True)\ntime.sleep(600)"
    sources = desk_with_logs(tmp_path, {"api": command(hangs, timeout_seconds=1)})
    started = time.monotonic()
    with sources.service_log("X", "api", OPENED) as handle:
        data = handle.read()
    assert time.monotonic() - started < 10
    assert data == b"started\n[incident-desk: the command was stopped at its 1s timeout]\n"


def test_a_failing_command_shows_its_exit_status(tmp_path: Path) -> None:
    fails = "import sys\nprint('boom', end='')\nsys.exit(3)"
    sources = desk_with_logs(tmp_path, {"api": command(fails)})
    with sources.service_log("X", "api", OPENED) as handle:
        assert handle.read() == b"boom\n[incident-desk: the command exited with status 3]\n"


def test_a_command_gets_the_window_and_none_of_the_desks_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("INCIDENT_DESK_SOURCE_PROD", "am-password")
    shows = "import os, sys\nprint(sys.argv[1:], sorted(k for k in os.environ if k.startswith('INCIDENT_DESK')))"
    config = command(shows, lookback_minutes=45)
    config["argv"] += ["{service}", "{incident}", "{since}", "{since_epoch}"]
    sources = desk_with_logs(tmp_path, {"api": config})
    with sources.service_log("prod-abc", "api", OPENED) as handle:
        text = handle.read().decode()
    assert text == f"['api', 'prod-abc', '2026-11-30T09:15:00Z', '{int(OPENED.timestamp()) - 45 * 60}'] []\n"


def test_a_command_that_cannot_start_is_a_named_error(tmp_path: Path) -> None:
    sources = desk_with_logs(tmp_path, {"api": {"kind": "command", "argv": [str(tmp_path / "no-such-program")]}})
    with pytest.raises(LogUnavailable, match=r"log command '.*no-such-program' could not start"):
        sources.service_log("X", "api", OPENED)


def test_an_unknown_placeholder_is_refused_when_the_config_loads() -> None:
    with pytest.raises(SettingsError, match=r"unknown placeholder 'pod'"):
        load_settings({"services": {"api": {"logs": {"kind": "command", "argv": ["kubectl", "logs", "{pod}"]}}}})


def test_a_service_without_a_log_source_is_a_named_error(tmp_path: Path) -> None:
    sources = desk_with_logs(tmp_path, {})
    with pytest.raises(LogUnavailable, match=r"no log source is configured for service api"):
        sources.service_log("X", "api", OPENED)


@pytest.mark.skipif(shutil.which("journalctl") is None, reason="journalctl is not installed")
def test_journald_runs_journalctl_for_the_unit_and_window(tmp_path: Path) -> None:
    """Real journalctl on a journal directory the test owns. This machine has no running journal and no tool to
    write journal files (systemd-journal-remote is absent), so the directory is empty: what this proves is that
    journalctl accepts the argv the desk builds (unit, window as @epoch, directory) and that its answer is served;
    reading actual entries is not proven here."""
    journal = tmp_path / "journal"
    journal.mkdir()
    sources = desk_with_logs(
        tmp_path, {"payments": {"kind": "journald", "unit": "payments.service", "directory": str(journal)}}
    )
    with sources.service_log("X", "payments", OPENED) as handle:
        assert handle.read() == b"No journal files were found.\n-- No entries --\n"


def test_journald_reports_what_journalctl_refused(tmp_path: Path) -> None:
    sources = desk_with_logs(
        tmp_path,
        {"payments": {"kind": "journald", "unit": "payments.service", "file": str(tmp_path / "none*.journal")}},
    )
    with sources.service_log("X", "payments", OPENED) as handle:
        text = handle.read().decode()
    assert text.endswith("[incident-desk: the command exited with status 1]\n")
