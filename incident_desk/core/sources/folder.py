"""A data folder as a named incident source: the :class:`~incident_desk.core.incidents.DataFolder` read under the
name its ``[[incident_sources]]`` entry gives, so the desk asks it exactly as it asks an outside source."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, BinaryIO

from incident_desk.core.incidents import DataFolder, Incident, Listing

if TYPE_CHECKING:
    from incident_desk.core.sources.alertmanager import AlertmanagerSource


class FolderSource:
    """One data folder under a name; it never waits on anyone, has nothing to silence and no cache to drop."""

    kind = "folder"

    def __init__(self, name: str, folder: DataFolder) -> None:
        self.name = name
        self.folder = folder
        self._renamed: tuple[Listing, Listing] | None = None  # the folder's last view, and it under this name

    def describe(self) -> str:
        return f"folder {self.name!r} at {self.folder.root}"

    def may_wait(self, incident_id: str | None = None) -> bool:
        return False

    def look(self, wait: float | None = None) -> Listing:
        """The folder's listing, its incidents marked with this source's name unless it is the default folder."""
        listed = self.folder.listing()
        if self.name == "folder":
            return listed
        last = self._renamed
        if last is not None and last[0] is listed:
            return last[1]  # the same view of the folder: the same listing, so the desk sees nothing changed
        renamed = {key: dataclasses.replace(value, source=self.name) for key, value in listed.incidents.items()}
        current = Listing(renamed, listed.runbook_services, listed.problems)
        self._renamed = (listed, current)
        return current

    def find(self, incident_id: str) -> Incident | None:
        found = self.folder.listing().incidents.get(incident_id)
        if found is None or self.name == "folder":
            return found
        return dataclasses.replace(found, source=self.name)

    def own_log(self, incident_id: str) -> BinaryIO | None:
        return self.folder.open_log(incident_id)

    def forget(self, incident_id: str | None = None) -> None:
        """Nothing to drop: a folder's snapshot is checked against the disk on every look."""

    def silencer(self) -> AlertmanagerSource | None:
        return None

    def known_up(self) -> bool | None:
        return self.folder.root.is_dir()

    def check(self) -> tuple[bool, str]:
        listed = self.folder.listing()
        return self.folder.root.is_dir(), f"{self.describe()}: {len(listed.incidents)} incidents"
