"""The package's layering: import-linter's contracts and ruff's banned-api say the rules, these tests prove them.

Rules (docs/architecture.md), each with where it lives:
- ``core`` stands alone: it imports no MCP package and nothing of the desk outside ``core`` (contract
  ``core-stands-alone`` in pyproject.toml).
- A feature module never imports another feature module (``features-stand-apart``).
- Only the transports and the in-process clients (``doctor``, ``demo``, ``reference_docs``) import the server factory
  (``server-factory-importers``).
- No module that handles content (``core``, the features) imports Python's backtracking ``re`` (``content-is-linear``;
  ``tests/test_linear_content.py`` also looks for ``__import__("re")`` and compiled patterns at run time).
- No import cycle, counting imports made inside functions too (``no-cycles``).
- Only ``client_features`` imports the SDK's sampling and elicitation types or ``client_supports_apps`` (ruff's
  banned-api, TID251); the demo, which plays the client, may build the two answers it gives.
- Only ``client_features`` reads the client's capabilities or sends the client a request: attribute names, which no
  import tool sees, so this file checks them itself.

Each rule is shown to fail on a planted forbidden import in a copy of the package.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.architecture_rules import banned_api, sdk_client_talk_names
from tests.helpers import ROOT

PACKAGE = "incident_desk"
CLIENT_FEATURES = ROOT / PACKAGE / "protocol" / "client_features.py"
CLIENT_TALK_ATTRIBUTES = frozenset({"client_capabilities", "send_request"})
CONTRACTS = ("core-stands-alone", "features-stand-apart", "content-is-linear", "server-factory-importers", "no-cycles")
BIN = Path(sys.executable).parent


def lint_imports(project: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """import-linter on the package under ``project`` with the contracts of ``project``/pyproject.toml."""
    selected = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache", *selected],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def banned_api_findings(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "--select", "TID251", "--output-format", "concise", PACKAGE],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def client_talk_attributes(root: Path) -> list[str]:
    """``module: attribute`` for every read of the client's capabilities or request sending outside client_features."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root) == CLIENT_FEATURES.relative_to(ROOT / PACKAGE):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        found += [f"{path.relative_to(root.parent)}: {name}" for name in sorted(attributes & CLIENT_TALK_ATTRIBUTES)]
    return found


def test_the_package_keeps_its_import_contracts() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout, result.stdout


def test_only_client_features_imports_the_sdks_client_talk() -> None:
    result = banned_api_findings(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_only_client_features_reads_capabilities_or_sends_requests() -> None:
    assert client_talk_attributes(ROOT / PACKAGE) == []


def test_the_banned_api_covers_every_client_talk_name_the_sdk_has() -> None:
    """Ruff bans exact names: one the SDK adds (or moves) must be added to pyproject.toml, or the rule has a hole."""
    configured = set(banned_api(ROOT / "pyproject.toml"))
    offered = sdk_client_talk_names()
    assert len(offered) > 20, "the SDK scan found almost nothing: it is not looking where the SDK keeps its types"
    missing = sorted(offered - configured)
    assert missing == [], "add to [tool.ruff.lint.flake8-tidy-imports.banned-api]:\n" + "\n".join(
        f'"{name}".msg = "only incident_desk.protocol.client_features talks to the client"' for name in missing
    )


def _planted_copy(tmp_path: Path, module_path: str, added_line: str) -> Path:
    """A copy of the project's package and configuration with ``added_line`` appended to ``module_path``."""
    shutil.copytree(ROOT / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / PACKAGE / module_path
    if added_line.startswith(" "):
        added_line = f"def _added() -> None:\n{added_line}\n"  # an import inside a function counts too
    target.write_text(f"{target.read_text(encoding='utf-8')}\n{added_line}\n", encoding="utf-8")
    return tmp_path


# (contract, module, line appended, what the broken contract's report names)
CONTRACT_PLANTS = [
    ("core-stands-alone", "core/incidents.py", "import mcp_types", "incident_desk.core.incidents -> mcp_types"),
    (
        "core-stands-alone",
        "core/journal/audit.py",
        "from mcp.server import mcpserver",
        "incident_desk.core.journal.audit -> mcp",
    ),
    (
        "core-stands-alone",
        "core/acts/executor.py",
        "from incident_desk.settings.model import Settings",
        "incident_desk.core.acts.executor -> incident_desk.settings.model",
    ),
    (
        "features-stand-apart",
        "features/restart.py",
        "from incident_desk.features import prompts",
        "incident_desk.features.restart -> incident_desk.features.prompts",
    ),
    (
        "features-stand-apart",
        "features/prompts.py",
        "from .read_tools import MAX_MATCHES",
        "incident_desk.features.prompts -> incident_desk.features.read_tools",
    ),
    (
        "server-factory-importers",
        "features/summarize.py",
        "    from incident_desk.server import build_server",
        "incident_desk.features.summarize -> incident_desk.server",
    ),
    ("content-is-linear", "core/search/paging.py", "    import re", "incident_desk.core.search.paging -> re"),
    (
        "content-is-linear",
        "features/read_tools.py",
        "from re import compile",
        "incident_desk.features.read_tools -> re",
    ),
    ("no-cycles", "app.py", "import incident_desk.server", ".app -> .server"),
]


@pytest.mark.parametrize(("contract", "module_path", "added_line", "expected"), CONTRACT_PLANTS)
def test_each_contract_catches_a_planted_import(
    tmp_path: Path, contract: str, module_path: str, added_line: str, expected: str
) -> None:
    project = _planted_copy(tmp_path, module_path, added_line)
    result = lint_imports(project, contract)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "0 kept, 1 broken." in result.stdout, result.stdout
    assert expected in result.stdout, result.stdout


def test_every_contract_has_a_planted_import() -> None:
    """A contract added to pyproject.toml without a plant above would be trusted unseen."""
    result = lint_imports(ROOT)
    assert {plant[0] for plant in CONTRACT_PLANTS} == set(CONTRACTS)
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("module_path", "added_line", "expected"),
    [
        (
            "features/summarize.py",
            "from mcp_types import CreateMessageRequest",
            "`mcp_types.CreateMessageRequest` is banned",
        ),
        (
            "protocol/tool_results.py",
            "    from mcp.server.apps import client_supports_apps",
            "client_supports_apps` is banned",
        ),
        ("cli/demo.py", "from mcp_types import ElicitRequest", "`mcp_types.ElicitRequest` is banned"),
    ],
)
def test_the_banned_api_catches_a_planted_import(
    tmp_path: Path, module_path: str, added_line: str, expected: str
) -> None:
    project = _planted_copy(tmp_path, module_path, added_line)
    result = banned_api_findings(project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stdout, result.stdout
    assert f"{PACKAGE}/{module_path}:" in result.stdout, result.stdout


@pytest.mark.parametrize("added_line", ["    ctx.session.client_capabilities", "    ctx.session.send_request(x)"])
def test_the_attribute_check_catches_a_planted_read(tmp_path: Path, added_line: str) -> None:
    project = _planted_copy(tmp_path, "features/restart.py", added_line)
    assert client_talk_attributes(project / PACKAGE) == [
        f"incident_desk/features/restart.py: {added_line.strip().split('.')[2].split('(')[0]}"
    ]
