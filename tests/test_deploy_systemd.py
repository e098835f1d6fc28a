"""deploy/incident-desk@.service, checked offline by ``systemd-analyze verify``: no running systemd is needed.

verify loads the unit as systemd would (instance ``@1``), and warns on stderr, still exiting 0, about an unknown key
or a value it cannot parse; so a clean check is exit 0 and nothing on stderr. It also requires ExecStart's
binary to exist, so the check runs against a copy whose ExecStart names this checkout's installed command.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
SHIPPED_UNIT = ROOT / "deploy" / "incident-desk@.service"
INSTALLED_COMMAND = "/usr/local/bin/incident-desk"  # where docs/team-desk.md's guide installs the desk
LOCAL_COMMAND = Path(sys.executable).with_name("incident-desk")  # the console script `pip install -e` made

pytestmark = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze not found (Debian's systemd package; .ci/run installs it)"
)


def _verify(unit_text: str, directory: Path) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    (directory / "incident-desk@.service").write_text(unit_text, encoding="utf-8")
    return subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", str(directory / "incident-desk@1.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _runnable_here() -> str:
    """The shipped unit, its ExecStart pointed at this checkout's command (verify checks the binary exists)."""
    text = SHIPPED_UNIT.read_text(encoding="utf-8")
    assert f"ExecStart={INSTALLED_COMMAND} " in text
    assert LOCAL_COMMAND.exists(), f"{LOCAL_COMMAND} missing: install the project (pip install -e .)"
    return text.replace(f"ExecStart={INSTALLED_COMMAND} ", f"ExecStart={LOCAL_COMMAND} ")


def test_the_shipped_systemd_unit_verifies_without_a_warning(tmp_path: Path) -> None:
    checked = _verify(_runnable_here(), tmp_path)
    assert (checked.returncode, checked.stderr, checked.stdout) == (0, "", "")


@pytest.mark.parametrize(
    ("broken", "warning"),
    [
        (("Type=exec", "Typ=exec"), "Unknown key 'Typ' in section [Service]"),
        (("KillSignal=SIGTERM", "KillSignal=SIGTREM"), "Failed to parse signal name"),
        ((f"ExecStart={LOCAL_COMMAND} ", "ExecStart=/nonexistent/incident-desk "), "is not executable"),
    ],
)
def test_the_check_catches_a_broken_unit(tmp_path: Path, broken: tuple[str, str], warning: str) -> None:
    """The clean result above means something: the same check reports each of these mistakes."""
    text = _runnable_here()
    assert broken[0] in text
    checked = _verify(text.replace(broken[0], broken[1], 1), tmp_path)
    assert warning in checked.stderr, checked.stderr


POLKIT_RULE = ROOT / "deploy" / "incident-desk.polkit.rules"
# Runs the rule file as polkitd would, with a stand-in `polkit` object, and prints the answer to each request.
_POLKIT_HARNESS = """
const rules = [];
const polkit = { Result: { YES: "yes", NO: "no", NOT_HANDLED: null }, addRule: (rule) => rules.push(rule) };
eval(require("fs").readFileSync(process.argv[1], "utf8"));
const answers = JSON.parse(process.argv[2]).map(([id, user, verb, unit]) => {
  const action = { id, lookup: (key) => ({ verb, unit })[key] };
  return rules.map((rule) => rule(action, { user })).find((answer) => answer !== null) ?? null;
});
process.stdout.write(JSON.stringify(answers));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_polkit_rule_lets_the_desk_restart_its_units_and_nothing_else() -> None:
    """The restart example of docs/acts.md (systemctl restart payments-api) under the unit's NoNewPrivileges."""
    import json

    manage = "org.freedesktop.systemd1.manage-units"
    requests = [
        [manage, "incident-desk", "restart", "payments-api.service"],
        [manage, "incident-desk", "stop", "payments-api.service"],
        [manage, "incident-desk", "restart", "postgresql.service"],
        [manage, "someone-else", "restart", "payments-api.service"],
        ["org.freedesktop.systemd1.manage-unit-files", "incident-desk", "restart", "payments-api.service"],
    ]
    ran = subprocess.run(
        ["node", "-e", _POLKIT_HARNESS, str(POLKIT_RULE), json.dumps(requests)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == ["yes", None, None, None, None]


def test_the_unit_keeps_the_desks_state_where_it_may_write() -> None:
    text = SHIPPED_UNIT.read_text(encoding="utf-8")
    assert "StateDirectory=incident-desk" in text and "ProtectSystem=strict" in text
    assert "Environment=XDG_DATA_HOME=%S/incident-desk" in text, "the cursor key must land in the state directory"
