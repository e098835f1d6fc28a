"""Which tools a desk serves: ``read_only`` drops every acting tool, ``enabled_tools`` / ``disabled_tools`` pick.

A tool that is off is absent from ``tools/list`` by the operator's choice, and the instructions say so. Whether a
tool acts comes from its declared kind (``tool_kinds``); the catalogue is handed in, so this module stays below
the features that declare it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from incident_desk.protocol.tool_kinds import ToolDeclaration
from incident_desk.settings.errors import SettingsError

Catalog = Mapping[str, ToolDeclaration]


def acting_tools(catalog: Catalog) -> list[str]:
    return sorted(name for name, declared in catalog.items() if declared.kind.acting)


def read_tools(catalog: Catalog) -> list[str]:
    return sorted(name for name, declared in catalog.items() if not declared.kind.acting)


def check_names(catalog: Catalog, *, enabled: Iterable[str] | None, disabled: Iterable[str]) -> None:
    """Refuse a tool name the desk does not have, naming the setting that holds it."""
    for setting, names in (("enabled_tools", enabled or []), ("disabled_tools", disabled)):
        if unknown := sorted(set(names) - set(catalog)):
            raise SettingsError(f"{setting}: no such tool {', '.join(unknown)} (tools: {', '.join(sorted(catalog))})")


def tools_off(
    catalog: Catalog, *, read_only: bool, enabled: Iterable[str] | None, disabled: Iterable[str]
) -> dict[str, str]:
    """Each tool that is off, with why (for the instructions and ``incident-desk tools``)."""
    off: dict[str, str] = {}
    chosen = None if enabled is None else set(enabled)
    refused = set(disabled)
    for name, declared in sorted(catalog.items()):
        if read_only and declared.kind.acting:
            off[name] = "read_only"
        elif chosen is not None and name not in chosen:
            off[name] = "not in enabled_tools"
        elif name in refused:
            off[name] = "in disabled_tools"
    return off


def instructions_note(off: dict[str, str], *, read_only: bool) -> str:
    """The instructions' last lines: what the operator turned off (nothing when all is on)."""
    lines = []
    if read_only:
        lines.append(
            "This desk is read-only: it serves no acting tool (acknowledge, note, resolve, silence, restart, "
            "save a postmortem)."
        )
    if off:
        lines.append(f"Turned off on this desk by its operator: {', '.join(sorted(off))}.")
    return "\n".join(lines)
