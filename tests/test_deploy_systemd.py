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
INSTALLED_COMMAND = "/usr/local/bin/incident-desk"  # where the README's guide installs the desk
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
