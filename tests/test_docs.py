"""The docs stay true: the generated reference pages match the code, every relative link lands, the README stays
short and its test command is the one CI runs."""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shlex
import tokenize
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from incident_desk.cli import reference_docs
from incident_desk.core import outcomes
from incident_desk.core.credentials import ENV_PREFIX
from incident_desk.settings.model import Settings
from tests.helpers import ROOT

README = ROOT / "README.md"
README_MAX_LINES = 300
# Every Markdown page a reader can reach from the README, and the pages beside it.
PAGES = sorted([README, ROOT / "SECURITY.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *ROOT.glob("docs/*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_the_generated_reference_pages_match_the_code() -> None:
    stale = reference_docs.stale_pages()
    assert not stale, f"{', '.join('docs/' + name for name in stale)} out of date: run `{reference_docs.REGENERATE}`"


def test_a_changed_setting_makes_the_configuration_reference_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "configuration.md" not in reference_docs.stale_pages()
    monkeypatch.setattr(Settings.model_fields["port"], "description", "A port the doc has not heard of.")
    assert reference_docs.stale_pages() == ["configuration.md"]


def test_a_changed_outcome_text_makes_the_outcomes_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "outcomes.md" not in reference_docs.stale_pages()
    monkeypatch.setattr(
        outcomes, "RESTART", outcomes.ActWords("restart", "RESTART REFUSED", "the restart", "RESTARTED")
    )
    assert reference_docs.stale_pages() == ["outcomes.md"]


def test_a_changed_act_text_makes_the_outcomes_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "outcomes.md" not in reference_docs.stale_pages()
    changed = outcomes.OutcomeText("note", outcomes.Outcome.DONE, "NOTE SAVED on {id}")
    monkeypatch.setattr(outcomes, "NOTE_ADDED", changed)
    assert reference_docs.stale_pages() == ["outcomes.md"]


def test_the_check_names_the_stale_page_and_the_command_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(reference_docs, "DOCS", tmp_path)
    (tmp_path / "outcomes.md").write_text(reference_docs.outcomes_reference(), encoding="utf-8")
    (tmp_path / "configuration.md").write_text("# an old reference\n", encoding="utf-8")
    assert reference_docs.main(["--check"]) == 1
    assert capsys.readouterr().err == f"docs/configuration.md is out of date: run `{reference_docs.REGENERATE}`\n"
    assert reference_docs.main([]) == 0
    assert reference_docs.main(["--check"]) == 0
    assert (tmp_path / "configuration.md").read_text(encoding="utf-8") == reference_docs.configuration_reference()


def test_the_configuration_reference_names_every_setting_with_its_variable_and_default() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `"): line for line in text.splitlines() if line.startswith("| `")}
    assert set(rows) == set(Settings.model_fields)
    assert "service_logs" in rows, "the hand-written table once missed it"
    assert f"`{ENV_PREFIX}SERVICE_LOGS`" in rows["service_logs"]
    assert "| `--port` | int | `8765` | ≥ 1, ≤ 65535 | HTTP port. |" in rows["port"]
    assert "*secret*" in rows["http_token"] and "*secret*" not in rows["host"]
    assert "`--no-redact`" in rows["redact_secrets"]


def test_the_outcomes_page_holds_the_contracts_exact_texts() -> None:
    text = (ROOT / "docs" / "outcomes.md").read_text(encoding="utf-8")
    for exact in (
        "RESTARTED {service} under {ticket}",
        "NOT RESTARTED -- form submitted with the box unticked",
        "NOT RESTARTED -- operator declined",
        "NOT RESTARTED -- operator dismissed the dialog",
        "NOT RESTARTED -- a change ticket is required",
        "NOT RESTARTED -- no answer within {n}s",
        "ELICITATION_UNAVAILABLE -- refusing to restart {service} without an approval channel",
        "NOT SILENCED -- operator declined",
        "ELICITATION_UNAVAILABLE -- refusing to unsilence {id} without an approval channel",
        "SAMPLING_UNAVAILABLE -- client has no model to lend. Raw log:\\n{log}",
    ):
        assert f"`{exact}`" in text


def test_the_readme_stays_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md: {lines} lines (at most {README_MAX_LINES}); move detail into docs/"


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {_anchor(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def _relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [target for target in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_lands(page: Path) -> None:
    broken = []
    for target in _relative_links(page):
        path_part, _, fragment = target.partition("#")
        landing = (page.parent / path_part).resolve() if path_part else page
        if not landing.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and landing.suffix == ".md" and fragment not in _anchors(landing):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)} links to: {'; '.join(broken)}"


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("## Here\n[ok](#here) [gone](missing.md) [off](#there) [web](https://example.com)\n")
    assert _relative_links(page) == ["#here", "missing.md", "#there"]
    assert _anchors(page) == {"here"}
    assert _anchor("Add it to a client") == "add-it-to-a-client"
    assert _anchor("What the desk offers: `tools`!") == "what-the-desk-offers-tools"


def _command_args(script: str, marker: str) -> list[str]:
    (line,) = _command_lines(script, marker)
    return line


def _command_lines(script: str, marker: str) -> list[list[str]]:
    return [shlex.split(line) for line in script.splitlines() if marker in line and not line.lstrip().startswith("#")]


def _selection(args: list[str]) -> list[str]:
    """A pytest command's arguments without its shell bookkeeping and reports (durations, coverage)."""
    for operator in ("||", "&&", ";", "|"):
        if operator in args:
            args = args[: args.index(operator)]
    return [arg for arg in args if not arg.startswith(("--durations", "--cov"))]


def test_the_readmes_test_command_is_what_ci_runs() -> None:
    """.ci/run runs the README's tests in two steps: all but the timing tests in parallel, then those serially."""
    readme = README.read_text(encoding="utf-8")
    (command,) = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv") and "pytest" in line]
    install, pytest_run = (part.strip() for part in command.split("&&")[1:])
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    extras = shlex.split(install)[-1].removeprefix("-e").strip('.[]"').split(",")
    ci_sync = _command_args(ci, "uv sync")
    ci_extras = [ci_sync[index + 1] for index, arg in enumerate(ci_sync) if arg == "--extra"]
    assert ci_extras == extras, "the README installs other extras than .ci/run"
    assert "--frozen" in ci_sync, ".ci/run installs the locked versions (uv.lock)"
    runs = [args for args in _command_lines(ci, "-m pytest") if "--collect-only" not in args]  # runs no test
    parallel, serial = (_selection(args[1:]) for args in runs)
    assert parallel[:3] == ["-m", "pytest", "-n"] and parallel[-2:] == ["-m", "not timing"], parallel
    assert serial == ["-m", "pytest", "-n", "0", "-m", "timing"], serial
    assert shlex.split(pytest_run)[1:] == parallel[:-2], "the README runs pytest otherwise than .ci/run"


def _fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def test_the_readmes_config_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from incident_desk.settings.model import load_settings

    for name in [name for name in os.environ if name.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    (example,) = _fenced(README.read_text(encoding="utf-8"), "toml")
    desk = tmp_path / "desk"
    (desk / "incidents").mkdir(parents=True)
    (desk / "runbooks").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(example.replace("/srv/incident-desk/desk", str(desk)), encoding="utf-8")
    settings = load_settings(config_file=config)
    assert settings.data_dir == desk and settings.provider == "openai"
    assert settings.services["payments-api"].kind == "command"


def test_the_readmes_client_entry_is_json() -> None:
    for block in _fenced(README.read_text(encoding="utf-8"), "json"):
        assert json.loads(block)["mcpServers"]["incident-desk"]["command"].endswith("/bin/incident-desk")


# Code comments and docstrings state their reason themselves: they cite nothing a reader of the repository cannot
# open, and carry no measurement (figures go stale; they live in bench/ output and docs/performance*.md).
CITATIONS = re.compile(r"\bissue \d+|\bthe article\b|\bDESIGN\b|\bthe seed\b|\bseed's\b", re.IGNORECASE)
MEASUREMENTS = re.compile(r"\b\d+(\.\d+)? ?([KMG]i?B/s|s/GiB|ns a line)\b|\b\d+(\.\d+)?x (faster|slower)\b")


def _comments_and_docstrings(path: Path) -> Iterator[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring and node.body:
                yield node.body[0].lineno, docstring


def comment_findings(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        for line, text in _comments_and_docstrings(path):
            for pattern in (CITATIONS, MEASUREMENTS):
                if match := pattern.search(text):
                    found.append(f"{path.relative_to(package.parent)}:{line}: {match.group(0)!r}")
    return found


def test_code_comments_stand_on_their_own() -> None:
    assert comment_findings(ROOT / "incident_desk") == []


def test_the_comment_check_catches_a_citation_and_a_measurement(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text('"""Fixes the seed\'s flaw."""\n\nX = 1  # scans at 1.2 GB/s\n', encoding="utf-8")
    (package / "b.py").write_text('def f() -> None:\n    """Why: see issue 27."""\n', encoding="utf-8")
    (package / "c.py").write_text("Y = 2  # a numpy scalar: 1.6x slower otherwise\n", encoding="utf-8")
    assert [finding.split(": ", 1)[0] for finding in comment_findings(package)] == [
        "pkg/a.py:3",
        "pkg/a.py:1",
        "pkg/b.py:2",
        "pkg/c.py:1",
    ]
