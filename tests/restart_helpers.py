"""restart_service test helpers: the designed form, a counting restart command, a scripted operator, the journal.

Every restart in the restart tests runs a script the test wrote, which appends one line to a file per execution
(the service, and the pid of the desk that ran it), so each test can count exactly how often, and where, something
was executed.
"""

from __future__ import annotations

import getpass
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult, ErrorData

from incident_desk.app import DeskApp
from incident_desk.core.journal.audit import Decision, Journal
from incident_desk.server import build_server
from tests.helpers import AppFactory

SERVICE = "payments-api"


QUESTION = "Restart payments-api? This drops in-flight requests."


# Written out, not imported: the form is what clients and people rely on, so a change to it must fail here.
EXPECTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "description": "Tick to approve the restart"},
        "ticket": {"type": "string", "description": "Change ticket number, e.g. CHG-2291"},
    },
    "required": ["confirm"],
}


APPROVER = f"os:{getpass.getuser()}"


PROTOCOL = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}


NO_CHANNEL = "ELICITATION_UNAVAILABLE -- refusing to restart payments-api without an approval channel"


RESTART_SCRIPT = """\
import os, sys, time
ran, sleep, code = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
desk = os.getppid()
try:  # on Linux the runner's guard shell stands between the desk and its command
    with open(f"/proc/{desk}/cmdline", "rb") as parent:
        if b"incident-desk-guard" in parent.read():
            with open(f"/proc/{desk}/stat", encoding="utf-8") as stat:
                desk = int(stat.read().rsplit(")", 1)[1].split()[1])
except OSError:
    pass
with open(ran, "a", encoding="utf-8") as f:
    f.write(os.environ.get("DESK_RESTART_SERVICE", "?") + " " + str(desk) + "\\n")
print("restarting", os.environ.get("DESK_RESTART_SERVICE"), flush=True)
time.sleep(sleep)
print("exit", code, flush=True)
sys.exit(code)
"""


@dataclass
class Restarts:
    """A restart command the test controls; ``executions()`` lists one service name per run, ``executed_by()``
    the desk process that ran it."""

    script: Path
    ran: Path

    def action(self, *, exit_code: int = 0, sleep: float = 0.0) -> dict[str, Any]:
        argv = [sys.executable, str(self.script), str(self.ran), str(sleep), str(exit_code)]
        return {"kind": "command", "argv": argv, "timeout_seconds": 30}

    def services(self, *names: str, exit_code: int = 0, sleep: float = 0.0) -> dict[str, Any]:
        return {name: self.action(exit_code=exit_code, sleep=sleep) for name in names or (SERVICE,)}

    def executions(self) -> list[str]:
        return [service for service, _ in self._lines()]

    def executed_by(self) -> list[int]:
        """The pid of the desk process that ran each restart, in order: which replica restarted."""
        return [int(desk_pid) for _, desk_pid in self._lines()]

    def _lines(self) -> list[tuple[str, str]]:
        lines = self.ran.read_text(encoding="utf-8").splitlines() if self.ran.exists() else []
        return [(service, desk_pid) for service, desk_pid in (line.rsplit(" ", 1) for line in lines)]


@pytest.fixture(name="restarts")
def restarts_fixture(tmp_path: Path) -> Restarts:
    script = tmp_path / "restart_cmd.py"
    script.write_text(RESTART_SCRIPT, encoding="utf-8")
    return Restarts(script=script, ran=tmp_path / "ran.txt")


class Operator:
    """The human behind the client: answers every approval question one way, and remembers each question."""

    def __init__(self, action: str = "accept", content: dict[str, Any] | None = None, *, delay: float = 0.0) -> None:
        self.action, self.content, self.delay = action, content, delay
        self.asked: list[ElicitRequestParams] = []
        self.answered = 0

    async def __call__(self, ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        self.asked.append(params)
        if self.delay:
            await anyio.sleep(self.delay)
        self.answered += 1
        return ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


def approve(ticket: str = "CHG-2291") -> Operator:
    return Operator("accept", {"confirm": True, "ticket": ticket})


def rows(journal: Journal) -> list[Decision]:
    """The journal, oldest first."""
    return list(reversed(journal.recent(1000)))


def outcomes(journal: Journal) -> list[str]:
    return [str(d.outcome) for d in rows(journal)]


def desk(make_app: AppFactory, **settings: Any) -> tuple[DeskApp, Any]:
    app = make_app(**settings)
    return app, build_server(app)
