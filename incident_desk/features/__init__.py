"""Thin MCP feature modules: each registers its part of the surface on the server and delegates to the core.

``tool_catalog()`` gathers the kinds each feature module declares for its tools (``tool_kinds``): the one list of
the desk's tools, from which the selection, the OAuth scopes and the tool tables of the docs are derived.
"""

from __future__ import annotations

import ast
import sys
from importlib import import_module
from importlib.util import find_spec

from incident_desk.protocol import tool_kinds
from incident_desk.protocol.tool_kinds import ToolDeclaration, ToolKinds, merged
from incident_desk.protocol.tool_schemas import Answer

# The names a ``TOOLS = ToolKinds(...)`` declaration may use.
_DECLARING = {"ToolKinds": ToolKinds, "Answer": Answer} | {
    name: getattr(tool_kinds, name) for name in ("read", "note", "act", "restart")
}

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
    "investigate",
    "handoff",
)


def tool_catalog() -> dict[str, ToolDeclaration]:
    """Every tool of the desk by name, sorted, with its declared kind."""
    return merged(tuple(declared_tools(name) for name in TOOL_FEATURES))


def declared_tools(feature: str) -> ToolKinds:
    """A feature module's ``TOOLS``, read from its source without running the module: a feature loads the SDK,
    which ``incident-desk tools`` and the settings' name check do not need. A module already imported, whose
    source cannot be read (a frozen build) or whose declaration uses other names gives its own ``TOOLS``."""
    module = f"{__name__}.{feature}"
    if (loaded := sys.modules.get(module)) is not None:
        tables: ToolKinds = loaded.TOOLS  # already paid for: its own table
        return tables
    spec = find_spec(module)
    source = spec.loader.get_source(module) if spec is not None and spec.loader is not None else None  # type: ignore[attr-defined]
    for statement in ast.parse(source or "").body:
        if isinstance(statement, ast.Assign) and [ast.unparse(target) for target in statement.targets] == ["TOOLS"]:
            try:
                declared = eval(ast.unparse(statement.value), {"__builtins__": {}}, dict(_DECLARING))  # noqa: S307
            except NameError:
                break
            if isinstance(declared, ToolKinds):
                return declared
    imported: ToolKinds = import_module(module).TOOLS
    return imported
