"""No backtracking regex ever runs on log or source text: content is matched by RE2 only.

Two checks, each shown to catch a planted ``re``: the modules that handle content (all of ``core`` and the
features) never import Python's ``re`` (or ``regex``); and at run time no compiled ``re.Pattern`` sits anywhere
in those modules' globals, every redaction rule is an RE2 object, and redacting, paging, searching and scanning
a timeline never compile a Python regex.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import re2

from incident_desk.core import linear
from incident_desk.core.redaction import rules as rules_module
from incident_desk.core.redaction.face import SECRETS, redact
from incident_desk.core.redaction.rules import RULES
from incident_desk.core.redaction.shapes import Rule
from incident_desk.core.search import engine as log_search
from incident_desk.core.search import paging as logfile
from incident_desk.core.search.pattern import compile_pattern
from incident_desk.core.timeline import levels as timeline
from tests.helpers import ROOT
from tests.redact_corpus import ORDINARY_LINES, formats

PACKAGE = ROOT / "incident_desk"
CONTENT_TREES = (PACKAGE / "core", PACKAGE / "features")
BACKTRACKING = frozenset({"re", "regex", "sre_compile", "sre_parse"})


def backtracking_imports(source: str) -> list[str]:
    """The backtracking regex modules that ``source`` imports, anywhere in the file."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] in BACKTRACKING]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in BACKTRACKING:
            found.append(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).split(".")[0] in BACKTRACKING
        ):
            found.append(str(node.args[0].value))
    return found


def content_module_paths() -> list[Path]:
    return sorted(path for tree in CONTENT_TREES for path in tree.rglob("*.py"))


def test_no_module_that_handles_content_imports_a_backtracking_regex() -> None:
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in content_module_paths()
        if (found := backtracking_imports(path.read_text(encoding="utf-8")))
    }
    assert len(content_module_paths()) > 20
    assert offenders == {}


@pytest.mark.parametrize(
    "planted",
    ["import re\n", "import re as _re\n", "from re import compile\n", "import regex\n", "x = __import__('re')\n"],
)
def test_the_import_scan_catches_a_planted_re(planted: str) -> None:
    source = (PACKAGE / "core" / "search" / "paging.py").read_text(encoding="utf-8")
    assert backtracking_imports(source) == []
    assert backtracking_imports(source + "\ndef later() -> None:\n    " + planted.replace("\n", "\n    "))


def _values(value: Any, seen: set[int], depth: int = 0) -> Iterator[Any]:
    """``value`` and what it holds: containers, dataclass fields, closures of functions (a rule's replacement)."""
    if id(value) in seen or depth > 6:
        return
    seen.add(id(value))
    yield value
    children: list[Any] = []
    if isinstance(value, dict):
        children = [*value.keys(), *value.values()]
    elif isinstance(value, list | tuple | set | frozenset):
        children = list(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = [getattr(value, field.name) for field in dataclasses.fields(value)]
    elif callable(value) and getattr(value, "__closure__", None):
        children = [cell.cell_contents for cell in value.__closure__ if cell.cell_contents is not None]
    for child in children:
        yield from _values(child, seen, depth + 1)


def python_patterns_in(module: ModuleType) -> list[str]:
    """Names of the module's globals that are, or hold, a compiled Python regex."""
    found = []
    for name, value in vars(module).items():
        if isinstance(value, ModuleType | type):
            continue
        if any(isinstance(held, re.Pattern) for held in _values(value, set())):
            found.append(name)
    return found


def _content_modules() -> list[ModuleType]:
    names = []
    for path in content_module_paths():
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return [importlib.import_module(name) for name in names]


def test_no_compiled_python_regex_lives_in_a_content_module() -> None:
    offenders = {module.__name__: found for module in _content_modules() if (found := python_patterns_in(module))}
    assert offenders == {}


def test_the_global_scan_catches_a_planted_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    assert python_patterns_in(rules_module) == []
    planted = Rule(("x",), RULES[0].pattern, RULES[0].replace, folded=True)
    monkeypatch.setattr(rules_module, "RULES", (*RULES, dataclasses.replace(planted, pattern=re.compile("x"))))  # type: ignore[arg-type]
    assert python_patterns_in(rules_module) == ["RULES"]
    monkeypatch.setattr(rules_module, "RULES", RULES)
    monkeypatch.setattr(timeline, "_PLANTED", re.compile(rb"\n"), raising=False)
    assert python_patterns_in(timeline) == ["_PLANTED"]


def is_linear(rule: Rule) -> bool:
    patterns = [rule.pattern] + ([rule.tail] if rule.tail is not None else [])
    return all(
        isinstance(pattern, linear.LinearPattern) and isinstance(pattern.regexp, re2._re2.RE2) for pattern in patterns
    )


def test_every_redaction_rule_is_an_re2_object() -> None:
    assert len(RULES) > 40
    assert all(is_linear(rule) for rule in RULES)
    assert not is_linear(dataclasses.replace(RULES[0], pattern=re.compile("x")))  # type: ignore[arg-type]


@contextmanager
def no_python_regex() -> Iterator[list[Any]]:
    """Fails any use of ``re``'s compiler while active (a pattern built at run time, or ``re.sub`` on text)."""
    calls: list[Any] = []

    def refuse(pattern: Any, flags: Any = 0) -> Any:
        calls.append(pattern)
        raise AssertionError(f"a Python regex was compiled at run time: {pattern!r}")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(re, "_compile", refuse)
        re.purge()
        yield calls


def test_reading_searching_and_scanning_content_compiles_no_python_regex(tmp_path: Path) -> None:
    lines = [line for fmt in formats() for line in fmt.lines] + list(ORDINARY_LINES)
    log = tmp_path / "log.txt"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    timeline_log = b"".join(b"2026-11-29T10:0%d:00Z svc ERROR boom %d\n" % (i % 10, i) for i in range(100))
    pattern = compile_pattern(".")
    log_search.search(log, pattern, limit=1)  # imports what a search needs
    importlib.import_module("numpy")  # what the timeline counts with; it uses re as it loads, as a desk's loader does
    with no_python_regex() as calls:
        redact("\n".join(lines))
        logfile.read_page(log, limit=10_000, redactor=redact)
        logfile.read_tail(log, max_lines=10_000, max_bytes=1 << 20, redactor=redact)
        log_search.search(log, pattern, limit=10_000, redaction=SECRETS)
        timeline.scan_levels(io.BytesIO(timeline_log), anchor=datetime(2026, 11, 29, 12, tzinfo=UTC), redactor=redact)
    assert calls == []
    with no_python_regex() as calls, pytest.raises(AssertionError) as planted:
        re.sub("x+", "y", "a planted use of re")
    assert calls == ["x+"] and "compiled at run time" in str(planted.value)
