"""summarize_incident for a client without the sampling capability: transcript 06, and no request sent.

The control test shows both eras' instruments would see an ungated probe, so the silence is real.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp_types import CallToolResult, InputRequiredResult

from incident_desk.protocol import client_features
from tests.helpers import connect, text_of
from tests.summarize_helpers import NO_CAPABILITY, NO_PROVIDER, RAW_TEXT

pytestmark = pytest.mark.anyio


@pytest.fixture
def sampling_requests_sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every server-to-client request the server sessions send (the 2025-11-25 path), by method."""
    sent: list[str] = []
    original = ServerSession.send_request

    async def counting(self: ServerSession, request: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(request.method)
        return await original(self, request, *args, **kwargs)

    monkeypatch.setattr(ServerSession, "send_request", counting)
    return sent


@pytest.fixture
def ungated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend every client declared sampling: the probe the desk must never make, to show it would be seen."""
    real_view = client_features.view

    def lying_view(ctx: Any) -> client_features.ClientView:
        return replace(real_view(ctx), can_sample=True)

    monkeypatch.setattr(client_features, "view", lying_view)


async def test_no_sampling_capability_gives_transcript_06_without_asking(
    make_server: Callable[..., MCPServer], era: str, sampling_requests_sent: list[str]
) -> None:
    async with connect(make_server(), era) as client:
        first = await client.session.call_tool(
            "summarize_incident", {"incidentId": "INC-1043"}, allow_input_required=True
        )
    # 2025-11-25: no sampling/createMessage left the server. 2026-07-28: no input_required round was asked.
    assert sampling_requests_sent == []
    assert isinstance(first, CallToolResult)
    assert first.is_error is False
    assert text_of(first) == RAW_TEXT
    assert first.structured_content == {
        "incident_id": "INC-1043",
        "mode": "raw",
        "text": RAW_TEXT,
        "model": None,
        "skipped": [NO_CAPABILITY, NO_PROVIDER],
    }


@pytest.mark.usefixtures("ungated")
async def test_the_no_probe_checks_would_see_an_ungated_request(
    make_server: Callable[..., MCPServer], era: str, sampling_requests_sent: list[str]
) -> None:
    """Control for the test above: with the capability gate lied to, both eras' instruments see the probe."""
    async with connect(make_server(), era) as client:
        first = await client.session.call_tool(
            "summarize_incident", {"incidentId": "INC-1043"}, allow_input_required=True
        )
    if era == "legacy":
        assert sampling_requests_sent == ["sampling/createMessage"]
        assert isinstance(first, CallToolResult)
        assert first.structured_content is not None
        assert first.structured_content["skipped"][0].startswith(
            "sampling: the client refused or failed the sampling request"
        )
    else:
        assert isinstance(first, InputRequiredResult)
        assert list(first.input_requests or {}) == ["summary"]
