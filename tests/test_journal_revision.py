"""The journal's revision, and the incidents' standings kept by it.

Every ``list_incidents`` needs who acknowledged and who resolved each incident; reading those rows from SQLite on
each call cost the HTTP desk more CPU per call than the whole bare SDK server spends (docs/performance.md). They are
read once per revision of the journal now: the revision must change with any write, whoever makes it (this desk,
another journal on the same file, another process), and with a file replaced or broken behind SQLite's back.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from incident_desk.core.journal.activity import Act, Event, Standing
from incident_desk.core.journal.audit import AuditJournal
from incident_desk.core.journal.revision import SQLiteRevision, filesystem_type
from incident_desk.core.outcomes import Outcome
from incident_desk.server import build_server
from tests.helpers import AppFactory, connect, text_of

# Another process acknowledges an incident in the journal at argv[1], as desk argv[2].
ACKNOWLEDGE_ELSEWHERE = (
    "import sys\n"
    "from pathlib import Path\n"
    "from incident_desk.core.journal.activity import Act, Event\n"
    "from incident_desk.core.journal.audit import AuditJournal\n"
    "from incident_desk.core.outcomes import Outcome\n"
    "journal = AuditJournal(Path(sys.argv[1]), desk=sys.argv[2])\n"
    "journal.record_event(Event(desk=sys.argv[2], incident_id='INC-1042', act=Act.ACKNOWLEDGE,\n"
    "                           outcome=Outcome.DONE, actor='elsewhere'))\n"
)


def _acknowledge_elsewhere(path: Path, desk: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", ACKNOWLEDGE_ELSEWHERE, str(path), desk], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode()


def _acknowledgement(desk: str, actor: str = "bob") -> Event:
    return Event(desk=desk, incident_id="INC-1042", act=Act.ACKNOWLEDGE, outcome=Outcome.DONE, actor=actor)


def test_revision_stands_while_only_reads_happen(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path / "audit.sqlite3")
    first = journal.revision()
    journal.activity(None)
    journal.recent()
    assert first is not None
    assert journal.revision() == first


def test_revision_changes_with_this_journals_write_and_another_journals(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path / "audit.sqlite3")
    other = AuditJournal(tmp_path / "audit.sqlite3")
    first = journal.revision()
    journal.record_event(_acknowledgement(journal.desk))
    second = journal.revision()
    other.record_event(_acknowledgement(other.desk, actor="carol"))
    third = journal.revision()
    assert len({first, second, third}) == 3


@pytest.mark.subprocess
def test_revision_changes_with_another_process_write(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path / "audit.sqlite3")
    before = journal.revision()
    _acknowledge_elsewhere(journal.path, journal.desk)
    assert journal.revision() != before


def test_revision_follows_a_journal_replaced_at_its_path(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    journal = AuditJournal(path)
    before = journal.revision()
    for suffix in ("", "-wal", "-shm"):
        moved = path.with_name(path.name + suffix)
        if moved.exists():
            moved.rename(tmp_path / f"aside{suffix}")
    replacement = AuditJournal(path)
    # A connection kept open on the new file (its own watcher): its commits then stay in the -wal file, so only
    # a watcher opened on the new file sees them, not the file's size or time.
    replacement.revision()
    replaced = journal.revision()
    replacement.record_event(_acknowledgement(replacement.desk))
    assert replaced != before
    assert journal.revision() != replaced  # the new file's commits are seen, not the old file's


def test_revision_is_unknown_for_a_journal_gone_and_never_recreates_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    journal = AuditJournal(path)
    assert journal.revision() is not None
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    assert journal.revision() is None
    assert not path.exists()


def test_standings_at_once_are_the_kept_ones_until_any_write(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path / "audit.sqlite3")
    assert journal.standings_at_once() is None  # nothing kept yet: a worker thread reads
    first = journal.standings()
    assert journal.standings_at_once() is first
    AuditJournal(journal.path).record_event(_acknowledgement(journal.desk))
    assert journal.standings_at_once() is None
    second = journal.standings()
    assert journal.standings_at_once() is second
    assert second["INC-1042"].acknowledged is not None


def test_revision_at_once_never_opens_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    journal = AuditJournal(path)
    assert journal.revision_at_once() is None  # no watcher open yet
    opened = journal.revision()
    assert opened is not None and journal.revision_at_once() == opened
    for suffix in ("", "-wal", "-shm"):
        moved = path.with_name(path.name + suffix)
        if moved.exists():
            moved.rename(tmp_path / f"aside{suffix}")
    AuditJournal(path)
    assert journal.revision_at_once() is None  # the watcher is on the file moved aside
    reopened = journal.revision()
    assert reopened is not None and reopened != opened
    assert journal.revision_at_once() == reopened


def test_a_watcher_opened_again_on_the_same_file_never_answers_a_kept_revision(tmp_path: Path) -> None:
    # data_version counts per connection: a new watcher starts where the last one started, commits or not, and a
    # WAL commit leaves the file's size and time alone while another connection keeps it from checkpointing.
    path = tmp_path / "audit.sqlite3"
    journal = AuditJournal(path)
    reader = sqlite3.connect(path, isolation_level=None)  # another process's connection on the journal
    reader.execute("SELECT 1 FROM decisions LIMIT 1").fetchall()
    kept = journal.standings()
    path.rename(tmp_path / "aside")  # gone for a moment: the watcher is let go
    assert journal.revision() is None
    (tmp_path / "aside").rename(path)
    AuditJournal(path, desk=journal.desk).record_event(_acknowledgement(journal.desk))
    after = journal.standings()
    assert after is not kept
    assert after["INC-1042"].acknowledged is not None
    assert journal.standings_at_once() is after
    reader.close()


MOUNTS = (
    "22 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw\n"
    "40 22 0:45 / /srv/on\\040call rw,relatime - nfs4 filer:/desk rw,vers=4.2\n"
    "41 40 0:46 / /srv/on\\040call/scratch rw - tmpfs tmpfs rw\n"
    "42 22 0:47 / /mnt/bucket rw - fuse.rclone remote: rw\n"
    "43 22 0:48 / /mnt/back\\134slash\\0401 rw - cifs //filer/x rw\n"
)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/srv/on call/audit.sqlite3", "nfs4"),
        ("/srv/on call/scratch/audit.sqlite3", "tmpfs"),
        ("/srv/on/audit.sqlite3", "ext4"),  # a mount point's prefix in letters is not a parent
        ("/mnt/bucket/audit.sqlite3", "fuse.rclone"),
        ("/mnt/back\\slash 1/audit.sqlite3", "cifs"),
        ("/home/oncall/.local/share/incident-desk/audit.sqlite3", "ext4"),
    ],
)
def test_the_filesystem_holding_a_journal_is_the_deepest_mount_above_it(path: str, kind: str) -> None:
    assert filesystem_type(Path(path), MOUNTS) == kind


def test_on_a_network_filesystem_only_worker_threads_ask_for_the_revision(tmp_path: Path) -> None:
    # A stat there waits as long as the server does: the event loop must not be the one waiting.
    journal = AuditJournal(tmp_path / "audit.sqlite3")
    remote = SQLiteRevision(journal.path, on_network=True)
    local = SQLiteRevision(journal.path, on_network=False)
    assert remote() is not None and local() is not None  # each opens its watcher in the caller's thread
    assert remote.at_once() is None
    assert local.at_once() == local()
    remote.close()
    local.close()


def test_revision_never_waits_for_a_writer_and_keeps_its_watcher(tmp_path: Path) -> None:
    # A journal in rollback mode (another tool's copy, a filesystem without WAL): a writer's lock keeps readers out.
    path = tmp_path / "plain.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("CREATE TABLE decisions (id INTEGER)")
    revision = SQLiteRevision(path)
    before = revision()
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("INSERT INTO decisions VALUES (1)")
    started = time.monotonic()
    assert revision.at_once() is None
    assert revision() is None  # not known now: the caller's own read waits, with its own timeout
    assert time.monotonic() - started < 1.0
    writer.execute("COMMIT")
    after = revision.at_once()  # the watcher stayed open through the writer's lock
    assert before is not None and after is not None and after != before
    writer.close()
    revision.close()


@pytest.mark.anyio
async def test_list_incidents_reads_the_standings_in_a_worker_only_when_the_journal_changed(
    make_app: AppFactory, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app()
    assert app.memory is not None
    # The memory's tables share the journal's file: its writes, made in its own thread when it first sees the
    # incidents, are changes too, so it is left out to make the journal stand still between the calls.
    app.memory.stop(timeout=0)
    app.memory = None
    journal = app.journal
    read = journal.standings
    reads: list[Mapping[str, Standing]] = []

    def counted() -> Mapping[str, Standing]:
        reads.append(read())
        return reads[-1]

    monkeypatch.setattr(journal, "standings", counted)
    async with connect(build_server(app), era) as client:
        first = await client.call_tool("list_incidents", {})
        second = await client.call_tool("list_incidents", {"status": "all"})
        AuditJournal(Path(journal.location), desk=app.desk_name).record_event(_acknowledgement(app.desk_name))
        third = await client.call_tool("list_incidents", {})
    assert len(reads) == 2  # the first listing and the one after the write
    assert [entry["state"] for entry in first.structured_content["incidents"]] == ["open", "open"]
    assert second.structured_content == {**second.structured_content, "total": 2}
    assert "acknowledged by bob" in text_of(third)


@pytest.mark.anyio
async def test_standings_are_read_once_per_revision_and_shared_unchangeable(make_app: AppFactory) -> None:
    app = make_app()
    first = await app.standings()
    again = await app.standings()
    other = AuditJournal(Path(app.journal.location), desk=app.desk_name)
    other.record_event(_acknowledgement(app.desk_name))
    after = await app.standings()
    assert again is first
    assert "INC-1042" not in first
    assert after is not first
    acknowledged = after["INC-1042"].acknowledged
    assert acknowledged is not None and acknowledged.actor == "bob"
    with pytest.raises(TypeError):
        after["INC-1043"] = after["INC-1042"]  # type: ignore[index]


@pytest.mark.anyio
@pytest.mark.subprocess
async def test_list_incidents_shows_an_acknowledgement_another_process_wrote(make_app: AppFactory, era: str) -> None:
    app = make_app()
    async with connect(build_server(app), era) as client:
        before = await client.call_tool("list_incidents", {})
        _acknowledge_elsewhere(Path(app.journal.location), app.desk_name)
        after = await client.call_tool("list_incidents", {})
    states = [
        {entry["id"]: entry["state"] for entry in listed.structured_content["incidents"]} for listed in (before, after)
    ]
    assert states == [{"INC-1042": "open", "INC-1043": "open"}, {"INC-1042": "acknowledged", "INC-1043": "open"}]
    assert "acknowledged by elsewhere" in text_of(after)


@pytest.mark.anyio
async def test_list_incidents_says_states_unknown_once_the_journal_breaks(make_app: AppFactory, era: str) -> None:
    app = make_app()
    path = Path(app.journal.location)
    async with connect(build_server(app), era) as client:
        before = await client.call_tool("list_incidents", {})
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        path.write_bytes(b"not a journal at all\n" * 200)
        after = await client.call_tool("list_incidents", {})
        filtered = await client.call_tool("list_incidents", {"state": "open"})
    assert {entry["state"] for entry in before.structured_content["incidents"]} == {"open"}
    assert not after.is_error
    assert {entry["state"] for entry in after.structured_content["incidents"]} == {"unknown"}
    assert "states unknown: " in text_of(after) and str(path) in text_of(after)
    assert filtered.is_error and "Cannot filter on state" in text_of(filtered)
