"""The uvx form: `uvx --offline --from <checkout> incident-desk`, launched from this checkout and driven over stdio.

The entry `config --uvx` writes starts offline, so a client's start never waits on (or fails with) the package index;
one online run fills uv's cache first. The offline tests run with a cache of their own, warmed once online, and the
index made unreachable the way an offline laptop has it: every connection refused, the index URL unchanged (uv keeps
its cache per index, so pointing the index elsewhere would only test a different cache).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from incident_desk.cli.main import main
from incident_desk.client_configs import uvx_launcher
from incident_desk.features import tool_catalog
from tests.helpers import ROOT, SAMPLE_1043_LOG, child_env, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.slow]


def _uvx() -> str | None:
    beside_python = Path(sys.executable).parent / ("uvx.exe" if os.name == "nt" else "uvx")
    return str(beside_python) if beside_python.exists() else shutil.which("uvx")


needs_uv = pytest.mark.skipif(_uvx() is None, reason="uv is not installed (it comes with the test extra)")


@needs_uv
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
    assert tools == list(tool_catalog())
    assert log == SAMPLE_1043_LOG
    assert [i["id"] for i in listing.structured_content["incidents"]] == ["INC-1042", "INC-1043"]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def index_unreachable() -> dict[str, str]:
    """Every connection uv makes goes to a closed loopback port, and uv gives up at once instead of retrying."""
    proxy = f"http://127.0.0.1:{_closed_port()}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    return {**{name: proxy for name in names}, **{name.lower(): proxy for name in names}, "UV_HTTP_RETRIES": "0"}


def _without_proxy_exceptions(env: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name.upper() != "NO_PROXY"}


@pytest.fixture(scope="module")
def warm_uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A uv cache of these tests' own, filled by one online run: the first start of the uvx form needs the index."""
    cache = tmp_path_factory.mktemp("uv-cache")
    warm_up = subprocess.run(
        [str(_uvx()), "--from", str(ROOT), "incident-desk", "--version"],
        env={**os.environ, "UV_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert warm_up.returncode == 0, warm_up.stderr
    return cache


@needs_uv
async def test_the_uvx_entry_starts_with_the_package_index_unreachable(tmp_path: Path, warm_uv_cache: Path) -> None:
    launcher = uvx_launcher(str(ROOT))
    offline = _without_proxy_exceptions(
        child_env(tmp_path / "audit.sqlite3", UV_CACHE_DIR=str(warm_uv_cache), **index_unreachable())
    )
    # The index really is out of reach: the plain uvx form cannot even start the desk.
    online_form = subprocess.run(
        [str(_uvx()), "--from", str(ROOT), "incident-desk", "--version"],
        env=offline,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert online_form.returncode != 0
    params = StdioServerParameters(command=str(_uvx()), args=list(launcher.args), env=offline, cwd=str(tmp_path))
    async with Client(params, mode="legacy") as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        listing = await client.call_tool("list_incidents", {})
    assert launcher.args[0] == "--offline"
    assert tools == list(tool_catalog())
    assert [i["id"] for i in listing.structured_content["incidents"]] == ["INC-1042", "INC-1043"]


@needs_uv
def test_config_uvx_says_when_uvs_cache_cannot_start_it_offline(
    tmp_path: Path, warm_uv_cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(Path(str(_uvx())).parent) + os.pathsep + os.environ.get("PATH", ""))
    for name, value in index_unreachable().items():
        monkeypatch.setenv(name, value)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "cold-cache"))
    assert main(["config", "cursor", "--uvx", str(ROOT)]) == 0
    cold = capsys.readouterr().err
    assert f"uv's cache cannot start {ROOT} offline yet" in cold
    assert f"run `uvx --from {ROOT} incident-desk --version` once while online" in cold
    monkeypatch.setenv("UV_CACHE_DIR", str(warm_uv_cache))
    assert main(["config", "cursor", "--uvx", str(ROOT)]) == 0
    assert "uv's cache" not in capsys.readouterr().err
