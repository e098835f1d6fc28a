"""The shapes of names the desk accepts. Ids and service names become file names and journal rows."""

from __future__ import annotations

import string
from dataclasses import dataclass


@dataclass(frozen=True)
class NameShape:
    """A first character from ``first``, then up to ``most - 1`` characters from ``rest``: checked without a
    regex, since names come from directory listings and sources as well as from arguments."""

    first: str
    rest: str
    most: int

    def fullmatch(self, name: str) -> bool:
        return 0 < len(name) <= self.most and name[0] in self.first and not name[1:].strip(self.rest)


ALNUM = string.ascii_letters + string.digits
INCIDENT_ID = NameShape(ALNUM, ALNUM + "_.-", 64)
SERVICE_NAME = NameShape(ALNUM, ALNUM + "_.-", 64)


def is_safe_name(name: str, shape: NameShape) -> bool:
    """``name`` fits ``shape`` whole and cannot climb out of a directory (no ``..``)."""
    return shape.fullmatch(name) and ".." not in name
