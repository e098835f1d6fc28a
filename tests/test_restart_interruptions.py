"""Interrupted restarts: a cancelled call, a client killed mid-approval, a server SIGKILLed after an answer.

Nothing unapproved runs, a late answer is ignored, and every decision already made is in the journal.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from incident_desk.cli.main import main as cli_main
from incident_desk.core.journal.audit import AuditJournal
from tests.helpers import ROOT, AppFactory, child_env, connect
from tests.restart_helpers import (
    APPROVER,
    EXPECTED_SCHEMA,
    QUESTION,
    SERVICE,
    Operator,
    Restarts,
    approve,
    desk,
    outcomes,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
    rows,
)

pytestmark = pytest.mark.anyio


async def test_a_call_cancelled_mid_restart_journals_the_killed_restart(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services(sleep=20))
    async with connect(server, era, elicitation_callback=approve()) as client:
        with anyio.move_on_after(1.0):
            await client.call_tool("restart_service", {"service": SERVICE})
        deadline = time.monotonic() + 5
        while len(rows(app.journal)) < 2 and time.monotonic() < deadline:
            await anyio.sleep(0.05)
    assert restarts.executions() == [SERVICE]
    approved, failed = rows(app.journal)
    assert (approved.outcome, failed.outcome, failed.ticket) == ("approved", "failed", "CHG-2291")
    assert "cancelled" in failed.detail


async def test_a_call_cancelled_while_the_question_is_open_is_journalled(
    make_app: AppFactory, restarts: Restarts
) -> None:
    """Legacy only: in 2026-07-28 no call stays open while the human thinks."""
    app, server = desk(make_app, services=restarts.services())
    operator = Operator("accept", {"confirm": True, "ticket": "CHG-2291"}, delay=3)
    async with connect(server, "legacy", elicitation_callback=operator) as client:
        with anyio.move_on_after(0.5):
            await client.call_tool("restart_service", {"service": SERVICE})
        deadline = time.monotonic() + 5
        while not rows(app.journal) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
    assert len(operator.asked) == 1
    assert restarts.executions() == []
    (row,) = rows(app.journal)
    assert (row.outcome, row.detail) == ("disconnected", "the call was cancelled while the question was open")


class RawDesk:
    """``python -m incident_desk`` driven by hand over stdio, one JSON-RPC message a line."""

    def __init__(self, tmp_path: Path, services: dict[str, Any], **settings: Any) -> None:
        self.audit = tmp_path / "journal" / "audit.sqlite3"
        config = tmp_path / "desk.toml"
        lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
        for name, action in services.items():
            lines += [f'[services."{name}"]', f'kind = "{action["kind"]}"', f"argv = {json.dumps(action['argv'])}"]
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        env = child_env(self.audit)
        self.stderr_path = tmp_path / "desk-stderr.log"
        self._stderr = self.stderr_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "incident_desk", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            cwd=ROOT,
            env=env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.process.stdin.flush()

    def receive(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            line = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line is not None, f"the desk closed stdout; stderr:\n{self.stderr()}"
            message: dict[str, Any] = json.loads(line)
            if predicate(message):
                return message

    def result(self, request_id: int) -> dict[str, Any]:
        message = self.receive(lambda m: m.get("id") == request_id and "method" not in m)
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result

    def question(self) -> dict[str, Any]:
        return self.receive(lambda m: m.get("method") == "elicitation/create")

    def initialize(self) -> None:
        capabilities: dict[str, Any] = {"elicitation": {"form": {}}}
        info = {"name": "raw", "version": "1"}
        self.send(
            {
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": info},
            }
        )
        assert self.result(1)["protocolVersion"] == "2025-11-25"
        self.send({"method": "notifications/initialized"})

    def call_restart(self, request_id: int, service: str = SERVICE) -> None:
        params = {"name": "restart_service", "arguments": {"service": service}}
        self.send({"id": request_id, "method": "tools/call", "params": params})

    def answer(self, question: dict[str, Any], action: str, content: dict[str, Any] | None = None) -> None:
        result: dict[str, Any] = {"action": action}
        if content is not None:
            result["content"] = content
        self.send({"id": question["id"], "result": result})

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._reader.join(timeout=30)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()
        self._stderr.close()


@pytest.fixture
def raw_desks() -> Any:
    started: list[RawDesk] = []
    yield started
    for raw in started:
        raw.close()


def _text(result: dict[str, Any]) -> str:
    (content,) = result["content"]
    return str(content["text"])


@pytest.mark.subprocess
def test_client_killed_mid_approval_restarts_nothing(tmp_path: Path, restarts: Restarts, raw_desks: Any) -> None:
    raw = RawDesk(tmp_path, restarts.services())
    raw_desks.append(raw)
    raw.initialize()
    raw.call_restart(2)
    question = raw.question()
    first_line, preview = question["params"]["message"].split("\n")
    assert first_line == QUESTION and preview == f"Will run: {restarts.services()[SERVICE]['argv']}"
    assert question["params"]["requestedSchema"] == EXPECTED_SCHEMA
    assert raw.process.stdin is not None
    raw.process.stdin.close()  # the client dies: its end of the pipe closes with the question open
    assert raw.process.wait(timeout=30) == 0, raw.stderr()
    assert restarts.executions() == []
    (row,) = rows(AuditJournal(raw.audit))
    assert (row.outcome, row.service, row.ticket) == ("disconnected", SERVICE, None)
    assert row.detail == "the client disconnected while the question was open"


@pytest.mark.subprocess
def test_one_timed_out_approval_does_not_stop_the_next_call(tmp_path: Path, restarts: Restarts, raw_desks: Any) -> None:
    raw = RawDesk(tmp_path, restarts.services(), approval_timeout_seconds=0.5)
    raw_desks.append(raw)
    raw.initialize()
    raw.call_restart(2)
    unanswered = raw.question()
    assert _text(raw.result(2)) == "NOT RESTARTED -- no answer within 0.5s"
    raw.answer(unanswered, "accept", {"confirm": True, "ticket": "CHG-LATE"})  # too late: must be ignored
    raw.call_restart(3)
    question = raw.question()
    assert question["id"] != unanswered["id"]
    raw.answer(question, "accept", {"confirm": True, "ticket": "CHG-2291"})
    assert _text(raw.result(3)).startswith("RESTARTED payments-api under CHG-2291\ncommand exited 0")
    assert raw.process.stdin is not None
    raw.process.stdin.close()
    assert raw.process.wait(timeout=30) == 0, raw.stderr()
    assert restarts.executions() == [SERVICE]
    assert outcomes(AuditJournal(raw.audit)) == ["timed_out", "approved", "executed"]
    assert "CHG-LATE" not in raw.stderr()


@pytest.mark.subprocess
@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")
def test_decisions_survive_sigkill_right_after_the_answer(
    tmp_path: Path, restarts: Restarts, raw_desks: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = RawDesk(tmp_path, restarts.services())
    raw_desks.append(raw)
    raw.initialize()
    raw.call_restart(2)
    raw.answer(raw.question(), "decline")
    assert _text(raw.result(2)) == "NOT RESTARTED -- operator declined"
    raw.process.send_signal(signal.SIGKILL)  # no shutdown, no flush: only what was committed survives
    assert raw.process.wait(timeout=30) == -signal.SIGKILL
    (declined,) = rows(AuditJournal(raw.audit))
    assert (declined.outcome, declined.service, declined.approver) == ("declined", SERVICE, APPROVER)

    raw = RawDesk(tmp_path, restarts.services())  # the same journal, a new server
    raw_desks.append(raw)
    raw.initialize()
    raw.call_restart(2)
    raw.answer(raw.question(), "accept", {"confirm": True, "ticket": "CHG-2291"})
    assert _text(raw.result(2)).startswith("RESTARTED payments-api under CHG-2291\n")
    raw.process.send_signal(signal.SIGKILL)
    assert raw.process.wait(timeout=30) == -signal.SIGKILL
    assert outcomes(AuditJournal(raw.audit)) == ["declined", "approved", "executed"]
    assert restarts.executions() == [SERVICE]

    assert cli_main(["audit", "--audit-db", str(raw.audit)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[3] for line in table[2:]] == ["executed", "approved", "declined"]
