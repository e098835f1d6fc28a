"""The ``incident-triage`` skill served by the desk (Skills extension, SEP-2640), through a real client in both
eras, the resource every client reads, and MCP Inspector's own conformance and digest checks."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import Request
from pydantic import BaseModel, ConfigDict

from incident_desk.features import skills
from tests.helpers import ROOT, child_env, text_of
from tests.npm_tools import INSPECTOR, node_22, npm_tool

URI = "skill://incident-triage/SKILL.md"
PACKAGED = resources.files("incident_desk") / "data" / "skills" / "incident-triage" / "SKILL.md"
PLUGIN_SKILLS = ROOT / "skills"


class Wire(BaseModel):
    """A result kept as the server sent it."""

    model_config = ConfigDict(extra="allow")


def _mode(era: str) -> str:
    """``auto`` reaches 2026-07-28 in-process through ``server/discover``, so the server's own declaration is
    seen; a pinned 2026 mode would make the client synthesize it."""
    return "auto" if era == "2026-07-28" else era


class SkillsRequest(Request[dict[str, Any], str]):
    """A request of a method the SDK does not know, its params sent as given."""


async def _ask(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return (await client.session.send_request(SkillsRequest(method=method, params=params), Wire)).model_dump()


def _expected_entry() -> dict[str, Any]:
    """The entry as an independent reader sees the packaged file: PyYAML for the frontmatter, hashlib for bytes."""
    raw = PACKAGED.read_bytes()
    front = yaml.safe_load(raw.decode("utf-8").split("---\n")[1])
    manifest = [{"uri": URI, "digest": "sha256:" + hashlib.sha256(raw).hexdigest(), "size": len(raw)}]
    return {"uri": URI, "frontmatter": front, "resources": manifest}


@pytest.mark.anyio
async def test_the_desk_declares_the_skills_extension(make_server: Callable[..., MCPServer], era: str) -> None:
    async with Client(make_server(), mode=_mode(era)) as client:
        assert client.protocol_version == era.replace("legacy", "2025-11-25")
        declared = client.server_capabilities.extensions or {}
        assert client.server_capabilities.resources is not None  # SEP-2640: the extension needs resources
    assert declared[skills.EXTENSION_ID] == {}


@pytest.mark.anyio
async def test_skills_list_and_get_answer_the_packaged_skill(make_server: Callable[..., MCPServer], era: str) -> None:
    async with Client(make_server(), mode=_mode(era)) as client:
        listed = await _ask(client, "skills/list", {})
        got = await _ask(client, "skills/get", {"uri": URI})
        with pytest.raises(MCPError) as unknown:
            await _ask(client, "skills/get", {"uri": "skill://nope/SKILL.md"})
    assert listed["skills"] == [_expected_entry()]
    assert "nextCursor" not in listed
    assert got["skill"] == _expected_entry()
    assert unknown.value.code == -32602
    assert unknown.value.message == "No skill is served at skill://nope/SKILL.md"
    for result in (listed, got):
        if era == "legacy":
            assert "ttlMs" not in result and "resultType" not in result
        else:
            assert (result["ttlMs"], result["cacheScope"], result["resultType"]) == (300_000, "public", "complete")


@pytest.mark.anyio
async def test_every_client_reads_the_same_bytes_as_a_listed_resource(
    make_server: Callable[..., MCPServer], era: str
) -> None:
    async with Client(make_server(), mode=era) as client:
        listed = {resource.uri: resource for resource in (await client.list_resources()).resources}
        read = await client.read_resource(URI)
    resource = listed[URI]
    assert (resource.name, resource.mime_type) == ("incident-triage", "text/markdown")
    assert resource.description == _expected_entry()["frontmatter"]["description"]
    assert read.contents[0].mime_type == "text/markdown"
    served = text_of(read).encode("utf-8")
    assert served == PACKAGED.read_bytes()
    assert "sha256:" + hashlib.sha256(served).hexdigest() == _expected_entry()["resources"][0]["digest"]


def test_the_plugins_skill_folder_is_the_packaged_skills_byte_for_byte() -> None:
    """The package data is what the desk serves; the Claude plugin and the Gemini extension read ``skills/`` at the
    repository root. Edit one, copy it over the other."""
    packaged = resources.files("incident_desk") / "data" / "skills"
    names = sorted(entry.name for entry in packaged.iterdir() if entry.is_dir())
    assert names == sorted(path.name for path in PLUGIN_SKILLS.iterdir()) == sorted(skills.SKILL_NAMES)
    for name in names:
        shipped = (PLUGIN_SKILLS / name / "SKILL.md").read_bytes()
        assert shipped == (packaged / name / "SKILL.md").read_bytes(), f"skills/{name}/SKILL.md differs"


def test_the_frontmatter_reader_agrees_with_a_yaml_parser_and_refuses_what_it_cannot_read() -> None:
    text = PACKAGED.read_text(encoding="utf-8")
    assert skills.frontmatter(text) == yaml.safe_load(text.split("---\n")[1])
    for line in (
        "name: [a, b]",
        "name: 'quoted'",
        "enabled: true",
        "version: 1.0",
        "description: a: b",
        "description: trailing # comment",
        "  indented: x",
        "metadata:",
    ):
        with pytest.raises(ValueError, match="frontmatter"):
            skills.frontmatter(f"---\nname: x\n{line}\n---\nbody\n")
    with pytest.raises(ValueError, match="new flat key"):
        skills.frontmatter("---\nname: x\nname: y\n---\n")


def _inspector(*args: str, server: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("Inspector 2 needs node 22, which tests/npm_tools.py installs for Linux x64 only")
    inspector = npm_tool(INSPECTOR, "mcp-inspector")
    env = child_env(tmp_path / "audit.sqlite3", PATH=f"{node_22()}:/usr/local/bin:/usr/bin:/bin", HOME=str(tmp_path))
    return subprocess.run(
        [str(inspector), "--cli", *server, *args], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )


DESK = [sys.executable, "-m", "incident_desk"]
# The desk with the digest of its skill spoiled: what a tampered or stale manifest looks like to a host.
SPOILED_DESK = [
    sys.executable,
    "-c",
    "import dataclasses\n"
    "from incident_desk.features import skills\n"
    "load = skills.load\n"
    "skills.load = lambda name: dataclasses.replace(load(name), digest='sha256:' + '0' * 64)\n"
    "from incident_desk.cli.main import main\n"
    "raise SystemExit(main(['serve']))\n",
]


@pytest.mark.subprocess
@pytest.mark.parametrize("protocol_era", ["legacy", "modern"])
@pytest.mark.parametrize("method", ["skills/list", "skills/get"])
def test_mcp_inspector_verifies_the_served_skill(tmp_path: Path, protocol_era: str, method: str) -> None:
    chosen = ["--uri", URI] if method == "skills/get" else []
    verify = ["--method", method, *chosen, "--verify", "--require-digests"]
    done = _inspector("--protocol-era", protocol_era, *verify, server=DESK, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    (report,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert (report["uri"], report["outcome"], report["conformance"], report["frontmatter"]) == (
        URI,
        "verified",
        [],
        [],
    )
    assert [(file["uri"], file["status"]) for file in report["files"]] == [(URI, "verified")]


@pytest.mark.subprocess
def test_mcp_inspector_fails_a_desk_whose_digest_does_not_match(tmp_path: Path) -> None:
    done = _inspector(
        "--protocol-era", "modern", "--method", "skills/list", "--verify", server=SPOILED_DESK, tmp_path=tmp_path
    )
    assert done.returncode == 7, done.stdout + done.stderr[-2000:]
    assert '"status":"mismatch"' in done.stdout
