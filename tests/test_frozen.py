"""The PyInstaller build: a one-folder executable built with packaging/build.py, driven like a client drives it.

Slow (a build takes 30-60 s), so marked ``slow`` and ``frozen``; skipped only when PyInstaller is not installed
(``pip install -e '.[freeze]'``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.frozen_build import cached_onedir_build
from tests.helpers import ROOT, child_env, text_of
from tests.signals import stop_stdio_desk

pytestmark = [pytest.mark.frozen, pytest.mark.slow, pytest.mark.timeout(900)]

pytest.importorskip("PyInstaller", reason="PyInstaller is not installed (pip install -e '.[freeze]')")


def load_build_script() -> ModuleType:
    """packaging/ is not a package (it would shadow the PyPI ``packaging``): load build.py by path."""
    spec = importlib.util.spec_from_file_location("incident_desk_build", ROOT / "packaging" / "build.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def build_script() -> ModuleType:
    return load_build_script()


@pytest.fixture(scope="module")
def frozen_exe(
    build_script: ModuleType, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The build of the current sources: made once and reused by every session until an input changes
    (tests/frozen_build.py), or made for this module where there is no pytest cache or no flock (Windows)."""
    cache = getattr(request.config, "cache", None)
    try:
        if cache is not None and sys.platform != "win32":
            exe = cached_onedir_build(build_script, cache.mkdir("frozen-build"))
        else:
            root = tmp_path_factory.mktemp("frozen")
            exe = build_script.build("onedir", root / "dist", root / "work")
    except build_script.SmokeFailure as exc:
        pytest.fail(f"the frozen build failed: {exc}")
    yield Path(exe)


@pytest.mark.anyio
async def test_frozen_executable_serves_stdio(frozen_exe: Path, tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=str(frozen_exe),
        args=[],
        env={"INCIDENT_DESK_AUDIT_DB": str(tmp_path / "audit.sqlite3"), "XDG_DATA_HOME": str(tmp_path / "xdg")},
        cwd=str(tmp_path),
    )
    async with Client(params, mode="legacy") as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        index = await client.read_resource("incident://index")
        listed = await client.call_tool("list_incidents", {})
        # RE2, numpy and stringzilla are in the bundle: a regex search runs, one with a required literal (found by
        # stringzilla before RE2 runs) too, and a lookbehind gets the desk's own error.
        found = await client.call_tool(
            "search_incident_log", {"incidentId": "INC-1043", "pattern": r"p\d{2} (lat|LAT)"}
        )
        found_by_literal = await client.call_tool(
            "search_incident_log", {"incidentId": "INC-1043", "pattern": r"latency \d+ms \(SLO"}
        )
        refused = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": "(?<=p)99"})

    assert {"list_incidents", "read_incident_log", "get_runbook", "summarize_incident", "restart_service"} <= tools
    assert text_of(index).strip() == "INC-1042\nINC-1043"
    assert not listed.is_error
    assert "INC-1042" in str(listed.content)
    assert "INC-1043" in str(listed.content)
    assert not found.is_error
    assert found.structured_content["matches"] == [
        {"number": 2, "text": "11:02:51 search-api INFO p99 latency 840ms (SLO 500ms)"}
    ]
    assert not found_by_literal.is_error
    assert found_by_literal.structured_content["matches"] == found.structured_content["matches"]
    assert refused.is_error and "lookbehind (?<=...) is not supported" in text_of(refused)
    manifest = json.loads((ROOT / "client_configs" / "claude-desktop" / "manifest.json").read_text(encoding="utf-8"))
    assert {tool["name"] for tool in manifest["tools"]} <= tools


def test_frozen_executable_passes_the_release_smoke_test(build_script: ModuleType, frozen_exe: Path) -> None:
    """The same checks the release workflow runs: CLI, keyring backends, stdio and Streamable HTTP."""
    try:
        build_script.smoke(frozen_exe)
    except build_script.SmokeFailure as exc:
        pytest.fail(str(exc))


def test_frozen_build_bundles_package_data_and_keyring_metadata(frozen_exe: Path) -> None:
    internal = frozen_exe.parent / "_internal"
    assert (internal / "incident_desk" / "data" / "sample" / "incidents" / "INC-1042").is_dir()
    assert (internal / "incident_desk" / "data" / "sample" / "runbooks").is_dir()
    assert list(internal.glob("keyring-*.dist-info/entry_points.txt"))
    # anyio reads these to import its submodules lazily; without them it imports all of them at start.
    assert (internal / "anyio" / "__init__.py").is_file()
    assert (internal / "anyio" / "abc" / "__init__.py").is_file()


@pytest.mark.anyio
@pytest.mark.skipif(sys.platform != "linux", reason="finds the desk's helpers in /proc")
async def test_frozen_executable_counts_a_big_timeline_with_helpers_that_are_itself(
    frozen_exe: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from mcp import Client, StdioServerParameters

    from tests.test_timeline_processes import (
        call_until_helpers_count,
        children,
        helped_desk_env,
        helpers_of,
        level_totals,
        wait_until_gone,
    )

    env, expected = helped_desk_env(tmp_path, XDG_DATA_HOME=str(tmp_path / "xdg"))
    params = StdioServerParameters(command=str(frozen_exe), args=[], env=env, cwd=str(tmp_path))
    async with Client(params, mode="legacy") as client:
        shown = await call_until_helpers_count(client, capfd, tmp_path / "timeline-cache")
        (desk,) = [pid for pid in children(os.getpid()) if Path(f"/proc/{pid}/exe").resolve() == frozen_exe.resolve()]
        helpers = helpers_of(desk)
    assert level_totals(shown) == expected
    assert len(helpers) == 2, "the executable started as a helper twice (multiprocessing.freeze_support)"
    assert wait_until_gone([desk, *helpers])


@pytest.mark.anyio
@pytest.mark.skipif(sys.platform != "linux", reason="finds the desk's helpers in /proc")
async def test_frozen_executable_searches_a_big_log_with_helpers_that_are_itself(
    frozen_exe: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from mcp import Client, StdioServerParameters

    from tests.test_search_processes import helped_search_env, search_until_helpers_read
    from tests.test_timeline_processes import children, helpers_of, wait_until_gone

    env, last_line = helped_search_env(tmp_path, XDG_DATA_HOME=str(tmp_path / "xdg"))
    params = StdioServerParameters(command=str(frozen_exe), args=[], env=env, cwd=str(tmp_path))
    async with Client(params, mode="legacy") as client:
        shown = await search_until_helpers_read(client, capfd)
        (desk,) = [pid for pid in children(os.getpid()) if Path(f"/proc/{pid}/exe").resolve() == frozen_exe.resolve()]
        helpers = helpers_of(desk)
    assert [match["number"] for match in (shown.structured_content or {})["matches"]] == [last_line]
    assert len(helpers) == 2, "the executable started as a helper twice, and loaded the search's module"
    assert wait_until_gone([desk, *helpers])


@pytest.mark.timing
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_frozen_executable_stops_on_a_signal(frozen_exe: Path, tmp_path: Path, signum: signal.Signals) -> None:
    env = child_env(tmp_path / "audit.sqlite3", XDG_DATA_HOME=str(tmp_path / "xdg"))
    took, status = stop_stdio_desk([str(frozen_exe)], env, tmp_path, signum)
    assert took < 1.0, f"still running {took:.2f}s after {signum.name}"
    assert status == 128 + signum


# The host side of a bundle: what Claude Desktop does with manifest.json, done by the official library's own
# function, so the test runs the command a host would run.
RESOLVE_HOST_CONFIG = """
const [library, manifestPath, extensionPath, userConfig] = process.argv.slice(1);
const { getMcpConfigForManifest } = await import(library);
const { readFileSync } = await import("node:fs");
const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
const config = await getMcpConfigForManifest({
  manifest, extensionPath, systemDirs: { HOME: process.env.HOME }, userConfig: JSON.parse(userConfig),
  pathSeparator: "/",
});
process.stdout.write(JSON.stringify(config));
"""


def _host_config(mcpb: Path, unpacked: Path, user_config: dict[str, str]) -> dict[str, Any]:
    library = mcpb.parent.parent / "@anthropic-ai" / "mcpb" / "dist" / "index.js"
    done = subprocess.run(
        [
            "node",
            "--input-type=module",
            "-e",
            RESOLVE_HOST_CONFIG,
            library.as_uri(),
            str(unpacked / "manifest.json"),
            str(unpacked),
            json.dumps(user_config),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    config: dict[str, Any] = json.loads(done.stdout)
    return config


@pytest.mark.anyio
@pytest.mark.skipif(sys.platform != "linux", reason="the test packs the Linux bundle")
async def test_the_bundle_packed_by_the_official_tool_serves_its_declared_command(
    build_script: ModuleType, frozen_exe: Path, tmp_path: Path
) -> None:
    from mcp import Client, StdioServerParameters

    from tests.npm_tools import MCPB, npm_tool

    mcpb = npm_tool(MCPB, "mcpb")
    try:
        bundle = Path(build_script.mcpb(frozen_exe, tmp_path / "release", cli=[str(mcpb)]))
    except build_script.SmokeFailure as exc:
        pytest.fail(str(exc))
    from incident_desk import __version__

    assert bundle.name.startswith(f"incident-desk-{__version__}-linux-")
    assert bundle.suffix == ".mcpb"
    info = subprocess.run([str(mcpb), "info", str(bundle)], capture_output=True, text=True, timeout=120, check=True)
    assert "incident-desk" in info.stdout + info.stderr
    unpacked = tmp_path / "unpacked"
    subprocess.run([str(mcpb), "unpack", str(bundle), str(unpacked)], capture_output=True, timeout=300, check=True)
    manifest = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["version"] == __version__
    assert manifest["compatibility"]["platforms"] == ["linux"]
    assert manifest["user_config"]["provider_api_key"]["sensitive"] is True
    assert {manifest["user_config"][key]["type"] for key in ("data_dir", "config_file")} == {"directory", "file"}
    validated = subprocess.run(
        [str(mcpb), "validate", str(unpacked / "manifest.json")], capture_output=True, text=True, timeout=120
    )
    assert validated.returncode == 0, validated.stdout + validated.stderr

    data = tmp_path / "desk"
    shutil.copytree(ROOT / "incident_desk" / "data" / "sample", data)
    shutil.copytree(data / "incidents" / "INC-1043", data / "incidents" / "INC-7777")
    for user_config, expected in (({"data_dir": str(data)}, "INC-7777"), ({}, "INC-1043")):
        config = _host_config(mcpb, unpacked, user_config)
        assert Path(config["command"]).is_relative_to(unpacked)
        env = {**child_env(tmp_path / "audit.sqlite3", XDG_DATA_HOME=str(tmp_path / "xdg")), **config["env"]}
        params = StdioServerParameters(command=config["command"], args=config["args"], env=env, cwd=str(tmp_path))
        async with Client(params, mode="legacy") as client:
            assert client.server_info is not None
            assert client.server_info.version == __version__
            index = text_of(await client.read_resource("incident://index"))
        assert expected in index.split(), (user_config, index)
