"""The desk's own skill, ``incident-triage``, served to every client and not only to plugin users.

A client that speaks the Skills extension (``io.modelcontextprotocol/skills``, SEP-2640) finds it with
``skills/list`` or ``skills/get``: its frontmatter and a manifest with the SHA-256 digest and size of each file.
Every client, with or without the extension, reads the same bytes as the ordinary resource
``skill://incident-triage/SKILL.md`` (text/markdown), which ``resources/list`` shows. The SDK has no Skills
support, so this is its generic extension mechanism (SEP-2133) carrying the two methods and the resource; the
server factory also has the 2025-11-25 handshake declare it (``eras.DeclareOnTheHandshake``).

The package data (``data/skills/``) is what the desk serves; the plugin's ``skills/`` folder at the repository
root is a copy that ``tests/test_skills.py`` keeps byte-equal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ResourceBinding
from mcp.server.mcpserver.resources import TextResource
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, PaginatedRequestParams, RequestParams

from incident_desk.protocol.eras import ROUND_TRIP_ERAS

EXTENSION_ID = "io.modelcontextprotocol/skills"
SKILL_NAMES = ("incident-triage",)  # directories under data/skills, each holding one SKILL.md
# The skills change only with the package, and every caller sees the same ones.
CACHE_HINT = {"ttlMs": 300_000, "cacheScope": "public"}
# Plain scalars that YAML would read as something other than the string written (booleans, nulls).
_NOT_STRINGS = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"})
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`+.0123456789")


@dataclass(frozen=True)
class Skill:
    name: str
    uri: str
    text: str
    frontmatter: dict[str, str]
    digest: str
    size: int

    def entry(self) -> dict[str, Any]:
        """The SEP-2640 ``Skill`` entry: one file, so the manifest lists the SKILL.md alone."""
        manifest = [{"uri": self.uri, "digest": self.digest, "size": self.size}]
        return {"uri": self.uri, "frontmatter": dict(self.frontmatter), "resources": manifest}


def load(name: str) -> Skill:
    """The packaged skill ``name``: served, hashed and sized from the same bytes, so the digest always holds."""
    raw = (resources.files("incident_desk") / "data" / "skills" / name / "SKILL.md").read_bytes()
    text = raw.decode("utf-8")
    fields = frontmatter(text)
    if fields.get("name") != name or not fields.get("description"):
        raise ValueError(f"skills/{name}/SKILL.md must declare name: {name} and a description")
    return Skill(
        name=name,
        uri=f"skill://{name}/SKILL.md",
        text=text,
        frontmatter=fields,
        digest="sha256:" + hashlib.sha256(raw).hexdigest(),
        size=len(raw),
    )


def frontmatter(text: str) -> dict[str, str]:
    """The YAML frontmatter of a SKILL.md, when it is flat ``key: plain string`` lines, which is all the desk's
    skills use. Anything else is refused rather than guessed: a full YAML parser would cost the stdio start its
    import (docs/performance.md), and the listing must match what a client's parser reads in the file."""
    lines = text.split("\n")
    if lines[0] != "---" or "---" not in lines[1:]:
        raise ValueError("SKILL.md does not begin with a --- frontmatter block")
    fields: dict[str, str] = {}
    for line in lines[1 : lines.index("---", 1)]:
        key, colon, value = line.partition(": ")
        if not colon or not key.replace("-", "").replace("_", "").isalnum() or key in fields:
            raise ValueError(f"SKILL.md frontmatter line is not a new flat key: {line!r}")
        if not _plain_string(value):
            raise ValueError(f"SKILL.md frontmatter value is not a plain YAML string: {line!r}")
        fields[key] = value
    return fields


def _plain_string(value: str) -> bool:
    return (
        value != ""
        and value == value.strip()
        and value[0] not in _INDICATORS
        and value.lower() not in _NOT_STRINGS
        and ": " not in value
        and " #" not in value
        and not value.endswith(":")
    )


class GetSkillParams(RequestParams):
    uri: str


class SkillsExtension(Extension):
    """``skills/list`` and ``skills/get`` over the packaged skills, and each SKILL.md as a listed resource."""

    identifier = EXTENSION_ID

    def __init__(self, skills: Sequence[Skill]) -> None:
        self._skills = {skill.uri: skill for skill in skills}

    def resources(self) -> Sequence[ResourceBinding]:
        return [
            ResourceBinding(
                TextResource(
                    uri=skill.uri,
                    name=skill.name,
                    title="Incident triage skill",
                    description=skill.frontmatter["description"],
                    mime_type="text/markdown",
                    text=skill.text,
                )
            )
            for skill in self._skills.values()
        ]

    def methods(self) -> Sequence[MethodBinding]:
        return [
            MethodBinding("skills/list", PaginatedRequestParams, self._list),
            MethodBinding("skills/get", GetSkillParams, self._get),
        ]

    async def _list(self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> HandlerResult:
        if params.cursor is not None:
            raise MCPError(INVALID_PARAMS, "skills/list has one page: no cursor was given out")
        return _cacheable(ctx, {"skills": [skill.entry() for skill in self._skills.values()]})

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: GetSkillParams) -> HandlerResult:
        skill = self._skills.get(params.uri)
        if skill is None:
            raise MCPError(INVALID_PARAMS, f"No skill is served at {params.uri}")
        return _cacheable(ctx, {"skill": skill.entry()})


def _cacheable(ctx: ServerRequestContext[Any, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The freshness hints SEP-2640 requires, in the revision that has them (2026-07-28's CacheableResult)."""
    return {**result, **CACHE_HINT} if ctx.protocol_version in ROUND_TRIP_ERAS else result


def extension() -> SkillsExtension:
    """The Skills extension over the packaged skills, for ``MCPServer(extensions=[...])``."""
    return SkillsExtension([load(name) for name in SKILL_NAMES])
