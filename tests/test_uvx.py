"""The uvx form: `uvx --from <checkout> incident-desk`, launched from this checkout and driven over stdio."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.helpers import ROOT, SAMPLE_1043_LOG, child_env, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.slow]


def _uvx() -> str | None:
    beside_python = Path(sys.executable).parent / ("uvx.exe" if os.name == "nt" else "uvx")
    return str(beside_python) if beside_python.exists() else shutil.which("uvx")


@pytest.mark.skipif(_uvx() is None, reason="uv is not installed (it comes with the test extra)")
async def test_uvx_from_the_checkout_serves_the_sample_desk(tmp_path: Path) -> None:
    env = child_env(tmp_path / "audit.sqlite3")
    # pyproject.toml sets uv cache keys on the package files, so this always runs the checkout as it is now.
    params = StdioServerParameters(
        command=str(_uvx()),
        args=["--from", str(ROOT), "incident-desk"],
        env=env,
        cwd=str(tmp_path),
    )
    async with Client(params, mode="legacy") as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        log = text_of(await client.read_resource("incident://INC-1043/log"))
        listing = await client.call_tool("list_incidents", {})
    assert "restart_service" in tools and len(tools) == 7
    assert log == SAMPLE_1043_LOG
    assert [i["id"] for i in listing.structured_content["incidents"]] == ["INC-1042", "INC-1043"]
