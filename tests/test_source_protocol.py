"""The incident source protocol: a new kind of source is one class, served by ``IncidentSources`` unchanged."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import pytest

from incident_desk.core.incidents import DataFolder, Incident, Listing, UnknownIncident
from incident_desk.core.sources import FolderSource, IncidentSource, IncidentSources, SourceDown, SourceUnavailable
from incident_desk.core.sources.alertmanager import AlertmanagerSource
from incident_desk.core.sources.config import AlertmanagerSourceConfig


class PagerSource:
    """A minimal source of its own kind: a fixed set of pages, each with its own log, or down."""

    kind = "pager"

    def __init__(self, name: str, *, down: bool = False) -> None:
        self.name = name
        self.down = down
        self.forgotten: list[str | None] = []
        self.page = Incident(
            id=f"{name}-1",
            title="disk full",
            service="db",
            severity="high",
            status="open",
            opened=datetime(2026, 11, 30, tzinfo=UTC),
            source=name,
        )

    def describe(self) -> str:
        return f"pager {self.name!r}"

    def may_wait(self, incident_id: str | None = None) -> bool:
        return incident_id is None or incident_id.startswith(f"{self.name}-")

    def look(self, wait: float | None = None) -> Listing:
        if self.down:
            raise SourceDown(f"{self.describe()} is down")
        return Listing({self.page.id: self.page}, (), ())

    def find(self, incident_id: str) -> Incident | None:
        return self.look().incidents.get(incident_id) if self.may_wait(incident_id) else None

    def own_log(self, incident_id: str) -> BinaryIO | None:
        return io.BytesIO(b"disk full\n")

    def forget(self, incident_id: str | None = None) -> None:
        self.forgotten.append(incident_id)

    def silencer(self) -> AlertmanagerSource | None:
        return None

    def known_up(self) -> bool | None:
        return None

    def check(self) -> tuple[bool, str]:
        return not self.down, self.describe()


def empty_folder(tmp_path: Path) -> DataFolder:
    (tmp_path / "incidents").mkdir()
    return DataFolder(tmp_path)


def test_the_sources_the_desk_builds_satisfy_the_protocol(tmp_path: Path) -> None:
    config = AlertmanagerSourceConfig(kind="alertmanager", name="am", url="http://127.0.0.1:9")
    built: list[IncidentSource] = [
        FolderSource("folder", empty_folder(tmp_path)),
        AlertmanagerSource(config, lambda: None),
        PagerSource("pager"),
    ]
    assert [source.kind for source in built] == ["folder", "alertmanager", "pager"]


def test_a_new_kind_of_source_is_served_with_no_change_elsewhere(tmp_path: Path) -> None:
    pager = PagerSource("pager")
    sources = IncidentSources(empty_folder(tmp_path), extra=[pager])
    assert list(sources.listing().incidents) == ["pager-1"]
    assert sources.incident("pager-1").title == "disk full"
    with sources.open_log("pager-1") as handle:
        assert handle.read() == b"disk full\n"
    assert sources.waits_on_sources("pager-1") and not sources.waits_on_sources("INC-1")
    assert sources.alertmanager_of(pager.page) is None
    assert sources.health() == {"folder": True, "pager": True}
    assert [what for _ok, what, _detail in sources.check()] == ["incident source folder", "incident source pager"]
    sources.forget("pager-1")
    assert pager.forgotten == ["pager-1"]
    with pytest.raises(UnknownIncident):
        sources.incident("other-1")


def test_a_new_kind_of_source_that_is_down_is_named_like_any_other(tmp_path: Path) -> None:
    sources = IncidentSources(empty_folder(tmp_path), extra=[PagerSource("pager", down=True)])
    assert [(problem.entry, problem.reason) for problem in sources.listing().problems] == [
        ("source pager", "pager 'pager' is down")
    ]
    assert sources.health() == {"folder": True, "pager": False}
    with pytest.raises(SourceUnavailable, match="its source is down: pager 'pager' is down"):
        sources.incident("pager-1")
