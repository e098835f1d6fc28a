"""The MCP surface (resources, templates, prompt, tools), through a real client in both protocol eras (the demo's
transcripts 02 and 03)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference, ResourceTemplateReference, TextContent

from incident_desk.features.prompts import SAVE_SENTENCE
from tests.helpers import SAMPLE_1043_LOG, connect, text_of

pytestmark = pytest.mark.anyio

EXPECTED_TOOLS = [
    "acknowledge_incident",
    "add_incident_note",
    "find_similar_incidents",
    "get_audit_log",
    "get_incident_activity",
    "get_runbook",
    "get_shift_handoff",
    "list_incidents",
    "list_service_actions",
    "query_incident_metrics",
    "read_incident_log",
    "resolve_incident",
    "restart_service",
    "run_service_action",
    "save_postmortem",
    "search_incident_log",
    "show_incident_timeline",
    "silence_incident",
    "summarize_incident",
    "unsilence_incident",
]


async def test_resources_and_templates_are_listed(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
    listed = sorted(f"resource {r.uri} name={r.name} mime={r.mime_type}" for r in resources)
    assert listed == [
        "resource audit://recent name=audit-recent mime=text/plain",
        "resource handoff://current name=shift-handoff mime=text/plain",
        "resource incident://index name=incident-index mime=text/plain",
        "resource skill://incident-triage/SKILL.md name=incident-triage mime=text/markdown",
        "resource ui://incident-desk/timeline name=incident-timeline mime=text/html;profile=mcp-app",
    ]
    assert sorted(f"template {t.uri_template} name={t.name}" for t in templates) == [
        "template incident://{id}/activity name=incident-activity",
        "template incident://{id}/log name=incident-log",
        "template postmortem://{id} name=postmortem",
        "template runbook://{service} name=runbook",
    ]


async def test_reads_reproduce_transcript_02(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        index = text_of(await client.read_resource("incident://index"))
        log = text_of(await client.read_resource("incident://INC-1043/log"))
        runbook = await client.read_resource("runbook://payments-api")
    assert index == "INC-1042\nINC-1043"
    assert log == SAMPLE_1043_LOG
    assert runbook.contents[0].mime_type == "text/markdown"
    assert text_of(runbook).startswith("# payments-api runbook")


async def test_unknown_incident_resource_is_a_clean_protocol_error(
    make_server: Callable[..., MCPServer], era: str
) -> None:
    async with connect(make_server(), era) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("incident://INC-9999/log")
        with pytest.raises(MCPError) as runbook_error:
            await client.read_resource("runbook://no-such-service")
    assert caught.value.code == -32602
    assert caught.value.message == "No such incident: INC-9999"
    assert caught.value.error.data == {"uri": "incident://INC-9999/log"}
    assert "Cause" not in caught.value.message
    assert runbook_error.value.message == "No such service: no-such-service"


async def test_a_known_service_without_a_runbook_says_the_runbook_is_missing(
    make_server: Callable[..., MCPServer], era: str, tmp_path: Path
) -> None:
    """inventory-sync has a restart entry but no runbooks/inventory-sync.md: not "No such service"."""
    root = tmp_path / "desk"
    (root / "runbooks").mkdir(parents=True)
    (root / "incidents").mkdir()
    server = make_server(data_dir=root, services={"inventory-sync": {"kind": "simulate"}})
    async with connect(server, era) as client:
        tool = await client.call_tool("get_runbook", {"service": "inventory-sync"})
        unknown = await client.call_tool("get_runbook", {"service": "no-such-service"})
        with pytest.raises(MCPError) as caught:
            await client.read_resource("runbook://inventory-sync")
    missing = "No runbook for inventory-sync (runbooks/inventory-sync.md is missing)"
    assert tool.is_error and text_of(tool) == missing
    assert caught.value.code == -32602 and caught.value.message == missing
    assert unknown.is_error and text_of(unknown) == "No such service: no-such-service"


async def test_postmortem_prompt_reproduces_transcript_03(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        prompts = {prompt.name: prompt for prompt in (await client.list_prompts()).prompts}
        prompt = prompts["postmortem"]
        got = await client.get_prompt("postmortem", {"incidentId": "INC-1043", "audience": "the on-call manager"})
        default = await client.get_prompt("postmortem", {"incidentId": "INC-1043"})
    assert prompt.name == "postmortem"
    assert prompt.description == "Draft a blameless postmortem for an incident"
    assert [(a.name, a.required) for a in prompt.arguments or []] == [("incidentId", True), ("audience", False)]
    (message,) = got.messages
    assert message.role == "user"
    assert isinstance(message.content, TextContent)
    assert message.content.text == (
        "Write a blameless postmortem for the on-call manager. Sections: impact, timeline, root cause, "
        "follow-ups. Use only the log below.\n\n" + SAMPLE_1043_LOG + "\n\n" + SAVE_SENTENCE.format(id="INC-1043")
    )
    default_content = default.messages[0].content
    assert isinstance(default_content, TextContent)
    assert default_content.text.startswith("Write a blameless postmortem for the engineering team. ")


async def test_postmortem_for_unknown_incident_keeps_its_message(
    make_server: Callable[..., MCPServer], era: str
) -> None:
    async with connect(make_server(), era) as client:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("postmortem", {"incidentId": "INC-9999"})
    assert caught.value.message == "No such incident: INC-9999"
    assert caught.value.code == -32602


async def test_completions_are_prefix_matches_sorted(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        prompt_ids = await client.complete(PromptReference(name="postmortem"), {"name": "incidentId", "value": "INC"})
        narrowed = await client.complete(
            PromptReference(name="postmortem"), {"name": "incidentId", "value": "INC-1043"}
        )
        log_ids = await client.complete(
            ResourceTemplateReference(uri="incident://{id}/log"), {"name": "id", "value": "INC-104"}
        )
        services = await client.complete(
            ResourceTemplateReference(uri="runbook://{service}"), {"name": "service", "value": "p"}
        )
        nothing = await client.complete(PromptReference(name="postmortem"), {"name": "incidentId", "value": "zzz"})
    assert prompt_ids.completion.values == ["INC-1042", "INC-1043"]
    assert narrowed.completion.values == ["INC-1043"]
    assert log_ids.completion.values == ["INC-1042", "INC-1043"]
    assert services.completion.values == ["payments-api"]
    assert nothing.completion.values == []


async def test_tools_are_listed_with_annotations(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert sorted(tools) == EXPECTED_TOOLS
    for name in (
        "list_incidents",
        "read_incident_log",
        "search_incident_log",
        "get_runbook",
        "get_audit_log",
        "get_incident_activity",
        "summarize_incident",
        "query_incident_metrics",
        "find_similar_incidents",
        "get_shift_handoff",
    ):
        annotations = tools[name].annotations
        assert annotations is not None, name
        assert annotations.read_only_hint is True, name
        assert tools[name].description
    restart_annotations = tools["restart_service"].annotations
    assert restart_annotations is not None
    assert restart_annotations.destructive_hint is True
    assert restart_annotations.read_only_hint is False
    for name in ("resolve_incident", "silence_incident", "unsilence_incident"):
        annotations = tools[name].annotations
        assert annotations is not None and annotations.destructive_hint is True, name
    for name in ("acknowledge_incident", "add_incident_note", "save_postmortem"):
        annotations = tools[name].annotations
        assert annotations is not None and annotations.read_only_hint is False, name
        assert annotations.destructive_hint is False, name


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_server_sends_instructions(make_server: Callable[..., MCPServer], mode: str) -> None:
    """Pinned 2026 clients skip discovery; "auto" discovers, so it is how a 2026 client learns about the desk."""
    async with connect(make_server(), mode) as client:
        name = client.server_info.name if client.server_info else None
        instructions = client.instructions or ""
        version = client.protocol_version
    assert name == "incident-desk"
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert "restart_service" in instructions and "human" in instructions


async def test_read_tools_twin_the_resources(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        listing = await client.call_tool("list_incidents", {})
        page = await client.call_tool("read_incident_log", {"incidentId": "INC-1043"})
        found = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": "p99"})
        runbook = await client.call_tool("get_runbook", {"service": "search-api"})
    assert [i["id"] for i in listing.structured_content["incidents"]] == ["INC-1042", "INC-1043"]
    assert listing.structured_content["skipped"] == []
    assert [line["text"] for line in page.structured_content["lines"]] == SAMPLE_1043_LOG.splitlines()
    assert page.structured_content["next_cursor"] is None
    assert found.structured_content["matches"] == [
        {"number": 2, "text": "11:02:51 search-api INFO p99 latency 840ms (SLO 500ms)"}
    ]
    assert runbook.structured_content["markdown"].startswith("# search-api runbook")


async def test_unknown_ids_in_tools_are_error_results(make_server: Callable[..., MCPServer], era: str) -> None:
    async with connect(make_server(), era) as client:
        results = [
            await client.call_tool("read_incident_log", {"incidentId": "INC-9999"}),
            await client.call_tool("search_incident_log", {"incidentId": "INC-9999", "pattern": "x"}),
            await client.call_tool("summarize_incident", {"incidentId": "INC-9999"}),
            await client.call_tool("get_runbook", {"service": "nope"}),
        ]
        bad_regex = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": "("})
        bad_cursor = await client.call_tool("read_incident_log", {"incidentId": "INC-1043", "cursor": "L9@7"})
    assert [r.is_error for r in results] == [True, True, True, True]
    assert [text_of(r) for r in results] == [
        "No such incident: INC-9999",
        "No such incident: INC-9999",
        "No such incident: INC-9999",
        "No such service: nope",
    ]
    assert bad_regex.is_error and "Invalid regular expression '('" in text_of(bad_regex)
    assert bad_cursor.is_error and "'L9@7' was not handed out by this desk for INC-1043" in text_of(bad_cursor)


@pytest.mark.parametrize("hostile", ["../../etc/passwd", "..", "INC-1042/../../x", "/etc/passwd", "a\\..\\b"])
async def test_traversal_ids_are_refused(make_server: Callable[..., MCPServer], era: str, hostile: str) -> None:
    async with connect(make_server(), era) as client:
        by_tool = await client.call_tool("read_incident_log", {"incidentId": hostile})
        runbook = await client.call_tool("get_runbook", {"service": hostile})
        prompt_error = None
        try:
            await client.get_prompt("postmortem", {"incidentId": hostile})
        except MCPError as exc:
            prompt_error = exc
    assert by_tool.is_error and text_of(by_tool) == f"No such incident: {hostile}"
    assert runbook.is_error and text_of(runbook) == f"No such service: {hostile}"
    assert prompt_error is not None and prompt_error.message == f"No such incident: {hostile}"


async def test_symlink_escape_is_refused(tmp_path: Path, make_server: Callable[..., MCPServer]) -> None:
    root = tmp_path / "desk"
    (root / "incidents").mkdir(parents=True)
    (root / "runbooks").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "incident.toml").write_text(
        'title="t"\nservice="svc"\nseverity="SEV1"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
    )
    (outside / "log.txt").write_text("secret outside line\n")
    (root / "incidents" / "INC-1").symlink_to(outside, target_is_directory=True)
    (tmp_path / "secret.md").write_text("# not a runbook")
    (root / "runbooks" / "leak.md").symlink_to(tmp_path / "secret.md")
    async with connect(make_server(data_dir=root), "legacy") as client:
        listing = await client.call_tool("list_incidents", {})
        runbook = await client.call_tool("get_runbook", {"service": "leak"})
    assert listing.structured_content["incidents"] == []
    assert listing.structured_content["skipped"] == [
        {"entry": "incidents/INC-1", "reason": "points outside the data directory"},
        {"entry": "runbooks/leak.md", "reason": "points outside the data directory"},
    ]
    assert runbook.is_error
    assert text_of(runbook) == "Runbook of leak cannot be read: leak.md points outside the data directory"


async def test_redaction_on_by_default_and_can_be_turned_off(
    tmp_path: Path, make_server: Callable[..., MCPServer], era: str
) -> None:
    root = tmp_path / "desk"
    entry = root / "incidents" / "INC-7"
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        'title="t"\nservice="svc"\nseverity="SEV1"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
    )
    (entry / "log.txt").write_text(
        "10:00 svc ERROR auth failed: Authorization: Bearer abcdefghijklmnop123\n"
        "10:01 svc INFO connecting to postgres://app:hunter2secret@db:5432/main\n"
        "10:02 svc INFO api_key=sk-proj-ABCDEFGHIJKLMNOPQRSTUV\n"
    )
    async with connect(make_server(data_dir=root), era) as client:
        resource = text_of(await client.read_resource("incident://INC-7/log"))
        page = text_of(await client.call_tool("read_incident_log", {"incidentId": "INC-7"}))
        probe = await client.call_tool("search_incident_log", {"incidentId": "INC-7", "pattern": "hunter2"})
        prompt_content = (await client.get_prompt("postmortem", {"incidentId": "INC-7"})).messages[0].content
        assert isinstance(prompt_content, TextContent)
        prompt = prompt_content.text
    async with connect(make_server(data_dir=root, redact_secrets=False), era) as client:
        raw = text_of(await client.read_resource("incident://INC-7/log"))
    for shown in (resource, page, prompt):
        assert "abcdefghijklmnop123" not in shown
        assert "hunter2secret" not in shown
        assert "sk-proj-ABCDEFGHIJKLMNOPQRSTUV" not in shown
        assert "postgres://app:[REDACTED]@db:5432/main" in shown
    assert probe.structured_content["matches"] == []
    assert "hunter2secret" in raw


async def test_bad_data_entries_are_reported_and_skipped(
    tmp_path: Path, make_server: Callable[..., MCPServer], era: str
) -> None:
    root = tmp_path / "desk"
    good = root / "incidents" / "INC-1"
    good.mkdir(parents=True)
    (good / "incident.toml").write_text(
        'title="ok"\nservice="svc"\nseverity="SEV1"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
    )
    (good / "log.txt").write_text("fine\n")
    broken = root / "incidents" / "INC-2"
    broken.mkdir()
    (broken / "incident.toml").write_text("title = [unclosed\n")
    (broken / "log.txt").write_text("x\n")
    nolog = root / "incidents" / "INC-3"
    nolog.mkdir()
    (nolog / "incident.toml").write_text(
        'title="t"\nservice="svc"\nseverity="SEV1"\nstatus="open"\nopened=2026-11-29T10:00:00Z\n'
    )
    (root / "incidents" / "stray.txt").write_text("not an incident")
    async with connect(make_server(data_dir=root), era) as client:
        index = text_of(await client.read_resource("incident://index"))
        listing = await client.call_tool("list_incidents", {})
    assert index == "INC-1"
    skipped = {s["entry"]: s["reason"] for s in listing.structured_content["skipped"]}
    assert set(skipped) == {"incidents/INC-2", "incidents/INC-3", "incidents/stray.txt"}
    assert "incident.toml is unreadable" in skipped["incidents/INC-2"]
    assert skipped["incidents/INC-3"] == "missing log.txt"
    assert "skipped incidents/INC-2" in text_of(listing)


async def test_closed_incidents_leave_the_index_but_stay_listable(
    tmp_path: Path, make_server: Callable[..., MCPServer]
) -> None:
    root = tmp_path / "desk"
    for name, status in (("INC-2", "resolved"), ("INC-1", "open")):
        entry = root / "incidents" / name
        entry.mkdir(parents=True)
        (entry / "incident.toml").write_text(
            f'title="t"\nservice="svc"\nseverity="SEV1"\nstatus="{status}"\nopened=2026-11-29T10:00:00Z\n'
        )
        (entry / "log.txt").write_text("x\n")
    async with connect(make_server(data_dir=root), "2026-07-28") as client:
        index = text_of(await client.read_resource("incident://index"))
        everything = await client.call_tool("list_incidents", {"status": "all"})
    assert index == "INC-1"
    assert [i["id"] for i in everything.structured_content["incidents"]] == ["INC-1", "INC-2"]


@pytest.mark.parametrize("pattern", ["(a+)+b", "(\\w+\\s?)*$", "(x*)*y", "(.|.)*\\x00"])
async def test_nested_repetition_is_searched_not_refused(make_server: Callable[..., MCPServer], pattern: str) -> None:
    """RE2 matches in linear time, so the shapes once refused as catastrophic are ordinary patterns now."""
    async with connect(make_server(), "legacy") as client:
        found = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": pattern})
        nested = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": "(merge|p99)+"})
    assert not found.is_error, text_of(found)
    assert found.structured_content["next_cursor"] is None
    assert not nested.is_error and len(nested.structured_content["matches"]) == 2


async def test_unsupported_constructs_are_a_tool_error_naming_them(make_server: Callable[..., MCPServer]) -> None:
    async with connect(make_server(), "legacy") as client:
        refused = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": "(?<=p)99"})
        backref = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": "(9)\\1"})
    assert refused.is_error and text_of(refused).startswith(
        "Unsupported regular expression '(?<=p)99': lookbehind (?<=...) is not supported"
    )
    assert backref.is_error and "the backreference \\1 is not supported" in text_of(backref)


async def test_a_log_that_cannot_be_read_is_a_clear_error_everywhere(
    make_server: Callable[..., MCPServer], era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between listing and reading, a log can vanish or lose its permissions: say so, never a masked crash."""

    def unreadable(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("incident_desk.core.search.paging.read_page", unreadable)
    monkeypatch.setattr("incident_desk.core.search.engine.search", unreadable)
    monkeypatch.setattr("incident_desk.core.search.paging.read_tail", unreadable)
    expected = "Log of INC-1043 cannot be read: Permission denied"
    async with connect(make_server(), era) as client:
        page = await client.call_tool("read_incident_log", {"incidentId": "INC-1043"})
        found = await client.call_tool("search_incident_log", {"incidentId": "INC-1043", "pattern": "x"})
        summary = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
        with pytest.raises(MCPError) as resource_error:
            await client.read_resource("incident://INC-1043/log")
        with pytest.raises(MCPError) as prompt_error:
            await client.get_prompt("postmortem", {"incidentId": "INC-1043"})
    for result in (page, found, summary):
        assert result.is_error and text_of(result) == expected
    assert (resource_error.value.code, resource_error.value.message) == (-32603, expected)
    assert prompt_error.value.message == expected
