"""`incident-desk doctor` checks a real stdio handshake against itself and reports data problems."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, child_env

pytestmark = pytest.mark.subprocess


def _doctor(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = child_env(tmp_path / "audit.sqlite3", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "incident_desk", "doctor", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_doctor_passes_on_the_sample_desk(tmp_path: Path) -> None:
    completed = _doctor(tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "[ok] stdio handshake, tools/list, resources/read, stdout purity" in completed.stdout
    assert "all checks passed" in completed.stdout


def test_doctor_reports_a_broken_data_entry(tmp_path: Path) -> None:
    root = tmp_path / "desk"
    (root / "incidents" / "INC-1").mkdir(parents=True)
    (root / "incidents" / "INC-1" / "incident.toml").write_text("not = [toml\n")
    completed = _doctor(tmp_path, "--data-dir", str(root))
    assert completed.returncode == 1
    assert "[FAIL] data entry incidents/INC-1" in completed.stdout
    assert "skipped data entry" not in completed.stdout, "the desk's own log lines belong on stderr"
    assert "skipped data entry" in completed.stderr
    assert "[ok] stdio handshake" in completed.stdout, "one bad entry must not stop the desk from serving"


def test_a_missing_keychain_is_a_warning_when_no_secret_needs_it(tmp_path: Path) -> None:
    """Headless Linux has only keyring's fail backend; the stdio sample desk needs no secret from it."""
    completed = _doctor(tmp_path, env={"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"})
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "[warn] keychain: " in completed.stdout
    assert "no configured secret needs it" in completed.stdout
    assert "all checks passed" in completed.stdout


def test_a_missing_keychain_fails_when_a_configured_secret_depends_on_it(tmp_path: Path) -> None:
    completed = _doctor(
        tmp_path,
        env={
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
            "INCIDENT_DESK_PROVIDER": "anthropic",
            "INCIDENT_DESK_PROVIDER_MODEL": "claude-x",
        },
    )
    assert completed.returncode == 1
    assert "[FAIL] keychain: " in completed.stdout
    assert "needed for the anthropic API key" in completed.stdout
