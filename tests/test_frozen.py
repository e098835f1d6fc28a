"""The PyInstaller build: a one-folder executable built with packaging/build.py, driven like a client drives it.

Slow (a build takes 30-60 s), so marked ``slow`` and ``frozen``; skipped only when PyInstaller is not installed
(``pip install -e '.[freeze]'``).
"""

from __future__ import annotations

import importlib.util
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

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
def frozen_exe(build_script: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("frozen")
    try:
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
    assert (internal / "incident_desk" / "data" / "sample_desk" / "incidents" / "INC-1042").is_dir()
    assert (internal / "incident_desk" / "data" / "sample_desk" / "runbooks").is_dir()
    assert list(internal.glob("keyring-*.dist-info/entry_points.txt"))
    # anyio reads these to import its submodules lazily; without them it imports all of them at start.
    assert (internal / "anyio" / "__init__.py").is_file()
    assert (internal / "anyio" / "abc" / "__init__.py").is_file()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_frozen_executable_stops_on_a_signal(frozen_exe: Path, tmp_path: Path, signum: signal.Signals) -> None:
    env = child_env(tmp_path / "audit.sqlite3", XDG_DATA_HOME=str(tmp_path / "xdg"))
    took, status = stop_stdio_desk([str(frozen_exe)], env, tmp_path, signum)
    assert took < 1.0, f"still running {took:.2f}s after {signum.name}"
    assert status == 128 + signum
