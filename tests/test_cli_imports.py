"""The command line starts like one: ``--version``, ``tools``, ``config`` and ``timeline`` load no part of the MCP SDK
(its client and server models cost seconds to import), checked in ``sys.modules`` after each command ran whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import child_env

# Runs one command in a fresh interpreter, then names every module of the SDK it loaded (on stderr, last line).
_PROBE = """
import json, sys
from incident_desk.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exited:
    code = exited.code
loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("mcp", "mcp_types"))
sys.stderr.write("\\n" + json.dumps({"code": code, "loaded": loaded}) + "\\n")
"""


def _loaded_by(tmp_path: Path, *command: str) -> tuple[int, list[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *command],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=child_env(tmp_path / "audit.sqlite3"),
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], report["loaded"], done.stdout


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (("--version",), "incident-desk 0.1.0"),
        (("tools",), "restart_service"),
        (("config", "claude-desktop"), "incident-desk"),
        (("timeline", "INC-1042"), "INC-1042 payments-api"),
    ],
)
def test_a_command_loads_no_mcp_sdk(tmp_path: Path, command: tuple[str, ...], shown: str) -> None:
    code, loaded, output = _loaded_by(tmp_path, *command)
    assert code == 0, output
    assert shown in output
    assert loaded == [], f"incident-desk {' '.join(command)} loaded {loaded[:5]}"


def test_the_probe_sees_the_sdk_when_a_command_loads_it(tmp_path: Path) -> None:
    """Guards the guard: `demo` talks to an in-process desk, so the same probe must find the SDK in it."""
    _, loaded, _ = _loaded_by(tmp_path, "demo", "--era", "legacy")
    assert "mcp" in loaded and "mcp_types" in loaded


def test_the_tool_declarations_read_without_the_sdk_are_the_modules_own() -> None:
    from importlib import import_module

    from incident_desk.features import TOOL_FEATURES, declared_tools

    for feature in TOOL_FEATURES:
        assert dict(declared_tools(feature)) == dict(import_module(f"incident_desk.features.{feature}").TOOLS)
