"""Which tools a desk serves: ``read_only`` drops every acting tool, ``enabled_tools`` / ``disabled_tools`` pick.

A tool that is off is absent from ``tools/list`` by the operator's choice, and the instructions say so. Whether a
tool acts comes from its declared kind (``tool_kinds``); the catalogue is handed in, so this module stays below
the features that declare it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from incident_desk.protocol.tool_kinds import ToolDeclaration
from incident_desk.settings.errors import SettingsError

if TYPE_CHECKING:  # `incident-desk tools` reads the selection without loading the SDK
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

Catalog = Mapping[str, ToolDeclaration]


def acting_tools(catalog: Catalog) -> list[str]:
    return sorted(name for name, declared in catalog.items() if declared.kind.acting)


def read_tools(catalog: Catalog) -> list[str]:
    return sorted(name for name, declared in catalog.items() if not declared.kind.acting)


def check_names(catalog: Catalog, *, enabled: Iterable[str] | None, disabled: Iterable[str]) -> None:
    """Refuse a tool name the desk does not have, naming the setting that holds it and the nearest real name."""
    for setting, names in (("enabled_tools", enabled or []), ("disabled_tools", disabled)):
        if unknown := sorted(set(names) - set(catalog)):
            from difflib import get_close_matches  # only when a name is wrong: a desk's start does not pay for it

            nearest = sorted({close for name in unknown for close in get_close_matches(name, catalog, n=1)})
            hint = f" (did you mean {', '.join(nearest)}?)" if nearest else ""
            raise SettingsError(
                f"{setting}: no such tool {', '.join(unknown)}{hint} (tools: {', '.join(sorted(catalog))})"
            )


_WHY_OFF = {
    "read_only": "this desk is read-only (read_only = true) and serves no acting tool",
    "not in enabled_tools": "its operator serves only the tools named in enabled_tools",
    "in disabled_tools": "its operator turned it off in disabled_tools",
}


def turned_off_text(name: str, why: str) -> str:
    """What a call to a tool that is off answers, instead of the SDK's bare ``Unknown tool``."""
    return f"{name} is turned off on this desk: {_WHY_OFF.get(why, why)}."


class AnswerTurnedOffTools:
    """Server middleware: a ``tools/call`` for a tool the operator turned off says so and why.

    The tool is absent from ``tools/list``, but a model that learnt its name elsewhere (a skill, an earlier
    conversation) still calls it; the SDK would answer ``Unknown tool``, which reads like a typo.
    """

    def __init__(self, off: Mapping[str, str]) -> None:
        self._off = dict(off)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)  # the SDK's error result, in the shape of the caller's protocol era
        if ctx.method != "tools/call" or not isinstance(ctx.params, dict) or not isinstance(result, dict):
            return result
        name = ctx.params.get("name")
        if isinstance(name, str) and name in self._off and result.get("isError"):
            result["content"] = [{"type": "text", "text": turned_off_text(name, self._off[name])}]
        return result


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
