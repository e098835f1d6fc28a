"""What the desk keeps is masked before it is stored or shown, not only where logs are read.

Secrets planted in a folder incident's title and resolution, an Alertmanager alert's summary and labels, a note, an
acknowledgement's note, a resolution, a silence's reason, a postmortem, a requester's reason and a change ticket
never come back on any path: list_incidents, incident://index, find_similar_incidents, the activity (tool and
resource), the timeline, the postmortem prompt and postmortem://, the audit log (tool, resource and the ``audit``
command), the approval question, nor the journal's files on disk or the silence Alertmanager keeps. Control and
bidirectional characters in notes and reasons come back as visible marks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from incident_desk.app import DeskApp
from incident_desk.cli.main import main
from incident_desk.core.neighbours import untrusted
from incident_desk.server import build_server
from tests.alertmanager import Alertmanager, alert, needs_alertmanager, running_alertmanager
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import approve
from tests.test_sources_alertmanager import STARTED, sources

pytestmark = pytest.mark.anyio

# Each secret is a shape the log rules already mask; each stands where one kind of kept text is written.
TITLE_SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
FOLDER_RESOLUTION_SECRET = "Tr0ub4dorXyz7"
ALERT_SUMMARY_SECRET = "AKIA" + "Q7R8S9T0U1V2W3X4"
LABEL_SECRET = "Zq9Lm2Pw7Xc4Vb"
NOTE_SECRET = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
ACK_SECRET = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
RESOLUTION_SECRET = "glpat-" + "Xy7Zq2Wv9Tr4Pm1Ks8Lb"
POSTMORTEM_SECRET = "S3cr3tPassw0rdPm"
REASON_SECRET = "hunter2hunter2Rs"
SILENCE_SECRET = "glpat-" + "Qw8Er7Ty6Ui5Op4As3Df"
TICKET_SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
FOLDER_SECRETS = (
    TITLE_SECRET,
    FOLDER_RESOLUTION_SECRET,
    NOTE_SECRET,
    ACK_SECRET,
    RESOLUTION_SECRET,
    POSTMORTEM_SECRET,
    REASON_SECRET,
    TICKET_SECRET,
)
# ESC (a terminal escape), BEL, a right-to-left override and a zero-width space.
CONTROLS = "\x1b[31m", "\x07", "\u202e", "\u200b"
MARKS = "␛[31m", "␇"


def _folder(root: Path) -> Path:
    for incident_id, title, status, resolution in (
        ("INC-7", f"Checkout down after deploy with token {TITLE_SECRET}", "resolved", FOLDER_RESOLUTION_SECRET),
        ("INC-8", "Checkout down again after deploy", "open", ""),
    ):
        entry = root / "incidents" / incident_id
        entry.mkdir(parents=True)
        resolved = f'resolution = "rotated the db password={resolution}"\n' if resolution else ""
        (entry / "incident.toml").write_text(
            f'title = "{title}"\nservice = "db"\nseverity = "SEV2"\nstatus = "{status}"\n'
            f"opened = 2026-11-30T10:00:00Z\n{resolved}",
            encoding="utf-8",
        )
        (entry / "log.txt").write_text("10:00 db checkout failing\n", encoding="utf-8")
    (root / "runbooks").mkdir()
    return root


def _leaks(text: str, secrets: tuple[str, ...]) -> list[str]:
    return [secret for secret in secrets if secret in text]


def _raw_controls(text: str) -> list[str]:
    return [char for char in CONTROLS if char in text]


async def _every_path(client: Any, incident_ids: list[str]) -> dict[str, str]:
    """What every reading path shows of the desk's kept text."""
    shown: dict[str, str] = {}
    listed = await client.call_tool("list_incidents", {"status": "all"})
    shown["list_incidents"] = text_of(listed) + json.dumps(listed.structured_content)
    shown["incident://index"] = text_of(await client.read_resource("incident://index"))
    by_words = await client.call_tool("find_similar_incidents", {"query": "Checkout down after deploy"})
    shown["similar by words"] = text_of(by_words) + json.dumps(by_words.structured_content)
    for incident_id in incident_ids:
        similar = await client.call_tool("find_similar_incidents", {"incidentId": incident_id})
        shown[f"similar to {incident_id}"] = text_of(similar) + json.dumps(similar.structured_content)
        activity = await client.call_tool("get_incident_activity", {"incidentId": incident_id})
        shown[f"activity of {incident_id}"] = text_of(activity) + json.dumps(activity.structured_content)
        shown[f"activity resource of {incident_id}"] = text_of(
            await client.read_resource(f"incident://{incident_id}/activity")
        )
        timeline = await client.call_tool("show_incident_timeline", {"incidentId": incident_id})
        shown[f"timeline of {incident_id}"] = text_of(timeline) + json.dumps(timeline.structured_content)
        try:
            prompt = await client.get_prompt("postmortem", {"incidentId": incident_id})
        except MCPError as exc:  # an alert whose service has no log source: the error is a path too
            shown[f"postmortem prompt of {incident_id}"] = str(exc)
        else:
            shown[f"postmortem prompt of {incident_id}"] = "\n".join(m.content.text for m in prompt.messages)
    audit = await client.call_tool("get_audit_log", {})
    shown["get_audit_log"] = text_of(audit) + json.dumps(audit.structured_content)
    shown["audit://recent"] = text_of(await client.read_resource("audit://recent"))
    return shown


def _journal_files(app: DeskApp) -> str:
    """Every byte of the journal's files (the database, its write-ahead log), as text."""
    path = Path(app.journal.location)
    return "".join(
        found.read_bytes().decode("latin-1") for found in path.parent.iterdir() if found.name.startswith(path.name)
    )


async def test_secrets_in_kept_text_never_come_back_on_any_path(
    make_app: AppFactory, tmp_path: Path, era: str, capsys: pytest.CaptureFixture[str]
) -> None:
    app = make_app(data_dir=_folder(tmp_path / "desk"), services={"db": {"kind": "simulate"}})
    server = build_server(app)
    answers: dict[str, str] = {}
    async with connect(server, era, elicitation_callback=approve("CHG-7")) as client:
        acked = await client.call_tool(
            "acknowledge_incident", {"incidentId": "INC-8", "note": f"on it, slack {ACK_SECRET}"}
        )
        noted = await client.call_tool(
            "add_incident_note",
            {"incidentId": "INC-8", "text": f"new key {NOTE_SECRET} {''.join(CONTROLS)} done"},
        )
        resolved = await client.call_tool(
            "resolve_incident",
            {
                "incidentId": "INC-8",
                "resolution": f"rotated {RESOLUTION_SECRET}",
                "reason": f"token={REASON_SECRET} {''.join(CONTROLS)}",
            },
        )
        saved = await client.call_tool(
            "save_postmortem",
            {"incidentId": "INC-8", "markdown": f"# Root cause\n\ndsn postgres://app:{POSTMORTEM_SECRET}@db/pay\n"},
        )
        for name, result in (("ack", acked), ("note", noted), ("resolve", resolved), ("postmortem", saved)):
            assert not result.is_error, (name, text_of(result))
            answers[name] = text_of(result) + json.dumps(result.structured_content)
    async with connect(server, era, elicitation_callback=approve(TICKET_SECRET)) as client:
        restarted = await client.call_tool("restart_service", {"service": "db"})
        answers["restart"] = text_of(restarted) + json.dumps(restarted.structured_content)
    assert app.memory is not None and app.memory.wait_idle()
    async with connect(server, era) as client:
        shown = await _every_path(client, ["INC-7", "INC-8"])
        shown["postmortem://INC-8"] = postmortem = text_of(await client.read_resource("postmortem://INC-8"))
    assert main(["audit"]) == 0
    shown["audit command"] = capsys.readouterr().out
    shown.update(answers)
    shown["the journal's files"] = _journal_files(app)
    leaked = {where: found for where, text in shown.items() if (found := _leaks(text, FOLDER_SECRETS))}
    assert leaked == {}
    raw = {where: found for where, text in answers.items() | shown.items() if (found := _raw_controls(text))}
    assert raw == {"the journal's files": ["\x07"]}  # a binary file's bytes; no path shows one
    # What is masked is still there to read, and the marks are visible.
    assert "Checkout down after deploy with token [REDACTED]" in shown["list_incidents"]
    assert "# Root cause\n\ndsn postgres://app:[REDACTED]@db/pay" in postmortem
    note_line = next(line for line in shown["activity resource of INC-8"].splitlines() if " note by " in line)
    assert note_line.endswith(f"new key [REDACTED] {MARKS[0]}{MARKS[1]}\ufffd\ufffd done"), note_line
    reason_line = next(line for line in shown["activity resource of INC-8"].splitlines() if "requested because" in line)
    assert "token=[REDACTED]" in reason_line
    assert "resolve by" in shown["activity resource of INC-8"] and "under CHG-7" in shown["activity resource of INC-8"]
    assert text_of(restarted).startswith("NOT RESTARTED -- a change ticket is required")


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    with running_alertmanager(tmp_path_factory.mktemp("am")) as running:
        yield running


@needs_alertmanager
async def test_secrets_in_an_alerts_summary_and_labels_never_come_back(
    make_app: AppFactory, manager: Alertmanager, tmp_path: Path, era: str
) -> None:
    manager.post(
        alert(
            "LedgerDown",
            starts=STARTED,
            service="ledger",
            severity="critical",
            db_password=LABEL_SECRET,
            summary=f"ledger refused key {ALERT_SUMMARY_SECRET}",
        )
    )
    app = make_app(data_dir=_folder(tmp_path / "desk"), incident_sources=sources(manager, cache_seconds=0))
    listing = await app.listing()
    (alert_id,) = [i.id for i in listing.incidents.values() if i.source != "folder" and i.service == "ledger"]
    operator = approve("CHG-7")
    async with connect(build_server(app), era, elicitation_callback=operator) as client:
        silenced = await client.call_tool(
            "silence_incident", {"incidentId": alert_id, "minutes": 10, "reason": f"rotating key {SILENCE_SECRET}"}
        )
    assert not silenced.is_error, text_of(silenced)
    assert app.memory is not None and app.memory.wait_idle()
    async with connect(build_server(app), era) as client:
        shown = await _every_path(client, [alert_id])
    shown["the journal's files"] = _journal_files(app)
    shown["the silence result"] = text_of(silenced) + json.dumps(silenced.structured_content)
    shown["the approval question"] = json.dumps([params.model_dump(mode="json") for params in operator.asked])
    # Its matchers carry the alert's own labels whole (the secret label was Alertmanager's before the desk saw it);
    # the comment, the desk's words, must not carry the reason's secret.
    kept_by_alertmanager = httpx2.get(manager.url + "/api/v2/silences", timeout=5).text
    assert SILENCE_SECRET not in kept_by_alertmanager and "rotating key [REDACTED]" in kept_by_alertmanager
    secrets = (ALERT_SUMMARY_SECRET, LABEL_SECRET, SILENCE_SECRET)
    leaked = {where: found for where, text in shown.items() if (found := _leaks(text, secrets))}
    assert leaked == {}
    assert "ledger refused key [REDACTED]" in shown["list_incidents"]
    assert "db_password=[REDACTED]" in shown[f"similar to {alert_id}"]
    # The alert's own labels stay whole inside the desk: a silence must match them exactly.
    assert dict(listing.incidents[alert_id].labels)["db_password"] == LABEL_SECRET


def test_the_marks_cover_controls_and_bidirectional_characters() -> None:
    hostile = "a\x1bb\x07c\u202ed\u2066e\u200bf\ufeffg\x00h\ni\u2028j"
    assert untrusted.one_line(hostile) == "a␛b␇c\ufffdd\ufffde\ufffdf\ufffdg␀h␊i\ufffdj"
    assert untrusted.masked_text("line one\x1b\n\tline two\u202e") == "line one␛\n\tline two\ufffd"
    assert untrusted.masked_line(f"key {TITLE_SECRET}\x07") == "key [REDACTED]␇"
