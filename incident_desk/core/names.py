"""The shapes of names the desk accepts. Ids and service names become file names and journal rows."""

from __future__ import annotations

import re

INCIDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SERVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def is_safe_name(name: str, pattern: re.Pattern[str]) -> bool:
    """``name`` fits ``pattern`` whole and cannot climb out of a directory (no ``..``)."""
    return bool(pattern.fullmatch(name)) and ".." not in name
