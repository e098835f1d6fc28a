"""psycopg is the ``postgres`` extra: a plain install runs without it, and a desk that needs it names the extra.

Each child runs with a ``sitecustomize`` that makes ``import psycopg`` fail, as on an install without the extra;
the doctor's handshake child inherits it.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.helpers import ROOT, child_env

pytestmark = pytest.mark.subprocess

# A port nothing listens on: the desk must stop at the missing driver, before any connection.
JOURNAL_URL = "postgresql://desk@127.0.0.1:9/desk"
EXTRA = 'pip install "incident-desk[postgres]"'
UV_EXTRA = 'uv tool install "incident-desk[postgres]"'


def _blocker(tmp_path: Path) -> dict[str, str]:
    """A child environment whose interpreter cannot import psycopg."""
    blocker = tmp_path / "no-psycopg"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text("import sys\n\nsys.modules['psycopg'] = None\n", encoding="utf-8")
    return child_env(tmp_path / "audit.sqlite3", PYTHONPATH=str(blocker))


def _without_psycopg(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "incident_desk", *args],
        capture_output=True,
        text=True,
        env=_blocker(tmp_path) | env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def test_the_blocker_really_hides_psycopg(tmp_path: Path) -> None:
    """Without this, the tests below would pass on a desk that never looked for psycopg at all."""
    probe = subprocess.run(
        [sys.executable, "-c", "import psycopg"],
        capture_output=True,
        text=True,
        env=_blocker(tmp_path),
        timeout=60,
        check=False,
    )
    assert probe.returncode != 0 and "psycopg" in probe.stderr


def test_a_postgres_desk_without_the_driver_names_the_extra_and_stops(tmp_path: Path) -> None:
    served = _without_psycopg(tmp_path, INCIDENT_DESK_AUDIT_DB=JOURNAL_URL)
    assert served.returncode == 2, served.stderr
    assert served.stdout == "", "stdout belongs to the protocol"
    assert EXTRA in served.stderr and UV_EXTRA in served.stderr
    assert "audit_db" in served.stderr
    assert "Traceback" not in served.stderr


@pytest.mark.parametrize("command", ["audit", "locks"])
def test_the_journal_commands_name_the_extra_too(tmp_path: Path, command: str) -> None:
    completed = _without_psycopg(
        tmp_path, command, *(["list"] if command == "locks" else []), INCIDENT_DESK_AUDIT_DB=JOURNAL_URL
    )
    assert completed.returncode == 2, completed.stderr
    assert completed.stdout == ""
    assert EXTRA in completed.stderr and "Traceback" not in completed.stderr


def test_doctor_fails_the_journal_check_naming_the_extra(tmp_path: Path) -> None:
    checked = _without_psycopg(tmp_path, "doctor", INCIDENT_DESK_AUDIT_DB=JOURNAL_URL)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    (journal_line,) = [line for line in checked.stdout.splitlines() if "] audit journal:" in line]
    assert journal_line.startswith("[FAIL] audit journal: ")
    assert EXTRA in journal_line and UV_EXTRA in journal_line
    assert "[skip] stdio handshake" in checked.stdout
    assert "1 check(s) failed" in checked.stdout
    assert "Traceback" not in checked.stderr


def test_a_sqlite_desk_runs_without_the_driver(tmp_path: Path) -> None:
    """The desktop install: doctor's handshake child serves the sample desk with psycopg unimportable."""
    checked = _without_psycopg(tmp_path, "doctor")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "[ok] stdio handshake" in checked.stdout
    assert "all checks passed" in checked.stdout


def test_psycopg_is_the_postgres_extra_and_the_tests_install_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not [dep for dep in project["dependencies"] if dep.startswith("psycopg")]
    assert sorted(dep.split(">")[0] for dep in project["optional-dependencies"]["postgres"]) == [
        "psycopg-pool",
        "psycopg[binary]",
    ]
    assert "incident-desk[postgres]" in project["optional-dependencies"]["test"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (install,) = [line for line in ci.splitlines() if "uv sync" in line and "--frozen" in line]
    assert "--extra postgres" in install, "the test run needs psycopg for tests/test_team_desk.py"
    assert '"/src[postgres]"' in (ROOT / "Containerfile").read_text(encoding="utf-8")
    guide = (ROOT / "docs" / "team-desk.md").read_text(encoding="utf-8")
    assert [line for line in guide.splitlines() if "bin/pip install" in line]
    assert all('".[postgres]"' in line for line in guide.splitlines() if "bin/pip install" in line)
