"""What ``tools/list`` says of each tool: its schemas lean, because every conversation pays for them in tokens.

pydantic writes schemas for people reading them: a title on every field, ``default: null`` on every optional one,
``anyOf`` for every nullable value. A client needs less to call a tool and to check its answer:

- the input schema keeps every keyword that decides which arguments are valid, every description the model reads
  to choose them and every default; it drops the titles and the ``default: null`` no client can act on, and says
  "a string or null" as ``"type": ["string", "null"]`` rather than with an ``anyOf``;
- the output schema keeps the answer's fields, their types (a nullable one as a list of types) and formats (and,
  for records, which are always there), and drops the prose: what each field means is in docs/tools.md, generated
  from the same models, so no description is repeated in every conversation. A list of records is said to be a list, a
  nested record to be an object; their fields are in docs/tools.md too;
- a text answer (``Answer.TEXT``) declares no output schema at all: the text is the whole answer (its structured
  content is still sent, for the programs that read it);
- a page of records (``Answer.RECORDS``, a log page) names the fields of its records too.

``tests/test_tools_list_size.py`` holds the whole list under ``TOOLS_LIST_BOUND`` and checks that the lean input
schemas accept and refuse the same arguments as the full ones.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, WithJsonSchema

# The most tools/list may weigh, in bytes of compact JSON with the default settings: what every conversation pays.
TOOLS_LIST_BOUND = 10 * 1024

# Keywords whose value maps names to schemas, not a keyword to its value.
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
# Keywords that only describe: no validator reads them.
_PROSE = ("title", "description", "examples")


class Answer(StrEnum):
    """What a tool's answer is, for its output schema."""

    RECORDS = "records"  # pages of records a program reads: every field of every record, with its type
    FIELDS = "fields"  # data a program may read: the schema names its top-level fields and their types
    TEXT = "text"  # the text is the answer: no output schema


def lean_description(text: str | None) -> str | None:
    """A docstring as one line: its indentation and line breaks cost tokens and say nothing."""
    return None if text is None else " ".join(text.split())


def lean_input_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema with the titles and ``default: null`` gone and each nullable argument's ``anyOf`` as a
    list of types: it accepts and refuses exactly what it did."""
    lean: dict[str, Any] = _without(schema, prose=("title",))
    if "properties" in lean:
        lean["properties"] = {name: _merged_nullable(field) for name, field in lean["properties"].items()}
    return lean


def lean_output_schema(schema: Mapping[str, Any], answer: Answer) -> dict[str, Any] | None:
    """What ``answer`` says of the model's ``schema``: nothing, its top-level fields and their types, or its
    records too, each field with its type, format and whether it is required; no prose."""
    if answer is Answer.TEXT:
        return None
    shaped = _without(schema, prose=_PROSE)
    fields = {
        name: _merged_nullable(field) if answer is Answer.RECORDS else _field_shape(field)
        for name, field in shaped.get("properties", {}).items()
    }
    lean: dict[str, Any] = {"type": "object", "properties": fields}
    if answer is Answer.RECORDS and shaped.get("required"):
        lean["required"] = shaped["required"]
    return lean


def _field_shape(field: dict[str, Any]) -> dict[str, Any]:
    """One field: a nullable ``anyOf`` becomes a list of types; a nested record, or a list of them, is said by
    its type alone."""
    field = _merged_nullable(field)
    if "properties" in field or field.get("additionalProperties") not in (None, False, True):
        field = {key: value for key, value in field.items() if key not in ("properties", "required")}
        field.pop("additionalProperties", None)
    items = field.get("items")
    if isinstance(items, dict) and "properties" in items:
        del field["items"]
    return field


def _merged_nullable(field: dict[str, Any]) -> dict[str, Any]:
    """``{"anyOf": [S, {"type": "null"}]}`` as S with ``null`` among its types: the same values, fewer bytes."""
    options = field.get("anyOf")
    if not isinstance(options, list) or len(options) != 2 or {"type": "null"} not in options:
        return field
    (kept,) = [option for option in options if option != {"type": "null"}]
    if not isinstance(kept.get("type"), str) or "anyOf" in kept:
        return field
    merged = {key: value for key, value in field.items() if key != "anyOf"}
    merged.update(kept)
    merged["type"] = [kept["type"], "null"]
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    return merged


def _without(schema: Any, *, prose: tuple[str, ...]) -> Any:
    """A copy of ``schema`` without the ``prose`` keywords and ``default: null``, at every depth."""
    if isinstance(schema, list):
        return [_without(item, prose=prose) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key in prose or (key == "default" and value is None):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            kept[key] = {name: _without(sub, prose=prose) for name, sub in value.items()}
        else:
            kept[key] = _without(value, prose=prose)
    return kept


def compact_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON, as a client receives it (UTF-8, no spaces)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def tools_list_weight(listing: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Each listed tool's bytes in a ``tools/list`` result dumped for the wire: its whole entry (``tool``) and
    the parts a client pays for (``description``, ``inputSchema``, ``outputSchema``, ``annotations``)."""
    parts = ("description", "inputSchema", "outputSchema", "annotations")
    return {
        tool["name"]: {"tool": compact_size(tool)}
        | {part: compact_size(tool[part]) if part in tool else 0 for part in parts}
        for tool in listing["tools"]
    }


def written_out(model: type[BaseModel]) -> WithJsonSchema:
    """A nested model's JSON schema written out where it is used, in place of a ``$ref`` into ``$defs``.

    Clients in Python validate structured content with ``jsonschema``, which resolves a ``$ref`` again for every
    item of a list: written out, a log page validates in about half the time (docs/performance.md), and the
    longer the page the more it saves. Only for models with no nested models of their own.
    """
    schema = model.model_json_schema()
    if "$defs" in schema:
        raise ValueError(f"{model.__name__} nests other models: its schema cannot be written out without $defs")
    return WithJsonSchema(schema)
