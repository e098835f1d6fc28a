"""Hostile files in the data directory: FIFOs, devices, links leading out, a log swapped under a read, OS errors.

Whoever can write the data directory (or a mistake) must never stall the desk, grow it without bound, make it
serve a file from outside, or crash a request: each such entry is skipped with its reason.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference

from incident_desk.core import datafiles
from incident_desk.core.incidents import DataError, DataFolder, Problem, UnknownService, bundled_sample_data
from tests.helpers import ROOT, child_env, connect, text_of

pytestmark = pytest.mark.anyio

TOML = 'title="{title}"\nservice="svc"\nseverity="SEV2"\nstatus="open"\nopened="2026-01-01T00:00:00Z"\n'
posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")


def _incident(root: Path, incident_id: str, title: str = "fine", log: str | None = "inside line\n") -> Path:
    entry = root / "incidents" / incident_id
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(TOML.format(title=title))
    if log is not None:
        (entry / "log.txt").write_text(log)
    return entry


def _desk_params(tmp_path: Path, root: Path, address_space_bytes: int | None = None) -> StdioServerParameters:
    """The desk as a stdio subprocess on ``root``; with ``address_space_bytes``, under that memory cap."""
    launch = ["-m", "incident_desk", "--data-dir", str(root)]
    if address_space_bytes is not None:
        launch = [
            "-c",
            "import resource, runpy, sys; "
            f"resource.setrlimit(resource.RLIMIT_AS, ({address_space_bytes}, {address_space_bytes})); "
            f"sys.argv = ['incident-desk', '--data-dir', {str(root)!r}]; "
            "runpy.run_module('incident_desk', run_name='__main__')",
        ]
    # Every request looks at the data directory (no freshness window): the case where a FIFO could stall one.
    env = child_env(tmp_path / "audit.sqlite3", MALLOC_ARENA_MAX="2", INCIDENT_DESK_DATA_FRESHNESS_SECONDS="0")
    return StdioServerParameters(command=sys.executable, args=launch, cwd=str(ROOT), env=env)


def _skipped(listing: Any) -> dict[str, str]:
    return {entry["entry"]: entry["reason"] for entry in listing.structured_content["skipped"]}


@posix_only
@pytest.mark.subprocess
async def test_a_fifo_incident_file_present_at_start_does_not_stall_initialize(tmp_path: Path) -> None:
    root = tmp_path / "desk"
    _incident(root, "INC-1")
    stalled = _incident(root, "INC-2", log="x\n")
    (stalled / "incident.toml").unlink()
    os.mkfifo(stalled / "incident.toml")
    with anyio.fail_after(30):
        async with Client(_desk_params(tmp_path, root), mode="legacy") as client:
            await client.send_ping()
            listing = await client.call_tool("list_incidents", {})
            await client.send_ping()
    assert [incident["id"] for incident in listing.structured_content["incidents"]] == ["INC-1"]
    assert _skipped(listing) == {"incidents/INC-2": "incident.toml is a FIFO, not a regular file"}


@posix_only
@pytest.mark.subprocess
async def test_a_fifo_added_while_the_desk_runs_never_stalls_a_request_or_ping(tmp_path: Path) -> None:
    root = tmp_path / "desk"
    _incident(root, "INC-1")
    (root / "runbooks").mkdir()
    with anyio.fail_after(30):
        async with Client(_desk_params(tmp_path, root), mode="legacy") as client:
            await client.send_ping()
            later = _incident(root, "INC-2", log=None)
            (later / "incident.toml").unlink()
            os.mkfifo(later / "incident.toml")
            os.mkfifo(later / "log.txt")
            os.mkfifo(root / "runbooks" / "svc.md")
            restart = await client.call_tool("restart_service", {"service": "svc"})
            await client.send_ping()
            listing = await client.call_tool("list_incidents", {})
            runbook = await client.call_tool("get_runbook", {"service": "svc"})
            index = text_of(await client.read_resource("incident://index"))
            await client.send_ping()
    assert text_of(restart).startswith("ELICITATION_UNAVAILABLE")
    assert _skipped(listing) == {
        "incidents/INC-2": "incident.toml is a FIFO, not a regular file",
        "runbooks/svc.md": "is a FIFO, not a regular file",
    }
    assert runbook.is_error
    assert text_of(runbook) == "Runbook of svc cannot be read: svc.md is a FIFO, not a regular file"
    assert index == "INC-1"


@posix_only
@pytest.mark.subprocess
async def test_files_linked_to_dev_zero_or_too_big_are_skipped_with_memory_capped(tmp_path: Path) -> None:
    """Under a 1 GiB address-space cap: reading /dev/zero (or a huge file) whole would die, a judged open does not."""
    root = tmp_path / "desk"
    _incident(root, "INC-1")
    (_incident(root, "INC-ZERO") / "incident.toml").unlink()
    (root / "incidents" / "INC-ZERO" / "incident.toml").symlink_to("/dev/zero")
    with (_incident(root, "INC-HUGE") / "incident.toml").open("a") as huge:
        huge.truncate(2 * 1024 * 1024 * 1024)  # sparse: 2 GiB without using the disk
    (root / "runbooks").mkdir()
    (root / "runbooks" / "zero.md").symlink_to("/dev/zero")
    (root / "runbooks" / "big.md").write_bytes(b"# big\n" + b"x" * (1024 * 1024))
    with anyio.fail_after(60):
        async with Client(_desk_params(tmp_path, root, address_space_bytes=1024**3), mode="legacy") as client:
            listing = await client.call_tool("list_incidents", {})
            zero = await client.call_tool("get_runbook", {"service": "zero"})
            big = await client.call_tool("get_runbook", {"service": "big"})
            await client.send_ping()
    assert _skipped(listing) == {
        "incidents/INC-ZERO": "incident.toml points outside the data directory",
        "incidents/INC-HUGE": "incident.toml is 2147483648 bytes, over the limit of 1048576 bytes for data files",
        "runbooks/zero.md": "points outside the data directory",
        "runbooks/big.md": "is 1048582 bytes, over the limit of 1048576 bytes for data files",
    }
    assert text_of(zero) == "Runbook of zero cannot be read: zero.md points outside the data directory"
    assert text_of(big).startswith("Runbook of big cannot be read: big.md is 1048582 bytes, over the limit")


@pytest.fixture(params=[True, False], ids=["descriptors", "paths"])
def use_descriptors(request: pytest.FixtureRequest) -> bool:
    """Both ways of opening: relative to held directories (POSIX), and by checked paths (Windows' way)."""
    if request.param and not datafiles.DESCRIPTORS_SUPPORTED:
        pytest.skip("this platform cannot open relative to a directory descriptor")
    return bool(request.param)


def test_links_are_followed_only_while_they_stay_inside(tmp_path: Path, use_descriptors: bool) -> None:
    root = tmp_path / "desk"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "incident.toml").write_text(TOML.format(title="OUTSIDE TITLE"))
    (outside / "log.txt").write_text("OUTSIDE LOG\n")
    (outside / "svc.md").write_text("# OUTSIDE RUNBOOK\n")
    _incident(root, "INC-OK")
    (_incident(root, "INC-TOML") / "incident.toml").unlink()
    (root / "incidents" / "INC-TOML" / "incident.toml").symlink_to(outside / "incident.toml")
    (_incident(root, "INC-REL") / "incident.toml").unlink()
    (root / "incidents" / "INC-REL" / "incident.toml").symlink_to("../../../outside/incident.toml")
    (root / "incidents" / "INC-DIR").symlink_to(outside, target_is_directory=True)
    (_incident(root, "INC-LOOP", log=None) / "log.txt").symlink_to("log.txt")
    (_incident(root, "INC-ISDIR") / "incident.toml").unlink()
    (root / "incidents" / "INC-ISDIR" / "incident.toml").mkdir()
    # Links that stay inside are fine, absolute or relative, through a linked directory or not.
    shared = root / "shared"
    shared.mkdir()
    (shared / "inc.toml").write_text(TOML.format(title="shared"))
    (_incident(root, "INC-IN-ABS", log="abs\n") / "incident.toml").unlink()
    (root / "incidents" / "INC-IN-ABS" / "incident.toml").symlink_to(shared / "inc.toml")
    (root / "incidents" / "INC-IN-REL").symlink_to("INC-OK", target_is_directory=True)
    (root / "incidents" / "stray.txt").write_text("not an incident")
    (root / "runbooks").mkdir()
    (root / "runbooks" / "svc.md").symlink_to(outside / "svc.md")
    (root / "runbooks" / "ok.md").write_text("# ok\n")
    (root / "runbooks" / "alias.md").symlink_to("../runbooks/./ok.md")
    desk = DataFolder(root, use_descriptors=use_descriptors)
    assert sorted(desk.listing().incidents) == ["INC-IN-ABS", "INC-IN-REL", "INC-OK"]
    assert {incident.title for incident in desk.incidents()} == {"fine", "shared"}
    assert set(desk.problems()) == {
        Problem("incidents/INC-TOML", "incident.toml points outside the data directory"),
        Problem("incidents/INC-REL", "incident.toml points outside the data directory"),
        Problem("incidents/INC-DIR", "points outside the data directory"),
        Problem("incidents/INC-ISDIR", "incident.toml is a directory, not a regular file"),
        Problem("incidents/stray.txt", "is a regular file, not a directory"),
        Problem(
            "incidents/INC-LOOP",
            "log.txt leads through more than 40 symbolic links"
            if use_descriptors
            else "log.txt cannot be read: Too many levels of symbolic links",
        ),
        Problem("runbooks/svc.md", "points outside the data directory"),
    }
    assert desk.runbook_services() == ["alias", "ok"]
    assert desk.runbook("alias") == "# ok\n"
    with pytest.raises(DataError, match=r"svc\.md points outside the data directory"):
        desk.runbook("svc")
    with desk.open_log("INC-IN-REL") as log:
        assert log.read() == b"inside line\n"


def test_absolute_links_may_name_the_root_as_configured_or_resolved(tmp_path: Path, use_descriptors: bool) -> None:
    real = tmp_path / "real-desk"
    configured = tmp_path / "desk-alias"
    configured.symlink_to(real, target_is_directory=True)
    shared = real / "shared"
    shared.mkdir(parents=True)
    (shared / "log.txt").write_text("shared log\n")
    (_incident(real, "INC-1", log=None) / "log.txt").symlink_to(configured / "shared" / "log.txt")
    (_incident(real, "INC-2", log=None) / "log.txt").symlink_to(real / "shared" / "log.txt")
    desk = DataFolder(configured, use_descriptors=use_descriptors)
    assert [incident.id for incident in desk.incidents()] == ["INC-1", "INC-2"]
    for incident_id in ("INC-1", "INC-2"):
        with desk.open_log(incident_id) as log:
            assert log.read() == b"shared log\n"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_inside_the_data_directory_is_refused_unopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "desk"
    (_incident(root, "INC-DEV") / "incident.toml").unlink()
    os.mknod(root / "incidents" / "INC-DEV" / "incident.toml", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
    (root / "runbooks").mkdir()
    os.mknod(root / "runbooks" / "dev.md", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    desk = DataFolder(root)
    opened = _record_descriptors(monkeypatch)
    assert set(desk.problems()) == {
        Problem("incidents/INC-DEV", "incident.toml is a character device, not a regular file"),
        Problem("runbooks/dev.md", "is a character device, not a regular file"),
    }
    with pytest.raises(DataError, match="is a character device"):
        desk.runbook("dev")
    nodes = {(node.stat().st_dev, node.stat().st_ino) for node in (root / "incidents").glob("*/incident.toml")}
    nodes.add(((root / "runbooks" / "dev.md").stat().st_dev, (root / "runbooks" / "dev.md").stat().st_ino))
    assert not [path for *identity, path in opened if tuple(identity) in nodes], "a device node was opened"
    assert opened, "nothing was opened at all"


async def test_an_outside_title_is_never_served(tmp_path: Path, make_server: Callable[..., MCPServer]) -> None:
    root = tmp_path / "desk"
    (tmp_path / "stolen.toml").write_text(TOML.format(title="OUTSIDE TITLE"))
    (_incident(root, "INC-1") / "incident.toml").unlink()
    (root / "incidents" / "INC-1" / "incident.toml").symlink_to(tmp_path / "stolen.toml")
    async with connect(make_server(data_dir=root), "legacy") as client:
        listing = await client.call_tool("list_incidents", {"status": "all"})
        with pytest.raises(MCPError, match="No such incident"):
            await client.read_resource("incident://INC-1/log")
    assert "OUTSIDE TITLE" not in str(listing.model_dump())
    assert _skipped(listing) == {"incidents/INC-1": "incident.toml points outside the data directory"}


def _record_descriptors(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, str]]:
    """Every descriptor ``os.open`` hands out from now on: (device, inode, what /proc says it is)."""
    opened: list[tuple[int, int, str]] = []
    real_open = os.open

    def watching_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        found = os.fstat(fd)
        proc = Path(f"/proc/self/fd/{fd}")
        opened.append((found.st_dev, found.st_ino, str(proc.readlink()) if proc.exists() else str(path)))
        return fd

    monkeypatch.setattr(os, "open", watching_open)
    return opened


async def test_a_log_swapped_for_an_outside_link_while_read_is_never_served(
    tmp_path: Path, make_server: Callable[..., MCPServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check-then-open race: log.txt flips between a file and a link to outside, thousands of times."""
    root = tmp_path / "desk"
    entry = _incident(root, "INC-1")
    outside = tmp_path / "outside.log"
    outside.write_text("OUTSIDE SECRET\n")
    outside_identity = (outside.stat().st_dev, outside.stat().st_ino)
    stop = threading.Event()
    seen_in_proc: list[str] = []

    def swap() -> None:
        flips = 0
        while not stop.is_set():
            replacement = entry / f".swap-{flips}"
            if flips % 2:
                replacement.symlink_to(outside)
            else:
                replacement.write_text("inside line\n")
            replacement.replace(entry / "log.txt")
            flips += 1

    def watch_descriptors() -> None:
        """Also catch opens that bypass os.open (io.open, pathlib): any descriptor on the outside file."""
        while not stop.is_set():
            try:
                descriptors = list(Path("/proc/self/fd").iterdir())
            except OSError:
                return
            for descriptor in descriptors:
                try:
                    target = str(descriptor.readlink())
                except OSError:
                    continue
                if target == str(outside):
                    seen_in_proc.append(target)

    # Freshness 0: every request checks the directory and then opens the log, so each one runs the race (with the
    # 1 s window, a look that caught the link would skip the incident for a whole second).
    server = make_server(data_dir=root, data_freshness_seconds=0)  # the audit journal goes outside the data dir
    descriptors_opened = _record_descriptors(monkeypatch)
    served: list[str] = []
    threads = [threading.Thread(target=swap), threading.Thread(target=watch_descriptors)]
    for thread in threads:
        thread.start()
    try:
        async with connect(server, "legacy") as client:
            with anyio.fail_after(120):
                for attempt in range(1500):
                    if attempt % 3 == 0:
                        result = await client.call_tool("read_incident_log", {"incidentId": "INC-1"})
                        served.append(text_of(result))
                    elif attempt % 3 == 1:
                        result = await client.call_tool("search_incident_log", {"incidentId": "INC-1", "pattern": "."})
                        served.append(text_of(result))
                    else:
                        try:
                            served.append(text_of(await client.read_resource("incident://INC-1/log")))
                        except MCPError as exc:
                            served.append(exc.error.message)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not [text for text in served if "OUTSIDE" in text]
    assert any("inside line" in text for text in served), "the race was never won by the real log"
    root_real = os.path.realpath(root)
    assert descriptors_opened, "the desk opened nothing through os.open"
    assert [path for *_, path in descriptors_opened if not path.startswith(root_real)] == []
    assert [identity for *identity, _ in descriptors_opened if tuple(identity) == outside_identity] == []
    assert seen_in_proc == []


@pytest.mark.timing
async def test_a_stalled_filesystem_never_blocks_the_event_loop(
    make_server: Callable[..., MCPServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request that scans the data directory does it in a worker thread: while listing the directory hangs
    (a dead NFS mount, a FUSE filesystem), a ping is still answered at once."""
    stall_seconds = 10
    release = threading.Event()
    real_listdir = os.listdir
    data_root = bundled_sample_data()

    def hanging_listdir(target: Any = ".") -> list[str]:
        # Only the data directory hangs (by descriptor or by path): the SDK lists its own package files too.
        if isinstance(target, int) or Path(target).is_relative_to(data_root):
            release.wait(stall_seconds)
        return real_listdir(target)

    async with connect(make_server(), "legacy") as client, anyio.create_task_group() as requests:
        monkeypatch.setattr(os, "listdir", hanging_listdir)
        requests.start_soon(client.call_tool, "list_incidents", {})
        requests.start_soon(client.call_tool, "restart_service", {"service": "payments-api"})
        requests.start_soon(client.call_tool, "get_runbook", {"service": "payments-api"})
        requests.start_soon(client.read_resource, "incident://index")
        requests.start_soon(client.read_resource, "incident://INC-1043/log")
        requests.start_soon(client.complete, PromptReference(name="postmortem"), {"name": "incidentId", "value": ""})
        await anyio.sleep(0.5)
        started = time.monotonic()
        await client.send_ping()
        answered_after = time.monotonic() - started
        release.set()
    assert answered_after < stall_seconds / 2, f"ping waited {answered_after:.1f}s behind a stalled scan"


@pytest.mark.parametrize("failing", ["open", "stat", "listdir", "readlink", "fstat"])
def test_os_errors_anywhere_become_clean_desk_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    root = tmp_path / "desk"
    _incident(root, "INC-1")
    (_incident(root, "INC-2", log=None) / "log.txt").symlink_to("../INC-1/log.txt")
    (root / "runbooks").mkdir()
    (root / "runbooks" / "svc.md").write_text("# svc\n")
    (root / "runbooks" / "alias.md").symlink_to("svc.md")
    real = getattr(os, failing)

    def failing_call(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EIO, "Input/output error")

    def try_everything(desk: DataFolder) -> None:
        desk.listing()
        desk.incidents()
        desk.problems()
        desk.services(["svc"])
        desk.runbook_services()
        for incident_id in ("INC-1", "INC-2", "INC-9"):
            try:
                desk.incident(incident_id)
                desk.open_log(incident_id).close()
            except DataError:
                pass
        for service in ("svc", "alias", "nope"):
            with contextlib.suppress(DataError):
                desk.runbook(service)

    desk = DataFolder(root)
    try_everything(desk)  # warm: a listing exists, then the filesystem starts failing
    monkeypatch.setattr(os, failing, failing_call)
    try_everything(desk)
    try_everything(DataFolder(root))  # and cold
    monkeypatch.setattr(os, failing, real)
    assert desk.runbook("svc") == "# svc\n", "the desk recovers once the filesystem does"
    with pytest.raises(UnknownService):
        desk.runbook("nope")


_NAMES = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="/\0"), min_size=1, max_size=40).filter(
    lambda name: name not in (".", "..") and len(name.encode()) <= 200
)
_TOML_VALUES = st.one_of(
    st.text(max_size=80),
    st.integers(),
    st.booleans(),
    st.datetimes(timezones=st.just(UTC)),
    st.lists(st.text(max_size=10), max_size=3),
)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return json.dumps(value) if isinstance(value, str) else str(value)


@st.composite
def _incident_files(draw: st.DrawFn) -> bytes:
    """Raw bytes, or a TOML document whose keys and value types are each right or wrong."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=600))
    keys = draw(st.sets(st.sampled_from(["title", "service", "severity", "status", "opened", "extra"])))
    values = {key: draw(_TOML_VALUES) for key in keys}
    return "".join(f"{key} = {_toml_value(value)}\n" for key, value in values.items()).encode()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_NAMES, incident_file=_incident_files(), log=st.one_of(st.none(), st.binary(max_size=200)))
def test_any_incident_entry_is_listed_or_skipped_with_a_reason(
    tmp_path_factory: pytest.TempPathFactory, name: str, incident_file: bytes, log: bytes | None
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    entry = root / "incidents" / name
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_bytes(incident_file)
    if log is not None:
        (entry / "log.txt").write_bytes(log)
    desk = DataFolder(root)
    listing = desk.listing()
    skipped = [problem for problem in listing.problems if problem.entry == f"incidents/{name}"]
    assert (name in listing.incidents) != bool(skipped), (listing, skipped)
    assert all(problem.reason for problem in listing.problems)
    if name in listing.incidents:
        with desk.open_log(name) as handle:
            assert handle.read() == log


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(incident_id=st.text(max_size=80), service=st.text(max_size=80), cursor=st.text(max_size=40))
def test_any_tool_argument_gets_an_answer_or_a_clean_error(
    make_server: Callable[..., MCPServer], incident_id: str, service: str, cursor: str
) -> None:
    async def ask() -> None:
        async with connect(make_server(), "2026-07-28") as client:
            calls = [
                ("read_incident_log", {"incidentId": incident_id, "cursor": cursor}),
                ("search_incident_log", {"incidentId": incident_id, "pattern": "e", "cursor": cursor}),
                ("summarize_incident", {"incidentId": incident_id}),
                ("get_runbook", {"service": service}),
                ("restart_service", {"service": service}),
            ]
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                assert text_of(result), (tool, arguments)
            for uri in (f"incident://{incident_id}/log", f"runbook://{service}"):
                try:
                    await client.read_resource(uri)
                except MCPError as exc:
                    assert exc.error.code in (-32602, -32603, -32002), (uri, exc.error)

    anyio.run(ask)
