"""Which tools a desk serves: ``read_only`` drops every acting tool, ``enabled_tools`` / ``disabled_tools`` pick.

A tool that is off is absent from ``tools/list`` by the operator's choice, and the instructions say so. The names
are the contract (tests/test_surface.py checks they are exactly the registered tools).
"""

from __future__ import annotations

from collections.abc import Iterable

READ_TOOLS = (
    "find_similar_incidents",
    "get_audit_log",
    "get_incident_activity",
    "get_runbook",
    "list_incidents",
    "query_incident_metrics",
    "read_incident_log",
    "search_incident_log",
    "show_incident_timeline",
    "summarize_incident",
)
ACTING_TOOLS = (
    "acknowledge_incident",
    "add_incident_note",
    "resolve_incident",
    "restart_service",
    "save_postmortem",
    "silence_incident",
    "unsilence_incident",
)
ALL_TOOLS = tuple(sorted(READ_TOOLS + ACTING_TOOLS))


def unknown_names(names: Iterable[str]) -> list[str]:
    return sorted(set(names) - set(ALL_TOOLS))


def tools_off(*, read_only: bool, enabled: Iterable[str] | None, disabled: Iterable[str]) -> dict[str, str]:
    """Each tool that is off, with why (for the instructions and ``incident-desk tools``)."""
    off: dict[str, str] = {}
    chosen = None if enabled is None else set(enabled)
    for name in ALL_TOOLS:
        if read_only and name in ACTING_TOOLS:
            off[name] = "read_only"
        elif chosen is not None and name not in chosen:
            off[name] = "not in enabled_tools"
        elif name in set(disabled):
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
