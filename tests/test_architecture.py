"""The package's layering, read from its imports: a rule broken here is a cycle or a leak waiting to happen.

Rules (docs/architecture.md):
- ``core`` stands alone: it imports no MCP package and nothing of the desk outside ``core``.
- A feature module never imports another feature module.
- Only the transports and the in-process clients (``doctor``, ``demo``, ``timeline_page``) import the server factory.
- Only ``client_features`` speaks the SDK's sampling and elicitation types or reads the client's capabilities.
- No import cycle, counting imports made inside functions too.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGE = "incident_desk"
MCP_DISTRIBUTIONS = frozenset({"mcp", "mcp_types"})
SERVER_FACTORY = f"{PACKAGE}.server"
# timeline_page asks an in-process desk for show_incident_timeline as a client would, like doctor and demo.
SERVER_IMPORTERS = frozenset(
    {f"{PACKAGE}.transport", f"{PACKAGE}.doctor", f"{PACKAGE}.demo", f"{PACKAGE}.timeline_page"}
)
CLIENT_FEATURES = f"{PACKAGE}.client_features"
CLIENT_TALK_PREFIXES = ("CreateMessage", "Elicit", "SamplingMessage", "client_supports_apps")
CLIENT_TALK_ATTRIBUTES = frozenset({"client_capabilities", "send_request"})
# The demo plays the client's model and human: it builds their answers, the client side of the conversation, and
# may use those two types only; it still may not read capabilities or send requests as the server.
CLIENT_SIDE_ANSWERS = {f"{PACKAGE}.demo": frozenset({"CreateMessageResult", "ElicitResult"})}


@dataclass
class Module:
    name: str
    internal: set[str] = field(default_factory=set)
    external: set[str] = field(default_factory=set)
    sdk_names: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_modules(root: Path) -> dict[str, Module]:
    """Every module of the package at ``root`` with what it imports (anywhere in the file)."""
    paths = {_module_name(root, path): path for path in sorted(root.rglob("*.py"))}
    modules: dict[str, Module] = {}
    for name, path in paths.items():
        module = Module(name)
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Attribute):
                module.attributes.add(node.attr)
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    # `from pkg import sub` depends on the submodule; `from pkg import name` on pkg itself.
                    submodule = f"{base}.{alias.name}"
                    targets.append(submodule if submodule in paths else base)
                    if base.split(".")[0] in MCP_DISTRIBUTIONS:
                        module.sdk_names.add(alias.name)
            for target in targets:
                if target.split(".")[0] == PACKAGE:
                    if target != name:
                        module.internal.add(target)
                else:
                    module.external.add(target.split(".")[0])
        modules[name] = module
    return modules


def _cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(modules[node].internal & modules.keys()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(modules):
        if name not in index:
            visit(name)
    return found


def violations(root: Path) -> list[str]:
    modules = read_modules(root)
    problems: list[str] = []
    core, features = f"{PACKAGE}.core", f"{PACKAGE}.features"
    for name, module in sorted(modules.items()):
        if name == core or name.startswith(core + "."):
            problems += [f"{name} (core) imports {dist}" for dist in sorted(module.external & MCP_DISTRIBUTIONS)]
            problems += [
                f"{name} (core) imports {target}"
                for target in sorted(module.internal)
                if target != PACKAGE and not (target == core or target.startswith(core + "."))
            ]
        if name.startswith(features + "."):
            problems += [
                f"{name} imports another feature, {target}"
                for target in sorted(module.internal)
                if target.startswith(features + ".")
            ]
        if SERVER_FACTORY in module.internal and name not in SERVER_IMPORTERS:
            problems.append(f"{name} imports the server factory {SERVER_FACTORY}")
        if name != CLIENT_FEATURES:
            talk = {n for n in module.sdk_names if n.startswith(CLIENT_TALK_PREFIXES)}
            talk -= CLIENT_SIDE_ANSWERS.get(name, frozenset())
            talk |= module.attributes & CLIENT_TALK_ATTRIBUTES
            problems += [f"{name} talks to the client directly ({what})" for what in sorted(talk)]
    problems += [f"import cycle: {' -> '.join(cycle)}" for cycle in _cycles(modules)]
    return problems


def test_the_package_keeps_its_layers() -> None:
    assert violations(ROOT / PACKAGE) == []


def test_the_reader_sees_the_real_graph() -> None:
    """Guards the guard: an import reader that saw nothing would pass every rule."""
    modules = read_modules(ROOT / PACKAGE)
    assert f"{PACKAGE}.features.restart" in modules
    assert f"{PACKAGE}.app" in modules[f"{PACKAGE}.features.restart"].internal
    assert f"{PACKAGE}.features.restart" in modules[SERVER_FACTORY].internal
    assert "mcp" in modules[CLIENT_FEATURES].external
    assert "ElicitRequest" in modules[CLIENT_FEATURES].sdk_names
    assert f"{PACKAGE}.core.names" in modules[f"{PACKAGE}.core.incidents"].internal


@pytest.mark.parametrize(
    ("module_path", "added_line", "expected"),
    [
        ("core/incidents.py", "import mcp_types", "incident_desk.core.incidents (core) imports mcp_types"),
        ("core/audit.py", "from mcp.server import mcpserver", "incident_desk.core.audit (core) imports mcp"),
        (
            "core/executor.py",
            "from incident_desk.settings import Settings",
            "incident_desk.core.executor (core) imports incident_desk.settings",
        ),
        (
            "features/restart.py",
            "from incident_desk.features import prompts",
            "incident_desk.features.restart imports another feature, incident_desk.features.prompts",
        ),
        (
            "features/prompts.py",
            "from .read_tools import MAX_MATCHES",
            "incident_desk.features.prompts imports another feature, incident_desk.features.read_tools",
        ),
        (
            "features/summarize.py",
            "    from incident_desk.server import build_server",
            "incident_desk.features.summarize imports the server factory incident_desk.server",
        ),
        (
            "features/summarize.py",
            "from mcp_types import CreateMessageRequest",
            "incident_desk.features.summarize talks to the client directly (CreateMessageRequest)",
        ),
        ("app.py", "import incident_desk.server", "import cycle: incident_desk.app -> "),
    ],
)
def test_a_forbidden_import_is_caught(tmp_path: Path, module_path: str, added_line: str, expected: str) -> None:
    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT / PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    target = copy / module_path
    text = target.read_text(encoding="utf-8")
    if added_line.startswith(" "):
        added_line = f"def _added() -> None:\n{added_line}\n"  # an import inside a function counts too
    target.write_text(f"{text}\n{added_line}\n", encoding="utf-8")
    found = violations(copy)
    assert any(problem.startswith(expected) for problem in found), found
