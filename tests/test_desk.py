"""The desk's data directory: incidents re-read when their files change, and nothing served from outside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from incident_desk.core.incidents import DataError, DataFolder, LogUnavailable, Problem

TOML = 'title="t"\nservice="svc"\nseverity="SEV2"\nstatus="open"\nopened="2026-01-01T00:00:00Z"\n'


def _incident(root: Path, incident_id: str = "INC-1", log: str | None = "hello\n") -> Path:
    entry = root / "incidents" / incident_id
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(TOML)
    if log is not None:
        (entry / "log.txt").write_text(log)
    return entry


def test_an_incident_shows_up_once_its_log_is_written_after_its_metadata(tmp_path: Path) -> None:
    entry = _incident(tmp_path, log=None)
    desk = DataFolder(tmp_path)
    assert desk.incidents() == []
    assert desk.problems() == [Problem("incidents/INC-1", "missing log.txt")]
    (entry / "log.txt").write_text("line\n")
    assert [incident.id for incident in desk.incidents()] == ["INC-1"]
    assert desk.problems() == []
    listed = desk.incident("INC-1")
    with (entry / "log.txt").open("a") as log:
        log.write("a log being appended to is not a reason to re-read the incident\n")
    assert desk.incident("INC-1") is listed
    (entry / "log.txt").unlink()
    assert desk.incidents() == []
    assert desk.problems() == [Problem("incidents/INC-1", "missing log.txt")]


def test_log_unavailable_names_the_incident_and_the_reason() -> None:
    error = LogUnavailable("INC-7", "permission denied")
    assert isinstance(error, DataError)
    assert str(error) == "Log of INC-7 cannot be read: permission denied"
    assert (error.incident_id, error.reason) == ("INC-7", "permission denied")


def test_a_log_linked_to_outside_the_data_directory_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "desk"
    outside = tmp_path / "secret.txt"
    outside.write_text("root:outside-the-data-dir\n")
    (_incident(root, "INC-OUT", log=None) / "log.txt").symlink_to(outside)
    shared = root / "shared-logs" / "inc-in.log"
    shared.parent.mkdir(parents=True)
    shared.write_text("inside\n")
    (_incident(root, "INC-IN", log=None) / "log.txt").symlink_to(shared)
    desk = DataFolder(root)
    assert [incident.id for incident in desk.incidents()] == ["INC-IN"]
    assert desk.problems() == [Problem("incidents/INC-OUT", "log.txt points outside the data directory")]
    with desk.open_log("INC-IN") as log:
        assert log.read() == b"inside\n"


def test_runbooks_linked_to_outside_the_data_directory_are_not_offered(tmp_path: Path) -> None:
    runbooks = tmp_path / "desk" / "runbooks"
    runbooks.mkdir(parents=True)
    (runbooks / "svc.md").write_text("# svc\n")
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# not a runbook\n")
    (runbooks / "escape.md").symlink_to(outside)
    desk = DataFolder(tmp_path / "desk")
    assert desk.runbook_services() == ["svc"]
    with pytest.raises(DataError):
        desk.runbook("escape")


def test_an_entry_removed_while_the_folder_is_read_is_gone_not_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between listing incidents/ and opening an entry, another process may remove it: the listing drops it,
    and reports no "cannot be opened" problem for something that no longer exists."""
    root = tmp_path / "desk"
    _incident(root, "INC-1")
    _incident(root, "INC-2")
    desk = DataFolder(root)
    real_directory = desk._data.directory

    def removed_meanwhile(parts: list[str]) -> object:
        if parts[-1] == "INC-2":
            raise FileNotFoundError(2, "No such file or directory")
        return real_directory(parts)

    monkeypatch.setattr(desk._data, "directory", removed_meanwhile)
    assert [incident.id for incident in desk.incidents()] == ["INC-1"]
    assert desk.problems() == []


def _parses(desk: DataFolder, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the entries ``desk`` parses from now on."""
    parsed: list[str] = []
    real = desk._parse_incident

    def counted(name: str) -> object:
        parsed.append(name)
        return real(name)

    monkeypatch.setattr(desk, "_parse_incident", counted)
    return parsed


def test_a_new_entry_is_parsed_alone_and_the_others_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A desk of many incidents with one being filed re-reads that one: the rest have the change keys they had."""
    for number in range(5):
        _incident(tmp_path, f"INC-{number}")
    _incident(tmp_path, "INC-BAD", log=None)
    desk = DataFolder(tmp_path)
    before = {incident.id: incident for incident in desk.incidents()}
    parsed = _parses(desk, monkeypatch)
    _incident(tmp_path, "INC-NEW")
    after = {incident.id: incident for incident in desk.incidents()}
    assert parsed == ["INC-NEW"]
    assert all(after[name] is incident for name, incident in before.items())
    assert desk.problems() == [Problem("incidents/INC-BAD", "missing log.txt")]


def test_an_edited_replaced_or_broken_entry_is_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for number in range(3):
        _incident(tmp_path, f"INC-{number}")
    desk = DataFolder(tmp_path)
    assert len(desk.incidents()) == 3
    parsed = _parses(desk, monkeypatch)
    (tmp_path / "incidents" / "INC-0" / "incident.toml").write_text(TOML.replace('title="t"', 'title="edited"'))
    assert desk.incident("INC-0").title == "edited"
    assert parsed == ["INC-0"]
    replacement = tmp_path / "incidents" / "INC-1" / "log.txt.new"
    replacement.write_text("a new file under the old name\n")
    replacement.replace(tmp_path / "incidents" / "INC-1" / "log.txt")
    desk.incidents()
    assert parsed == ["INC-0", "INC-1"]
    (tmp_path / "incidents" / "INC-2" / "incident.toml").write_text("not = [toml\n")
    assert [incident.id for incident in desk.incidents()] == ["INC-0", "INC-1"]
    assert parsed == ["INC-0", "INC-1", "INC-2"]
    assert [problem.entry for problem in desk.problems()] == ["incidents/INC-2"]
