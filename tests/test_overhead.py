"""The desk's own per-call work: change detection of the data directory is shared between calls, not per call."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from mcp import Client
from mcp_types import PromptReference

from incident_desk.app import INLINE_LOG_MAX_BYTES, DeskApp
from incident_desk.core import incidents as incidents_module
from incident_desk.core.incidents import DataFolder, bundled_sample_data
from incident_desk.features import read_tools
from incident_desk.server import build_server
from tests.helpers import ROOT, SAMPLE_1043_LOG, AppFactory, child_env, connect, text_of

pytestmark = pytest.mark.anyio


def _counting_directory_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every listing of a data-directory subdirectory made to detect changes, by name."""
    checked: list[str] = []
    original = DataFolder._directory_signature

    def counting(self: DataFolder, name: str, *files: str) -> Any:
        checked.append(name)
        return original(self, name, *files)

    monkeypatch.setattr(DataFolder, "_directory_signature", counting)
    return checked


async def test_calls_within_the_freshness_window_share_one_look_at_the_data_directory(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    checked = _counting_directory_checks(monkeypatch)
    server = build_server(make_app(data_freshness_seconds=60))
    async with connect(server, era) as client:
        for _ in range(20):
            result = await client.call_tool("list_incidents", {"status": "all"})
            assert not result.is_error
        await client.read_resource("incident://index")
        await client.read_resource("incident://INC-1043/log")
    assert sorted(checked) == ["incidents", "runbooks"]


async def test_an_incident_filed_while_the_desk_runs_shows_up_once_the_freshness_window_passes(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "desk"
    shutil.copytree(bundled_sample_data(), data)
    clock = [1000.0]
    monkeypatch.setattr(incidents_module, "monotonic", lambda: clock[0])
    server = build_server(make_app(data_dir=data, data_freshness_seconds=1.0))
    async with connect(server, "legacy") as client:
        before = (await client.call_tool("list_incidents", {"status": "all"})).structured_content
        assert before is not None
        filed = data / "incidents" / "INC-9000"
        shutil.copytree(data / "incidents" / "INC-1043", filed)
        clock[0] += 0.5
        within = (await client.call_tool("list_incidents", {"status": "all"})).structured_content
        assert within == before
        clock[0] += 0.6
        after = (await client.call_tool("list_incidents", {"status": "all"})).structured_content
    assert after is not None
    assert "INC-9000" in [entry["id"] for entry in after["incidents"]]


def test_a_freshness_of_zero_looks_on_every_call(tmp_path: Path) -> None:
    data = tmp_path / "desk"
    shutil.copytree(bundled_sample_data(), data)
    desk = DataFolder(data, freshness_seconds=0)
    before = set(desk.listing().incidents)
    shutil.copytree(data / "incidents" / "INC-1043", data / "incidents" / "INC-9001")
    assert set(desk.listing().incidents) == before | {"INC-9001"}


async def _surface(client: Client) -> dict[str, Any]:
    """Everything a client can see without calling a tool or reading a resource, as wire dicts."""
    return {
        "server": client.server_info,
        "capabilities": client.server_capabilities,
        "instructions": client.instructions,
        "tools": (await client.list_tools()).tools,
        "resources": (await client.list_resources()).resources,
        "templates": (await client.list_resource_templates()).resource_templates,
        "prompts": (await client.list_prompts()).prompts,
    }


async def test_a_desk_registering_its_features_on_first_use_shows_clients_the_same_surface(
    make_app: AppFactory, era: str
) -> None:
    async with connect(build_server(make_app()), era) as client:
        eager = await _surface(client)
    async with connect(build_server(make_app(), defer_features=True), era) as client:
        deferred = await _surface(client)
    assert deferred == eager
    assert [tool.name for tool in deferred["tools"]][:2] == ["show_incident_timeline", "list_incidents"]


@pytest.mark.parametrize("first", ["call_tool", "read_resource", "get_prompt", "complete"])
async def test_any_first_request_finds_the_deferred_features_registered(
    make_app: AppFactory, era: str, first: str
) -> None:
    async with connect(build_server(make_app(), defer_features=True), era) as client:
        if first == "call_tool":
            assert not (await client.call_tool("list_incidents", {})).is_error
        elif first == "read_resource":
            assert (await client.read_resource("incident://index")).contents
        elif first == "get_prompt":
            assert (await client.get_prompt("postmortem", {"incidentId": "INC-1043"})).messages
        else:
            completion = await client.complete(PromptReference(name="postmortem"), {"name": "incidentId", "value": ""})
            assert completion.completion.values


# Loaded only by what needs them: config --write (the writers), the first log read or search (redaction, RE2),
# the first request after initialize (the tools, resources and prompts, and what only they use).
NOT_NEEDED_TO_ANSWER = (
    "ruamel.yaml",
    "tomlkit",
    "re2",
    "incident_desk.core.redaction.face",
    "incident_desk.client_configs.merge",
    "incident_desk.client_configs.registry",
    "incident_desk.client_configs.launch",
    "incident_desk.cli.config",
    "incident_desk.cli.keychain",
    "incident_desk.core.search.paging",
    "incident_desk.core.search.cursors",
    "incident_desk.features.read_tools",
    "incident_desk.features.summarize",
    "incident_desk.features.restart",
    "incident_desk.features.resources",
    "incident_desk.features.prompts",
    "incident_desk.features.timeline",
    "incident_desk.timeline_view",
    "mcp.server.apps",
    "rich",
    "difflib",
    "incident_desk.core.neighbours.provider",
    "incident_desk.core.search.pattern",
    "incident_desk.observability.telemetry",
    "incident_desk.observability.tracing",
    "opentelemetry.sdk",
)


@pytest.mark.subprocess
def test_building_the_desk_served_over_stdio_imports_nothing_the_first_answer_does_not_need(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "import incident_desk.cli.main\n"
        "from incident_desk.cli.parser import build_parser\n"
        "from incident_desk.settings.model import load_settings\n"
        "from incident_desk.assembly import build_app\n"
        "from incident_desk.server import build_server\n"
        "build_parser('serve')\n"
        "build_server(build_app(load_settings({})), defer_features=True)\n"
        f"print(sorted(name for name in {NOT_NEEDED_TO_ANSWER!r} if name in sys.modules))\n"
    )
    env = child_env(tmp_path / "audit.sqlite3")
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


FIRST_READS_PROBE = """
import anyio, anyio.to_thread, sys, threading

# Where the redaction rules are compiled: the module that compiles them, imported on which thread.
imported_on_loop = []

def audit(event, args):
    if event == "import" and args[0] == "incident_desk.core.redaction.face":
        imported_on_loop.append(threading.current_thread() is threading.main_thread())

sys.addaudithook(audit)
from mcp import Client
from incident_desk.assembly import build_app
from incident_desk.server import build_server
from incident_desk.settings.model import load_settings

hops = []
original = anyio.to_thread.run_sync

async def counting(function, *args, **kwargs):
    hops.append(getattr(function, "__qualname__", repr(function)))
    return await original(function, *args, **kwargs)

async def main():
    app = build_app(load_settings({"data_freshness_seconds": 60}))
    # No incident memory: its keeper's thread would load the rules itself while indexing the listing, racing this.
    app.memory = None
    async with Client(build_server(app)) as client:
        await client.read_resource("incident://index")
        anyio.to_thread.run_sync = counting
        for _ in range(2):
            before = getattr(sys.modules.get("incident_desk.core.redaction.face"), "IMPORT_FINISHED", False)
            await client.read_resource("incident://INC-1043/log")
            print(before, hops)
            hops.clear()
    print("compiled on the loop:", imported_on_loop)

anyio.run(main)
"""


@pytest.mark.subprocess
def test_the_first_log_read_loads_the_reader_in_a_worker_thread_and_later_small_reads_stay_in_the_request(
    tmp_path: Path,
) -> None:
    """Compiling the redaction rules takes about 50 ms: never on the event loop, even for a small log."""
    done = subprocess.run(
        [sys.executable, "-c", FIRST_READS_PROBE],
        cwd=ROOT,
        env=child_env(tmp_path / "audit.sqlite3"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    first, *later = done.stdout.splitlines()
    # The rules load with the first read (in a worker thread) or, since titles are masked, with the first listing
    # (in its worker thread): either way once, and never on the loop; a later small read stays in the request.
    assert first in ("False ['DeskApp.read_log']", "True []")
    assert later == ["True []", "compiled on the loop: [False]"]


def _counting_thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every hop to a worker thread through anyio (the SDK's and the desk's), by the function it runs."""
    hops: list[str] = []
    original = anyio.to_thread.run_sync

    async def counting(function: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(function, "__qualname__", repr(function)))
        return await original(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return hops


async def test_a_small_listed_log_is_read_without_a_thread_hop(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    server = build_server(make_app(data_freshness_seconds=60))
    async with connect(server, era) as client:
        await client.read_resource("incident://INC-1043/log")  # the first look at the data directory
        hops = _counting_thread_hops(monkeypatch)
        for _ in range(5):
            assert text_of(await client.read_resource("incident://INC-1043/log")) == SAMPLE_1043_LOG
    assert hops == []


async def test_a_page_of_a_small_listed_log_is_read_without_a_thread_hop(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    server = build_server(make_app(data_freshness_seconds=60))
    async with connect(server, era) as client:
        await client.read_resource("incident://index")
        hops = _counting_thread_hops(monkeypatch)
        for _ in range(3):
            page = await client.call_tool("read_incident_log", {"incidentId": "INC-1043"})
            assert not page.is_error
            assert [line["text"] for line in (page.structured_content or {})["lines"]] == SAMPLE_1043_LOG.splitlines()
    assert hops == []


async def test_a_runbook_is_read_with_one_thread_hop_for_its_file(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    server = build_server(make_app(data_freshness_seconds=60))
    async with connect(server, era) as client:
        await client.read_resource("runbook://search-api")
        hops = _counting_thread_hops(monkeypatch)
        for _ in range(3):
            assert "search-api" in text_of(await client.read_resource("runbook://search-api"))
    assert len(hops) == 3
    assert hops == ["DeskApp._runbook"] * 3  # the file read, through the async face


async def test_a_deferred_desk_reads_a_small_log_without_a_thread_hop_too(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    server = build_server(make_app(data_freshness_seconds=60), defer_features=True)
    async with connect(server, era) as client:
        await client.read_resource("incident://INC-1043/log")
        hops = _counting_thread_hops(monkeypatch)
        assert text_of(await client.read_resource("incident://INC-1043/log")) == SAMPLE_1043_LOG
    assert hops == []


async def test_a_log_read_after_the_freshness_window_looks_at_the_data_directory_off_the_event_loop(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    looked_from: list[str] = []
    original = DataFolder._directory_signature

    def recording(self: DataFolder, name: str, *files: str) -> Any:
        looked_from.append(threading.current_thread().name)
        return original(self, name, *files)

    monkeypatch.setattr(DataFolder, "_directory_signature", recording)
    server = build_server(make_app(data_freshness_seconds=0))
    async with connect(server, era) as client:
        for _ in range(3):
            assert text_of(await client.read_resource("incident://INC-1043/log")) == SAMPLE_1043_LOG
    assert looked_from
    assert threading.main_thread().name not in looked_from


async def test_a_log_over_the_inline_size_is_read_in_a_worker_thread(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "desk"
    shutil.copytree(bundled_sample_data(), data)
    line = "11:02:44 search-api INFO request served\n"
    (data / "incidents" / "INC-1043" / "log.txt").write_text(line * (INLINE_LOG_MAX_BYTES // len(line) + 1))
    server = build_server(make_app(data_dir=data, data_freshness_seconds=60))
    async with connect(server, "legacy") as client:
        await client.read_resource("incident://index")
        hops = _counting_thread_hops(monkeypatch)
        assert text_of(await client.read_resource("incident://INC-1043/log")).endswith(line)
    assert hops == ["_read"]


def _counting_looks(app: DeskApp, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every look at the data directory's disk (not the last view handed back while fresh)."""
    data = app.sources.data
    read = data.listing
    looks: list[str] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        if data.cached_listing() is None:
            looks.append(threading.current_thread().name)
        return read(*args, **kwargs)

    monkeypatch.setattr(data, "listing", counted)
    return looks


async def test_a_deferred_desk_reads_its_data_directory_with_the_first_request_after_the_handshake(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    app = make_app(data_freshness_seconds=60)
    looks = _counting_looks(app, monkeypatch)
    async with connect(build_server(app, defer_features=True), era) as client:
        at_handshake = len(looks)
        await client.list_tools()
        at_listing = len(looks)
        first = await client.call_tool("list_incidents", {})
    assert (at_handshake, at_listing, len(looks)) == (0, 1, 1)
    assert looks[0] != threading.main_thread().name  # in a worker thread, not on the event loop
    assert [entry["id"] for entry in (first.structured_content or {})["incidents"]] == ["INC-1042", "INC-1043"]


async def test_a_call_beside_the_first_listing_waits_for_its_look_at_the_data_directory(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    app = make_app(data_freshness_seconds=60)
    looks = _counting_looks(app, monkeypatch)
    answers: list[Any] = []

    async def call() -> None:
        answers.append(await client.call_tool("list_incidents", {}))

    async with connect(build_server(app, defer_features=True), era) as client, anyio.create_task_group() as tasks:
        tasks.start_soon(client.list_tools)
        tasks.start_soon(call)
    assert len(looks) == 1
    assert not answers[0].is_error


async def test_listing_a_desk_whose_journal_stands_still_makes_no_thread_hop(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    # The standings hop was the whole HTTP gap to the bare SDK server (docs/performance.md).
    app = make_app(data_freshness_seconds=60)
    assert app.memory is not None
    app.memory.stop(timeout=0)  # its writes share the journal's file: each would be a change
    app.memory = None
    async with connect(build_server(app), era) as client:
        for status in ("open", "all"):  # the first look at the directory and the journal; each view's rendering
            await client.call_tool("list_incidents", {"status": status})
        hops = _counting_thread_hops(monkeypatch)
        answers = [await client.call_tool("list_incidents", {"status": status}) for status in ["open", "all"] * 3]
    assert hops == []
    assert all(not answer.is_error for answer in answers)


async def test_list_incidents_renders_each_view_of_the_data_directory_once(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    rendered: list[str] = []
    original = read_tools._render_listing

    def counting(current: Any, status: str, *journal_view: Any) -> Any:
        rendered.append(status)
        return original(current, status, *journal_view)

    monkeypatch.setattr(read_tools, "_render_listing", counting)
    server = build_server(make_app(data_freshness_seconds=60))
    async with connect(server, era) as client:
        answers = [await client.call_tool("list_incidents", {"status": status}) for status in ["open", "all"] * 5]
    assert rendered == ["open", "all"]
    assert {text_of(answer) for answer in answers[0::2]} == {text_of(answers[0])}
    assert [entry["id"] for entry in (answers[1].structured_content or {})["incidents"]] == ["INC-1042", "INC-1043"]
