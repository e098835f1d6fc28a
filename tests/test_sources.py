"""Several incident sources at once: ids never collide, folders keep their layout, the default is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from incident_desk.core.incidents import DataFolder
from incident_desk.core.sources import IncidentSources
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import load_settings
from tests.helpers import AppFactory


def folder(root: Path, *ids: str) -> Path:
    for incident_id in ids:
        entry = root / "incidents" / incident_id
        entry.mkdir(parents=True)
        (entry / "incident.toml").write_text(
            f'title = "{root.name}"\nservice = "db"\nseverity = "high"\nstatus = "open"\nopened = 2026-11-30\n',
            encoding="utf-8",
        )
        (entry / "log.txt").write_text(f"{root.name} {incident_id}\n", encoding="utf-8")
    return root


def test_an_id_served_by_two_folders_is_served_once_and_the_second_is_named(tmp_path: Path) -> None:
    main, other = folder(tmp_path / "main", "INC-1", "INC-2"), folder(tmp_path / "other", "INC-2", "INC-3")
    settings = load_settings(
        {
            "data_dir": main,
            "incident_sources": [{"kind": "folder"}, {"kind": "folder", "name": "archive", "path": str(other)}],
        }
    )
    sources = IncidentSources(DataFolder(main), settings.incident_sources)
    listing = sources.listing()
    assert {key: (value.source, value.title) for key, value in listing.incidents.items()} == {
        "INC-1": ("folder", "main"),
        "INC-2": ("folder", "main"),
        "INC-3": ("archive", "other"),
    }
    assert [(p.entry, p.reason) for p in listing.problems] == [("archive/INC-2", "id already served by folder")]
    with sources.open_log("INC-3") as handle:
        assert handle.read() == b"other INC-3\n"
    with sources.open_log("INC-2") as handle:
        assert handle.read() == b"main INC-2\n"


def test_without_sources_the_data_directory_is_served_as_before(make_app: AppFactory, tmp_path: Path) -> None:
    app = make_app(data_dir=folder(tmp_path / "main", "INC-1"))
    assert app.sources.listing() is app.sources.data.listing()
    assert [i.source for i in app.sources.incidents()] == ["folder"]


def test_source_names_must_be_unique_and_valid() -> None:
    twice = [{"kind": "alertmanager", "name": "prod", "url": "http://127.0.0.1:1"}] * 2
    with pytest.raises(SettingsError, match=r"incident source name\(s\) 'prod' used more than once"):
        load_settings({"incident_sources": twice})
    with pytest.raises(SettingsError, match=r"source name '../x' is not valid"):
        load_settings({"incident_sources": [{"kind": "alertmanager", "name": "../x", "url": "http://127.0.0.1:1"}]})


def test_a_service_table_with_logs_keeps_its_restart_action() -> None:
    settings = load_settings(
        {"services": {"api": {"argv": ["systemctl", "restart", "api"], "logs": {"kind": "files", "paths": ["/l/*"]}}}}
    )
    assert settings.services["api"].kind == "command"
    assert settings.service_logs["api"].kind == "files"
