"""Where the layering rules' configuration comes from: the SDK names only ``client_features`` may import.

Ruff's banned-api matches exact dotted names, so the rule "no module but ``client_features`` imports the SDK's
sampling or elicitation types" is written in pyproject.toml as one entry per name and home. This module lists
what the installed SDK offers, so a test can say which entries to add when the SDK grows a new one.
"""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

CLIENT_TALK_PREFIXES = ("CreateMessage", "Elicit", "SamplingMessage", "client_supports_apps")
SDK_PACKAGES = ("mcp", "mcp_types")
# Modules that cannot be imported without optional extras (the SDK's own CLI needs typer, fastmcp is gone in 2.x).
UNIMPORTABLE = ("mcp.cli", "mcp.__main__", "mcp.server.fastmcp")


def _sdk_modules() -> list[str]:
    names = []
    for package in SDK_PACKAGES:
        spec_path = importlib.import_module(package).__file__
        assert spec_path is not None
        root = Path(spec_path).parent
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            if not name.startswith(UNIMPORTABLE):
                names.append(name)
    return names


def sdk_client_talk_names() -> set[str]:
    """Every ``module.name`` in the installed SDK where ``name`` is a sampling, elicitation or apps-support name."""
    found = set()
    for module_name in _sdk_modules():
        module = importlib.import_module(module_name)
        found |= {f"{module_name}.{name}" for name in vars(module) if name.startswith(CLIENT_TALK_PREFIXES)}
    return found


def banned_api(pyproject: Path) -> dict[str, str]:
    """Ruff's banned-api table from ``pyproject``: dotted name to message."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    table = config["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]
    return {name: entry["msg"] for name, entry in table.items()}
