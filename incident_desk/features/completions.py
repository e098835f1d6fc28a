"""Argument completion for the prompt's ``incidentId`` and the templates' ``{id}`` and ``{service}``."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from incident_desk.app import COMPLETION_WAIT_SECONDS, DeskApp

MAX_VALUES = 100  # the MCP specification's cap on values per completion response


def _prefixed(candidates: list[str], prefix: str) -> Completion:
    matches = sorted(value for value in candidates if value.startswith(prefix))
    return Completion(values=matches[:MAX_VALUES], total=len(matches), has_more=len(matches) > MAX_VALUES)


def register(server: MCPServer, app: DeskApp) -> None:
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        # A source another request is still asking is left out rather than waited for.
        listing = await app.listing(wait=COMPLETION_WAIT_SECONDS)
        incident_ids = sorted(listing.incidents)
        if isinstance(ref, PromptReference):
            if ref.name == "postmortem" and argument.name == "incidentId":
                return _prefixed(incident_ids, argument.value)
            return None
        if ref.uri == "incident://{id}/log" and argument.name == "id":
            return _prefixed(incident_ids, argument.value)
        if ref.uri == "runbook://{service}" and argument.name == "service":
            return _prefixed(list(listing.runbook_services), argument.value)
        return None

    # The SDK's completion decorator is untyped; registering through it keeps mypy strict elsewhere.
    register_completion = server.completion()  # type: ignore[no-untyped-call]
    register_completion(complete)
