"""``write_config``: a plain parser checks the file and computes the intended result, a comment-keeping editor
makes the change (tomlkit, ruamel round trip, a span editor for JSONC), and the result is read back to compare."""

from __future__ import annotations

import copy
import itertools
import json
import re
import tomllib
from collections.abc import Callable, Mapping, MutableMapping, MutableSequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import tomlkit
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.util import load_yaml_guess_indent
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Comment, Table, Whitespace

from incident_desk import safe_write
from incident_desk.client_configs import registry, render
from incident_desk.client_configs.registry import SERVER_NAME, ClientConfigError, ClientSpec, Launcher


@dataclass(frozen=True)
class WriteReport:
    """What ``write_config`` did: the file, its backup (None: new or unchanged), whether an entry was replaced."""

    path: Path
    backup: Path | None
    replaced: bool
    changed: bool = True  # False: the file already held exactly this entry and was not touched


class _ParseError(Exception):
    """The file is broken; the message says what and, when known, where."""

    def __init__(self, message: str, text: str = "", pos: int = 0) -> None:
        line, column = text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)
        super().__init__(f"{message} (line {line}, column {column})" if text else message)


class _Unsupported(Exception):
    """Valid, but written in a form that is not edited automatically."""


def _put_entry(
    spec: ClientSpec,
    doc: Any,
    entry: Any,
    keep_tail: Callable[[Any, Any], None] = lambda *_: None,
    name: str = SERVER_NAME,
) -> bool:
    """Add or replace the entry ``name`` in plain, tomlkit or ruamel containers (True: replaced); ``keep_tail(block,
    entry)`` moves the comments ending the block the entry now follows (or replaces) onto the entry."""
    key = spec.server_key
    servers = doc.get(key)
    if servers is None:
        servers = doc[key] = [] if spec.layout == "continue" else {}
    if spec.layout == "continue":
        if not isinstance(servers, MutableSequence):
            raise _ParseError(f"{key!r} is not a list")
        ours = [i for i, item in enumerate(servers) if isinstance(item, Mapping) and item.get("name") == name]
        index = ours[0] if ours else len(servers)
        keep_tail(servers[index] if ours else servers, entry)
        servers[index : index + 1] = [entry]
        return bool(ours)
    if not isinstance(servers, MutableMapping):
        raise _ParseError(f"{key!r} is not {dict(json='an object', toml='a table').get(spec.format, 'a mapping')}")
    replaced = name in servers
    keep_tail(servers[name] if replaced else servers, entry)
    servers[name] = entry
    return replaced


# A string (skipped whole), or what JSONC adds to JSON: a comment, an unclosed comment, a trailing comma.
_JSONC_EXTRA = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|(//[^\n]*|/\*.*?\*/|/\*|,(?=(?:\s|//[^\n]*|/\*.*?\*/)*[}\]]))', re.DOTALL
)


def _scan_jsonc(text: str) -> tuple[str, int | None]:
    """``text`` with comments and trailing commas blanked (same offsets), and where the first was (None: none)."""
    blank, extras = list(text), []
    for token in _JSONC_EXTRA.finditer(text):
        if token[1] == "/*":
            raise _ParseError("not valid JSON: unterminated /* comment", text, token.start())
        if token[1]:
            blank[token.start() : token.end()] = re.sub(r"[^\n]", " ", token[1])
            extras.append(token.start())
    return "".join(blank), min(extras, default=None)


def _member(blank: str, opener: int, wanted: str) -> tuple[int, int, int] | None:
    """(start, value start, value end) of the member ``wanted`` of the object at ``opener``, if it has one."""
    decode, pos = json.JSONDecoder().raw_decode, _skip_space(blank, opener + 1)
    while blank[pos] != "}":
        start, (key, pos) = pos, decode(blank, pos)
        pos = _skip_space(blank, _skip_space(blank, pos) + 1)  # past the ':'
        value_end = decode(blank, pos)[1]
        if key == wanted:
            return start, pos, value_end
        pos = _skip_space(blank, value_end)
        pos = _skip_space(blank, pos + 1) if blank[pos] == "," else pos
    return None


def _skip_space(blank: str, pos: int) -> int:
    return len(blank) - len(blank[pos:].lstrip())


def _line_indent(text: str, pos: int) -> str:
    line = text[text.rfind("\n", 0, pos) + 1 : pos]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _dump_at(value: Any, indent: str, unit: str) -> str:
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _jsonc_insert(text: str, blank: str, opener: int, key: str | None, value: Any, unit: str) -> str:
    """Add ``key: value`` (or an item) after the last child of the container at ``opener``, at its indentation."""
    closer = json.JSONDecoder().raw_decode(blank, opener)[1] - 1
    last = len(blank[:closer].rstrip())  # just past the last child (a trailing comma stays after ours), or the opener
    indent = _line_indent(text, opener) + unit
    child = ("" if key is None else json.dumps(key, ensure_ascii=False) + ": ") + _dump_at(value, indent, unit)
    if blank[last - 1] in "{[":  # empty: open it up, keeping any comment inside
        after = text[last:closer] if text[last:closer].strip() else "\n" + _line_indent(text, opener)
        return text[:last] + "\n" + indent + child + after + text[closer:]
    return text[:last] + ",\n" + indent + child + text[last:]


def _jsonc_put(text: str, path: tuple[str, ...], value: Any, unit: str, append: bool = False, at: int = -1) -> str:
    """Set ``path`` to ``value`` (or append ``value`` to the array there), editing only that member's text."""
    blank = _scan_jsonc(text)[0]
    opener = _skip_space(blank, 0) if at < 0 else at
    nested = [value] if append else value
    for inner in reversed(path[1:]):
        nested = {inner: nested}
    member = _member(blank, opener, path[0])
    if member is None:
        return _jsonc_insert(text, blank, opener, path[0], nested, unit)
    start, value_start, value_end = member
    if len(path) > 1 and blank[value_start] == "{":
        return _jsonc_put(text, path[1:], value, unit, append, value_start)
    if append and blank[value_start] == "[":
        return _jsonc_insert(text, blank, value_start, None, value, unit)
    return text[:value_start] + _dump_at(nested, _line_indent(text, start), unit) + text[value_end:]


def _edit_json(spec: ClientSpec, text: str, entry: dict[str, Any], expected: Any, add_input: bool, name: str) -> str:
    indented = re.search(r"(?m)^([ \t]+)\S", _scan_jsonc(text)[0])  # the first level's step, comments blanked
    unit = indented[1] if indented else "  "
    if not spec.comments_allowed:
        return json.dumps(expected, indent=unit, ensure_ascii=False) + "\n"
    text = _jsonc_put(text, (spec.server_key, name), entry, unit)
    return _jsonc_put(text, ("inputs",), render.vscode_input(), unit, append=True) if add_input else text


def _carry_toml_tail(block: Any, table: Table) -> None:
    """The blank lines and comments ending ``block`` introduce what follows it: move them after ``table``."""
    while isinstance(block, Table) and block.value.body and isinstance(block.value.body[-1][1], Table):
        block = block.value.body[-1][1]  # a table's last lines belong to its last sub-table
    body = block.value.body if isinstance(block, Table) else []
    tail = list(itertools.takewhile(lambda pair: isinstance(pair[1], Whitespace | Comment), reversed(body)))
    for _, item in reversed(tail):
        table.value.append(None, item)
    del body[len(body) - len(tail) :]


def _edit_toml(spec: ClientSpec, text: str, entry: dict[str, Any], expected: Any, add_input: bool, name: str) -> str:
    doc = tomlkit.parse(text)
    doc.setdefault(spec.server_key, tomlkit.table(is_super_table=True))
    _put_entry(spec, doc, render.toml_entry(entry), _carry_toml_tail, name)
    return doc.as_string()


def _carry_yaml_tail(block: Any, entry: Any) -> None:
    """Comment lines after ``block``'s last line introduce what follows it: move them to the end of ``entry``."""
    ends: list[tuple[Any, Any, int] | None] = []
    for node in (block, entry):  # ruamel keeps the lines after a block node on its deepest last key or item
        end = None
        while isinstance(node, CommentedMap | CommentedSeq) and node and not node.fa.flow_style():
            last = next(reversed(node)) if isinstance(node, CommentedMap) else len(node) - 1
            end, node = (node.ca.items, last, 2 if isinstance(node, CommentedMap) else 0), node[last]
        ends.append(end)
    source, target = ends
    token = source[0].get(source[1], [None] * 4)[source[2]] if source else None
    own_line, _, following = token.value.partition("\n") if token else ("", "", "")
    if token and target and following:  # the last line's own comment stays on it
        moved = copy.copy(token)
        moved.value, token.value = "\n" + following, own_line + "\n"
        target[0].setdefault(target[1], [None] * 4)[target[2]] = moved


def _edit_yaml(spec: ClientSpec, text: str, entry: dict[str, Any], expected: Any, add_input: bool, name: str) -> str:
    editor = render.yaml_editor()
    editor.preserve_quotes, editor.explicit_start = True, text.startswith("---")
    if any(getattr(event, "anchor", None) for event in editor.parse(text)):
        raise _Unsupported("anchors or aliases (& or *): one edit could change every place that shares it")
    doc, sequence_indent, dash_offset = load_yaml_guess_indent(text, yaml=editor)
    if dash_offset is not None and sequence_indent and sequence_indent - dash_offset >= 2:  # keep the file's lists
        editor.indent(mapping=sequence_indent - dash_offset, sequence=sequence_indent, offset=dash_offset)
    if doc.get(spec.server_key) in (None, {}, []):  # a new block collection, not a flow `{}` or `[]`
        doc[spec.server_key] = CommentedSeq() if spec.layout == "continue" else CommentedMap()
    _put_entry(spec, doc, render.yaml_styled(entry), _carry_yaml_tail, name)
    return render.dump_yaml(editor, doc)


_YAML_HINTS = {"'\\t'": "YAML indents with spaces, not tabs", "<block end>": "check the indentation"}


def _parse(spec: ClientSpec, text: str) -> Any:
    """``text`` as plain data, read by a parser other than the editor's: it checks the file and the result."""
    try:
        if spec.format == "toml":
            return tomllib.loads(text)
        if spec.format == "yaml":
            return YAML(typ="safe", pure=True).load(text)
    except tomllib.TOMLDecodeError as exc:
        raise _ParseError(f"not valid TOML: {exc}") from None
    except YAMLError as exc:
        parts, mark = [getattr(exc, "context", None), getattr(exc, "problem", None)], getattr(exc, "problem_mark", None)
        problem = ", ".join(str(part) for part in parts if part) or str(exc)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        hints = "".join(f"; {hint}" for marker, hint in _YAML_HINTS.items() if marker in problem)
        raise _ParseError(f"not valid YAML: {problem}{where}{hints}") from None
    blank, jsonc_at = _scan_jsonc(text)
    if jsonc_at is not None and not spec.comments_allowed:
        problem = f"{spec.title} reads strict JSON, so comments and trailing commas break it"
        raise _ParseError(f"not valid JSON: {problem}", text, jsonc_at)
    try:
        return json.loads(blank) if blank.strip() else None
    except json.JSONDecodeError as exc:
        problem = exc.msg if blank[exc.pos :].strip() else "unterminated object or array"  # it hit the end
        raise _ParseError(f"not valid JSON: {problem}", text, exc.pos) from None


def _merge(spec: ClientSpec, text: str, entry: dict[str, Any], name: str = SERVER_NAME) -> tuple[str, bool]:
    """The new text and whether an entry was replaced; ``text`` itself when nothing would change."""
    before = _parse(spec, text)
    if before is None:  # empty, or only comments
        fresh = render.render_document(spec, render.document(spec, entry, name))
        return (text.rstrip() + "\n" if text.strip() else "") + fresh, False
    if not isinstance(before, dict):
        raise _ParseError(f"the top level is not {'a JSON object' if spec.format == 'json' else 'a YAML mapping'}")
    expected = copy.deepcopy(before)
    replaced = _put_entry(spec, expected, entry, name=name)
    add_input = spec.name == "vscode" and "headers" in entry  # its token header reads this input
    if add_input:
        inputs = expected.setdefault("inputs", [])
        if not isinstance(inputs, list):
            raise _ParseError("'inputs' is not an array")
        add_input = not any(isinstance(item, dict) and item.get("id") == registry.VSCODE_TOKEN_INPUT for item in inputs)
        if add_input:
            inputs.append(render.vscode_input())
    if expected == before:
        return text, replaced
    edit = {"json": _edit_json, "toml": _edit_toml, "yaml": _edit_yaml}[spec.format]
    try:
        new_text = edit(spec, text, entry, expected, add_input, name)
        after = _parse(spec, new_text)
    except (ValueError, TOMLKitError, YAMLError, _ParseError) as exc:  # e.g. tomlkit refuses to edit an inline table
        raise _Unsupported(f"the edit does not apply cleanly: {exc}") from None
    if after != expected:
        raise _Unsupported("the edited text does not read back as intended")
    return new_text, replaced


def _replace_file(path: Path, data: bytes, original: bytes | None) -> Path | None:
    """Back ``original`` up as ``<file>.bak-<timestamp>`` (returned), then replace the file atomically, same mode.

    The backup's name is predictable, so it is created exclusively (a link planted at that name is skipped, never
    written through) and the file is replaced through a fresh temporary file renamed over it (see ``safe_write``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    backup, mode = None, 0o600
    if original is not None:
        mode, stamp = path.stat().st_mode & 0o7777, datetime.now().strftime("%Y%m%d-%H%M%S")
        for number in itertools.count():
            name = f"{path.name}.bak-{stamp}" + (f"-{number}" if number else "")
            try:
                safe_write.create_exclusive(path.parent, name, original, mode)
            except FileExistsError:
                continue
            backup = path.with_name(name)
            break
    safe_write.replace_file(path.parent, path.name, data, mode)
    return backup


def write_config(
    client: str,
    launcher: Launcher | None = None,
    *,
    path: Path | None = None,
    http_url: str | None = None,
    env: Mapping[str, str] | None = None,
    token: bool = False,
    name: str = SERVER_NAME,
) -> WriteReport:
    """Merge the entry into ``client``'s config file (default: ``default_config_path``), backing it up first; a
    broken or unusual file is left untouched and ``ClientConfigError`` names it, the problem and the snippet."""
    spec = registry.client_spec(client)
    entry = render.entry_for(spec, launcher, http_url, env or {}, token, name)
    target = (path or registry.default_config_path(client)).expanduser()
    if target.is_symlink():
        target = target.resolve()  # keep a dotfile manager's link; write where it points
    try:
        original = target.read_bytes() if target.exists() else None
        decoded = (original or b"").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientConfigError(f"{target}: not UTF-8 text ({exc}); left untouched") from None
    except OSError as exc:
        raise ClientConfigError(f"{target}: cannot be read: {exc}") from None
    bom, crlf = "\ufeff" if decoded.startswith("\ufeff") else "", "\r\n" in decoded
    try:
        new_text, replaced = _merge(spec, decoded[len(bom) :].replace("\r\n", "\n"), entry, name)
    except _ParseError as exc:
        raise ClientConfigError(f"{target}: {exc}; the file was left untouched") from None
    except _Unsupported as exc:
        snippet = render.render_snippet(client, launcher, http_url=http_url, env=env, token=token, name=name)
        raise ClientConfigError(
            f"{target}: cannot be edited safely ({exc}); the file was left untouched. Add this by hand:\n{snippet}"
        ) from None
    data = (bom + (new_text.replace("\n", "\r\n") if crlf else new_text)).encode("utf-8")
    if data == original:
        return WriteReport(target, None, replaced, changed=False)
    try:
        return WriteReport(target, _replace_file(target, data, original), replaced)
    except safe_write.UnsafeTarget as exc:
        raise ClientConfigError(f"{exc}; the file was left untouched") from None
    except OSError as exc:
        raise ClientConfigError(f"{target}: cannot be written: {exc}") from None
