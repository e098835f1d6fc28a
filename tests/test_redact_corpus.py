"""Secrets in logs are masked on every read path, in every line shape, at a line cut and at the window edge.

The corpus (tests/redact_corpus.py) holds more than 80 secret formats. Each is written into incident logs in four
line shapes (or, for private keys, three ways of logging a block), then read back through a real client on every
path that shows log text: the incident://{id}/log resource, read_incident_log pages, search_incident_log, the
sampling request of summarize_incident and its raw fallback, and the postmortem prompt. Nothing of a secret may
show. Ordinary log lines must come back exactly as written.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import TextContent

from incident_desk.core.redaction.face import MASK, redact
from incident_desk.core.search import paging as logfile
from tests.helpers import AppFactory, connect, text_of
from tests.redact_corpus import NEXT_LINE, ORDINARY_LINES, Format, formats, leaked, leaks, pieces, shaped_lines
from tests.restart_helpers import approve, desk, rows
from tests.summarize_helpers import ScriptedModel

pytestmark = pytest.mark.anyio

FORMATS = formats()
SINGLE_LINE = [fmt for fmt in FORMATS if not fmt.multiline]
# Values on the line after their name: recognised by that line, not alone (a search looks at the line before).
NEXT_LINE_FORMATS = [fmt for fmt in FORMATS if fmt.name.startswith(NEXT_LINE)]
KEY_BLOCKS = [fmt for fmt in FORMATS if fmt.multiline and fmt not in NEXT_LINE_FORMATS]
WINDOW_BYTES = 1024  # the smallest tail window the settings allow, so its edge is easy to place
FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "


def test_the_corpus_has_more_than_80_formats() -> None:
    assert len(FORMATS) >= 80
    assert len({fmt.name for fmt in FORMATS}) == len(FORMATS)


def test_the_corpus_has_at_least_200_formats_and_100_ordinary_lines() -> None:
    """Grown from 137 by kind (syntaxes, URLs and connection strings, command lines, vendor tokens)."""
    assert len(FORMATS) >= 200
    assert len(set(ORDINARY_LINES)) >= 100


def test_the_corpus_has_grown_by_the_kinds_that_still_passed() -> None:
    """Grown from 242 by at least 80 (issue 42): admin tools' password and community arguments, alerting
    vendors' integration keys, personal-access-token variables, payment gateways, log-shipping URL paths, CI and
    code-quality tokens, short keys; with ordinary lines of the same shapes."""
    assert len(FORMATS) >= 242 + 80
    assert len(set(ORDINARY_LINES)) >= 130


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda fmt: fmt.name)
def test_each_format_is_masked_in_each_shape(fmt: Format) -> None:
    for shape, lines in shaped_lines(fmt):
        block = "\n".join(lines)
        shown = redact(block)
        assert shown.count("\n") == block.count("\n")
        assert not leaks(fmt, shown), (shape, shown)
        if not fmt.multiline:
            assert MASK in shown, shape


@pytest.mark.parametrize("fmt", KEY_BLOCKS, ids=lambda fmt: fmt.name)
def test_key_bodies_are_masked_one_line_at_a_time_down_to_their_short_end(fmt: Format) -> None:
    """A search hit is one line: each body line must be recognised alone (the documented limit: a last line
    shorter than 20 characters)."""
    for shape, lines in shaped_lines(fmt):
        for line in lines:
            body = [secret for secret in fmt.secrets if secret in line and len(secret) >= 20]
            if body:
                assert redact(line).strip().endswith(MASK), (shape, line)


def test_the_fast_lower_case_rules_agree_with_their_case_insensitive_originals() -> None:
    """Case-insensitive rules run on the lower-cased line; a line whose lower case is longer ("İ" becomes two
    characters) takes the original patterns instead. Both must mask exactly alike."""
    lines = [line for fmt in SINGLE_LINE for _shape, shaped in shaped_lines(fmt) for line in shaped]
    for line in [*lines, *ORDINARY_LINES]:
        assert len(("İ " + line).lower()) != len("İ " + line)
        assert redact("İ " + line) == "İ " + redact(line), line


def test_ordinary_lines_are_left_alone() -> None:
    changed = [line for line in ORDINARY_LINES if redact(line) != line]
    assert changed == []
    block = "\n".join(ORDINARY_LINES) + "\n"
    assert redact(block) == block


# Incident logs ------------------------------------------------------------------------------------------------


def _incident(root: Path, incident_id: str, log: str) -> None:
    entry = root / "incidents" / incident_id
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        'title="corpus"\nservice="payments-api"\nseverity="SEV2"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n',
        encoding="utf-8",
    )
    (entry / "log.txt").write_text(log, encoding="utf-8", newline="\n")


def _corpus_log() -> str:
    """Every format in every shape, each between ordinary lines."""
    lines: list[str] = []
    for index, fmt in enumerate(FORMATS):
        for _shape, shaped in shaped_lines(fmt):
            lines.append(ORDINARY_LINES[index % len(ORDINARY_LINES)])
            lines.extend(shaped)
    return "\n".join([*lines, *ORDINARY_LINES]) + "\n"


def _cut_log() -> str:
    """Each one-line format in a line longer than the cut, with the cut falling inside each of its secrets."""
    lines = []
    for fmt in SINGLE_LINE:
        fragment = fmt.lines[0]
        for secret in fmt.secrets:
            at = fragment.index(secret)
            for inside in sorted({1, len(secret) // 2, len(secret) - 1}):
                length = logfile.MAX_LINE_BYTES - at - inside
                filler = (FILLER * (length // len(FILLER) + 1))[: length - 1] + " "
                lines.append(filler + fragment + " and the rest of the line")
    return "\n".join(lines) + "\n"


def _edge_logs() -> dict[str, str]:
    """Logs whose tail window starts just before a secret (its name cut off) or inside it.

    One-line formats are the last line, longer than the window, so the window shows that line's end; private keys
    end just after the window's start, so it begins inside their body.
    """
    logs: dict[str, str] = {}
    for number, fmt in enumerate(FORMATS):
        if fmt.multiline:
            for shape, lines in shaped_lines(fmt):
                logs[f"EDGE-{number}-{shape}"] = "\n".join([*ORDINARY_LINES[:3], *lines, "ok", "done"]) + "\n"
            continue
        fragment = fmt.lines[0]
        secret = fmt.secrets[0]
        at = fragment.index(secret)
        for inside in (-1, len(secret) // 2):
            inside = max(inside, len(fragment) - at - (WINDOW_BYTES - 2))
            trailer = (" and the rest" * 100)[: WINDOW_BYTES - 1 - (len(fragment) - at - inside)]
            line = FILLER * 30 + fragment + trailer
            logs[f"EDGE-{number}-{inside}"] = "ok line\n" + line + "\n"
    return logs


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus-desk")
    _incident(root, "INC-CORPUS", _corpus_log())
    _incident(root, "INC-CUT", _cut_log())
    for incident_id, log in _edge_logs().items():
        _incident(root, incident_id, log)
    (root / "runbooks").mkdir()
    return root


def test_the_leak_check_finds_any_piece_of_any_secret() -> None:
    """What every read path is checked with: a piece of a secret anywhere in a text is found, by format (each
    format's first and last pieces alone, every tenth format's among all the corpus's)."""
    text = "\n".join(ORDINARY_LINES)
    assert leaked(FORMATS, text) == {}
    for number, fmt in enumerate(FORMATS):
        for piece in {pieces(fmt.secrets[0])[0], pieces(fmt.secrets[-1])[-1]}:
            planted = text[: len(text) // 2] + piece + text[len(text) // 2 :]
            assert leaked([fmt], planted) == {fmt.name: leaks(fmt, planted)} != {fmt.name: []}, (fmt.name, piece)
            if number % 10 == 0:
                assert leaked(FORMATS, planted).get(fmt.name) == leaks(fmt, planted), (fmt.name, piece)


def _check(shown: str, where: str, formats_to_check: list[Format] = FORMATS) -> None:
    found = leaked(formats_to_check, shown)
    assert not found, f"{where} shows secrets: {found}"


async def _window_paths(client: Any, incident_id: str, model: ScriptedModel) -> dict[str, str]:
    """What each window-based path shows of an incident: resource, prompt, sampling request."""
    resource = text_of(await client.read_resource(f"incident://{incident_id}/log"))
    prompt = await client.get_prompt("postmortem", {"incidentId": incident_id})
    summary = await client.call_tool("summarize_incident", {"incidentId": incident_id})
    (request, *_) = model.requests[-1:]
    sampled = request.messages[0].content
    assert isinstance(sampled, TextContent)
    return {
        "resource": resource,
        "prompt": "\n".join(m.content.text for m in prompt.messages if isinstance(m.content, TextContent)),
        "sampling request": sampled.text,
        "summary": text_of(summary),
    }


async def _all_pages(client: Any, incident_id: str) -> str:
    texts, cursor = [], None
    while True:
        arguments: dict[str, Any] = {"incidentId": incident_id, "limit": 5000}
        if cursor:
            arguments["cursor"] = cursor
        page = await client.call_tool("read_incident_log", arguments)
        assert not page.is_error, text_of(page)
        texts.append(text_of(page))
        cursor = page.structured_content["next_cursor"]
        if cursor is None:
            return "\n".join(texts)


async def _all_matches(client: Any, incident_id: str, pattern: str) -> tuple[str, int]:
    texts, cursor, count = [], None, 0
    while True:
        arguments: dict[str, Any] = {"incidentId": incident_id, "pattern": pattern, "limit": 1000}
        if cursor:
            arguments["cursor"] = cursor
        found = await client.call_tool("search_incident_log", arguments)
        assert not found.is_error, text_of(found)
        texts.append(text_of(found))
        count += len(found.structured_content["matches"])
        cursor = found.structured_content["next_cursor"]
        if cursor is None:
            return "\n".join(texts), count


async def test_every_read_path_masks_the_corpus(
    make_server: Callable[..., MCPServer], corpus_root: Path, era: str
) -> None:
    log = _corpus_log()
    server = make_server(data_dir=corpus_root, log_window_lines=100_000, log_window_bytes=64 * 1024 * 1024)
    model = ScriptedModel()
    async with connect(server, era, sampling_callback=model) as client:
        shown = await _window_paths(client, "INC-CORPUS", model)
        shown["pages"] = await _all_pages(client, "INC-CORPUS")
        shown["search"], matched = await _all_matches(client, "INC-CORPUS", "^")
    async with connect(server, era) as client:  # no sampling: the raw fallback
        shown["raw fallback"] = text_of(await client.call_tool("summarize_incident", {"incidentId": "INC-CORPUS"}))
    assert matched == log.count("\n"), "search must have shown every line"
    assert shown["raw fallback"].startswith("SAMPLING_UNAVAILABLE")
    for where, text in shown.items():
        if where != "summary":  # the scripted model's answer
            assert text.count(MASK) >= len(FORMATS), where
            _check(text, where)


async def test_a_search_cannot_probe_for_a_secret(make_server: Callable[..., MCPServer], corpus_root: Path) -> None:
    """Matching runs on the redacted text: searching for a piece of a secret finds nothing."""
    server = make_server(data_dir=corpus_root)
    probes = [(fmt, secret[:10]) for fmt in FORMATS for secret in fmt.secrets[:1] if len(secret) >= 10]
    async with connect(server, "legacy") as client:
        for fmt, probe in probes:
            found = await client.call_tool(
                "search_incident_log", {"incidentId": "INC-CORPUS", "pattern": re.escape(probe), "limit": 5}
            )
            assert found.structured_content["matches"] == [], fmt.name


async def test_a_line_cut_shows_no_part_of_a_secret(make_server: Callable[..., MCPServer], corpus_root: Path) -> None:
    server = make_server(data_dir=corpus_root, log_window_lines=100_000, log_window_bytes=64 * 1024 * 1024)
    async with connect(server, "legacy") as client:
        pages = await _all_pages(client, "INC-CUT")
        search, _ = await _all_matches(client, "INC-CUT", "lorem")
        window = text_of(await client.read_resource("incident://INC-CUT/log"))
    assert pages.count("[line cut]") >= len(SINGLE_LINE)
    for where, text in (("pages", pages), ("search", search), ("resource", window)):
        _check(text, where, SINGLE_LINE)


async def test_the_window_edge_shows_no_part_of_a_secret(
    make_server: Callable[..., MCPServer], corpus_root: Path, era: str
) -> None:
    server = make_server(data_dir=corpus_root, log_window_bytes=WINDOW_BYTES)
    model = ScriptedModel()
    edges = _edge_logs()
    async with connect(server, era, sampling_callback=model) as client:
        for incident_id in edges:
            number = int(incident_id.split("-")[1])
            for where, text in (await _window_paths(client, incident_id, model)).items():
                _check(text, f"{where} of {incident_id}", [FORMATS[number]])
    # The edge really fell where it was meant to: inside a key body, or on a cut line.
    window = text_of(await _read(server, next(i for i in edges if "-bare" in i)))
    assert "[incident-desk: showing the last" in window and "-----BEGIN" not in window


async def _read(server: MCPServer, incident_id: str) -> Any:
    async with connect(server, "legacy") as client:
        return await client.read_resource(f"incident://{incident_id}/log")


async def test_ordinary_lines_come_back_unchanged_on_every_path(
    make_server: Callable[..., MCPServer], tmp_path: Path
) -> None:
    root = tmp_path / "desk"
    log = "\n".join(ORDINARY_LINES) + "\n"
    _incident(root, "INC-PLAIN", log)
    (root / "runbooks").mkdir()
    server = make_server(data_dir=root)
    async with connect(server, "legacy") as client:
        resource = text_of(await client.read_resource("incident://INC-PLAIN/log"))
        page = await client.call_tool("read_incident_log", {"incidentId": "INC-PLAIN", "limit": 5000})
        found = await client.call_tool(
            "search_incident_log", {"incidentId": "INC-PLAIN", "pattern": ".", "limit": 1000}
        )
    assert resource == log
    assert [line["text"] for line in page.structured_content["lines"]] == list(ORDINARY_LINES)
    assert [line["text"] for line in found.structured_content["matches"]] == list(ORDINARY_LINES)


async def test_a_value_on_the_line_after_its_name_is_masked_across_page_and_window_edges(
    make_server: Callable[..., MCPServer], tmp_path: Path, era: str
) -> None:
    """The name ends one page and the value starts the next; the window starts at the value, or inside
    the name's line; a search shows the value's line alone. None of them shows the value."""
    root = tmp_path / "desk"
    pad = "2024-05-01T10:00:09Z INFO padding " + "p" * (WINDOW_BYTES - 40)
    for number, fmt in enumerate(NEXT_LINE_FORMATS):
        name_line, value_line = fmt.lines
        page_log = "\n".join(["ok one", "ok two", name_line, value_line, "done"]) + "\n"
        _incident(root, f"NEXT-PAGE-{number}", page_log)
        tail = value_line + "\n" + pad[: WINDOW_BYTES - len(value_line) - 2] + "\n"
        assert len(tail.encode()) == WINDOW_BYTES
        _incident(root, f"NEXT-CLEAN-{number}", "\n".join(ORDINARY_LINES[:5]) + "\n" + name_line + "\n" + tail)
        _incident(root, f"NEXT-PARTIAL-{number}", "\n".join(ORDINARY_LINES[:5]) + "\n" + name_line + "\n" + tail[3:])
    (root / "runbooks").mkdir()
    server = make_server(data_dir=root, log_window_bytes=WINDOW_BYTES)
    async with connect(server, era) as client:
        for number, fmt in enumerate(NEXT_LINE_FORMATS):
            incident = f"NEXT-PAGE-{number}"
            first = await client.call_tool("read_incident_log", {"incidentId": incident, "limit": 3})
            cursor = first.structured_content["next_cursor"]
            second = await client.call_tool("read_incident_log", {"incidentId": incident, "limit": 3, "cursor": cursor})
            assert second.structured_content["lines"][0]["number"] == 4  # the line of the value
            found, _count = await _all_matches(client, incident, ".")
            probe = await client.call_tool(
                "search_incident_log", {"incidentId": incident, "pattern": re.escape(fmt.secrets[0][:10])}
            )
            assert probe.structured_content["matches"] == [], fmt.name
            shown = {"page after the name": text_of(second), "search": found}
            for edge in ("CLEAN", "PARTIAL"):
                window = text_of(await client.read_resource(f"incident://NEXT-{edge}-{number}/log"))
                assert fmt.lines[0] not in window or edge == "PARTIAL", "the window was meant to start after the name"
                shown[f"window starting {edge.lower()}"] = window
            for where, text in shown.items():
                assert MASK in text, (fmt.name, where)
                _check(text, f"{where} of {fmt.name}", [fmt])


def _first_error_log(fmt: Format) -> str:
    """A log whose first error line holds the format (its first line; a block's other lines follow it)."""
    first, *rest = fmt.lines
    return (
        "\n".join(["2026-11-29T10:00:00Z payments-api INFO ok", f"2026-11-29T10:00:01Z payments-api ERROR {first}"])
        + ("\n" + "\n".join(rest) if rest else "")
        + "\n"
    )


async def test_the_timeline_first_error_masks_the_corpus(
    make_server: Callable[..., MCPServer], tmp_path: Path, era: str
) -> None:
    """The timeline shows the first error line's text; a secret on it is masked like everywhere."""
    root = tmp_path / "desk"
    for number, fmt in enumerate(FORMATS):
        _incident(root, f"TL-{number}", _first_error_log(fmt))
    (root / "runbooks").mkdir()
    server = make_server(data_dir=root)
    async with connect(server, era) as client:
        for number, fmt in enumerate(FORMATS):
            result = await client.call_tool("show_incident_timeline", {"incidentId": f"TL-{number}"})
            text = text_of(result) if not result.structured_content else json.dumps(result.structured_content)
            assert "first error" in text_of(result), fmt.name
            if not fmt.multiline:
                assert MASK in text_of(result), fmt.name
            _check(text + text_of(result), f"timeline of {fmt.name}", [fmt])


async def test_restart_output_and_the_journal_mask_the_corpus(make_app: AppFactory, tmp_path: Path, era: str) -> None:
    """A restart command that prints every format (in every shape) shows none of them, in the result
    or in the journal. The formats are printed in chunks, one service each, to stay within the output limit."""
    printer = tmp_path / "print_file.py"
    printer.write_text("import sys\nsys.stdout.write(open(sys.argv[1], encoding='utf-8').read())\n")
    chunks = [FORMATS[index : index + 30] for index in range(0, len(FORMATS), 30)]
    services: dict[str, Any] = {}
    for number, chunk in enumerate(chunks):
        lines = [line for fmt in chunk for _shape, shaped in shaped_lines(fmt) for line in shaped]
        (tmp_path / f"chunk-{number}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        services[f"svc-{number}"] = {
            "kind": "command",
            "argv": [sys.executable, str(printer), str(tmp_path / f"chunk-{number}.txt")],
        }
    app, server = desk(make_app, services=services)
    async with connect(server, era, elicitation_callback=approve()) as client:
        for number, chunk in enumerate(chunks):
            result = await client.call_tool("restart_service", {"service": f"svc-{number}"})
            assert result.structured_content is not None and result.structured_content["executed"] is True
            shown = text_of(result) + json.dumps(result.structured_content)
            assert MASK in shown
            _check(shown, f"restart output of chunk {number}", chunk)
    journal = json.dumps([decision.detail for decision in rows(app.journal)])
    _check(journal, "the journal", FORMATS)
