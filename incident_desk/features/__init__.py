"""Thin MCP feature modules: each registers its part of the surface on the server and delegates to the core.

``tool_catalog()`` gathers the kinds each feature module declares for its tools (``tool_kinds``): the one list of
the desk's tools, from which the selection, the OAuth scopes and the tool tables of the docs are derived.
"""

from __future__ import annotations

from importlib import import_module

from incident_desk.protocol.tool_kinds import ToolDeclaration, ToolKinds, merged

# The feature modules that declare tools, in the order the server registers them.
TOOL_FEATURES = (
    "read_tools",
    "summarize",
    "restart",
    "service_actions",
    "metrics",
    "incident_acts",
    "approved_acts",
    "memory",
    "timeline",
    "handoff",
)


def tool_catalog() -> dict[str, ToolDeclaration]:
    """Every tool of the desk by name, sorted, with its declared kind."""
    tables: list[ToolKinds] = [import_module(f"{__name__}.{name}").TOOLS for name in TOOL_FEATURES]
    return merged(tuple(tables))
