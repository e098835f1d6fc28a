"""The two protocol revisions the desk speaks, and what each gets from it."""

from __future__ import annotations

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
