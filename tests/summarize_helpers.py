"""summarize_incident test helpers: the transcript texts, a scripted client model, provider settings, fixtures.

The degrade chain under test, through a real MCP client in both protocol eras: client sampling
(transcript 04), then the desk's own model provider on a real loopback HTTP server, then the raw log
(transcript 06). A decline, a client error or a slow client (transcript 07) falls through to the next step as a
normal result, never an ``isError`` one, and ``skipped`` says why.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
import structlog
from mcp.client.session import ClientRequestContext
from mcp_types import CallToolResult, CreateMessageRequestParams, CreateMessageResult, ErrorData, TextContent

from incident_desk.observability import log as desk_logging
from tests.fakes import FakeProvider, MemoryKeyring
from tests.helpers import SAMPLE_1043_FINDINGS, SAMPLE_1043_LOG, connect

SYSTEM_PROMPT = "You are an SRE. Answer in two sentences, no preamble."


USER_TEXT = "Summarize this incident log:\n" + SAMPLE_1043_LOG  # sampling: exactly the seed's (DESIGN §3)


# The desk's own provider and the raw log also get the findings, after the log window.
PROVIDER_USER_TEXT = USER_TEXT + "\n" + SAMPLE_1043_FINDINGS


RAW_TEXT = (
    "SAMPLING_UNAVAILABLE -- client has no model to lend. Raw log:\n" + SAMPLE_1043_LOG + "\n" + SAMPLE_1043_FINDINGS
)


ANSWER = "Search p99 latency breached its 500ms SLO while an index segment merge ran. Let the merge finish."


PROVIDER_ANSWER = "A segment merge on search-api pushed p99 latency to 840ms. Throttle merges during peak."


KEY = "sk-proj-DESKKEY0123456789abcdefSECRET"


ENV_KEY = "sk-proj-ENVKEY9876543210zyxwvuSECRET"


NO_CAPABILITY = "sampling: the client did not declare the sampling capability"


NO_PROVIDER = "provider: no model provider is configured"


KEYRING_SERVICE = "incident-desk"


KEYRING_ENTRY = "provider-api-key"


class ScriptedModel:
    """A sampling callback playing the client's model: records every request, then answers as scripted."""

    def __init__(
        self,
        answer: CreateMessageResult | ErrorData | None = None,
        *,
        delay: float = 0.0,
        raises: Exception | None = None,
    ) -> None:
        self.answer = answer or CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=ANSWER), model="scripted-model"
        )
        self.delay = delay
        self.raises = raises
        self.requests: list[CreateMessageRequestParams] = []

    async def __call__(
        self, ctx: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        self.requests.append(params)
        if self.delay:
            await anyio.sleep(self.delay)
        if self.raises is not None:
            raise self.raises
        return self.answer


def _declined() -> ErrorData:
    return ErrorData(code=-1, message="User rejected sampling request")


async def _summarize(server: Any, mode: str, incident: str = "INC-1043", **callbacks: Any) -> CallToolResult:
    async with connect(server, mode, **callbacks) as client:
        return await client.call_tool("summarize_incident", {"incidentId": incident})


@pytest.fixture(name="desk_log")
def desk_log_fixture() -> Iterator[io.StringIO]:
    """Everything the desk logs (structlog and stdlib, SDK and HTTP client included) at DEBUG, as JSON lines."""
    buffer = io.StringIO()
    saved_structlog = structlog.get_config()
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    noisy = {name: logging.getLogger(name).level for name in ("mcp", "uvicorn.access", "httpx2", "sse_starlette")}
    desk_logging.configure("debug", "json", stream=buffer)
    try:
        yield buffer
    finally:
        structlog.configure(**saved_structlog)
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
        for name, level in noisy.items():
            logging.getLogger(name).setLevel(level)


@pytest.fixture(name="keyed")
def keyed_fixture(memory_keyring: MemoryKeyring) -> MemoryKeyring:
    """The provider key stored in the (in-memory) OS keychain, where `incident-desk key set` puts it."""
    memory_keyring.set_password(KEYRING_SERVICE, KEYRING_ENTRY, KEY)
    return memory_keyring


def _openai(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "provider_base_url": fake.url + "/v1", "provider_model": "gpt-test", **extra}


def _anthropic(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {"provider": "anthropic", "provider_base_url": fake.url, "provider_model": "claude-test", **extra}


def _assert_secret_absent(secret: str, *places: Any) -> None:
    """Neither the key nor its distinctive middle appears in a result (text + structured) or log text."""
    middle = secret[8:24]
    for place in places:
        text = place if isinstance(place, str) else place.model_dump_json(by_alias=True)
        assert secret not in text
        assert middle not in text
