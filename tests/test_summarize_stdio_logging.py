"""The real thing: `python -m incident_desk` over stdio uses the provider and never logs its key at DEBUG."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.fakes import FakeProvider
from tests.helpers import ROOT, child_env, text_of
from tests.summarize_helpers import KEY, PROVIDER_ANSWER, RAW_TEXT, _assert_secret_absent

pytestmark = pytest.mark.anyio


@pytest.mark.subprocess
async def test_stdio_subprocess_uses_the_provider_and_never_logs_the_key(
    tmp_path: Path, fake_provider: FakeProvider
) -> None:
    """What a desktop client launches, key from the environment, everything the server logs at DEBUG captured."""
    env = child_env(
        tmp_path / "audit.sqlite3",
        INCIDENT_DESK_PROVIDER="openai",
        INCIDENT_DESK_PROVIDER_BASE_URL=fake_provider.url + "/v1",
        INCIDENT_DESK_PROVIDER_MODEL="gpt-test",
        INCIDENT_DESK_PROVIDER_API_KEY=KEY,
        INCIDENT_DESK_LOG_LEVEL="debug",
        INCIDENT_DESK_LOG_FORMAT="json",
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "incident_desk"], cwd=str(ROOT), env=env)
    stderr_path = tmp_path / "server-stderr.log"
    with stderr_path.open("w", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            fake_provider.answer_openai(PROVIDER_ANSWER)
            answered = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
            fake_provider.answer(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
            rejected = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    stderr = stderr_path.read_text(encoding="utf-8")
    assert [r.headers["authorization"] for r in fake_provider.requests] == [f"Bearer {KEY}"] * 2
    assert answered.structured_content is not None
    assert (answered.structured_content["mode"], text_of(answered)) == ("provider", PROVIDER_ANSWER)
    assert rejected.structured_content is not None
    assert rejected.structured_content["mode"] == "raw"
    assert text_of(rejected) == RAW_TEXT
    assert rejected.structured_content["skipped"][1].endswith(
        "HTTP 401 Unauthorized: Incorrect API key provided: [redacted]"
    )
    assert "summary step skipped" in stderr  # the server did log, at debug, to the captured stream
    _assert_secret_absent(KEY, answered, rejected, stderr)
