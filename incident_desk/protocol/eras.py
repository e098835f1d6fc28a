"""The two protocol revisions the desk speaks, and what each gets from it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the era names are read by modules that never load the SDK
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.extension import Extension

ERA_2025 = "2025-11-25"
ERA_2026 = "2026-07-28"
ROUND_TRIP_ERAS = frozenset({ERA_2026})


def era_features(*, stateless: bool) -> dict[str, str]:
    """What each protocol era gets from the desk over HTTP, logged at start so a stateless surprise is never silent."""
    if stateless:
        legacy = (
            "tools listed in full; no back-channel: summarize_incident uses the provider or the raw log, "
            "restart_service and the approved incident acts refuse (ELICITATION_UNAVAILABLE)"
        )
    else:
        legacy = "sampling and elicitation on the open call (stateful sessions)"
    modern = "approval and sampling by multi round-trip (input_required), in any mode"
    return {ERA_2025: legacy, ERA_2026: modern}


class DeclareOnTheHandshake:
    """Server middleware: the 2025-11-25 ``initialize`` answer declares ``extensions`` too.

    The SDK sieves ``capabilities.extensions`` out of a 2025 answer (that revision's schema has no such field) and
    declares extensions in the 2026 ``server/discover`` only, yet hosts of the handshake era read the field there
    (MCP Inspector serves ``skills/*`` to a legacy server that declares the extension), and an extension's methods
    answer in both eras.
    """

    def __init__(self, extensions: Sequence[Extension]) -> None:
        self._declared = {extension.identifier: extension.settings() for extension in extensions}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            capabilities = result.get("capabilities")
            if isinstance(capabilities, dict):
                capabilities["extensions"] = {**capabilities.get("extensions", {}), **self._declared}
        return result
