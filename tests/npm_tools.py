"""Real command-line tools from npm (mcpb, Claude Code, Gemini CLI), installed once into the ignored build dir.

A test that needs one skips, saying why, only when npm is missing or the npm registry cannot be reached; any other
install failure fails the test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT

CACHE = ROOT / "build" / "npm-tools"
MCPB = "@anthropic-ai/mcpb@2.1.2"
CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.197"
GEMINI_CLI = "@google/gemini-cli@0.61.0"
UNREACHABLE = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|network|getaddrinfo", re.IGNORECASE)


def install_root(package: str) -> Path:
    """Where ``package`` (name@version) is installed: its own npm prefix under the cache."""
    return CACHE / re.sub(r"[^A-Za-z0-9.]+", "-", package).strip("-")


def npm_tool(package: str, command: str) -> Path:
    """The path of ``command`` from ``package``, installing it on first use."""
    prefix = install_root(package)
    binary = prefix / "node_modules" / ".bin" / command
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed: cannot install {package}")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), package],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        if UNREACHABLE.search(done.stderr):
            pytest.skip(f"the npm registry is unreachable, cannot install {package}: {done.stderr.strip()[-300:]}")
        raise AssertionError(f"npm install {package} failed:\n{done.stderr[-2000:]}")
    assert binary.exists(), f"{package} installed no {command}"
    return binary
