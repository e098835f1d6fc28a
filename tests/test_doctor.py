"""`incident-desk doctor` checks a real stdio handshake against itself and reports data problems.

The handshake (doctor starting a desk over stdio) is made by real processes twice in this module: once on the
sample desk, its report shared by the tests that read it (``sample_desk_report``), and once beside a broken data
entry. The other checks (keychain, log sources, settings, approvals) run doctor in this process with the handshake
left out: what they assert does not depend on it, and each real handshake costs two interpreters' start.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring.backends.fail
import pytest

from incident_desk.cli import doctor
from incident_desk.cli.main import main
from tests.fakes import using_keyring
from tests.helpers import ROOT, child_env


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


@pytest.fixture(scope="module")
def sample_desk_report(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """`incident-desk doctor` on the sample desk, run once as a process, handshake and all."""
    return _doctor(tmp_path_factory.mktemp("doctor"))


_NO_KEYCHAIN = keyring.backends.fail.Keyring()  # type: ignore[no-untyped-call]  # headless Linux's only backend


async def _no_handshake(*_: Any) -> list[str]:
    """Stands in for doctor's stdio handshake in the in-process runs: no problem found, none looked for."""
    return []


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """Runs doctor's checks in this process, its handshake left out; the exit code and what it printed."""
    monkeypatch.setattr(doctor, "_handshake", _no_handshake)

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        code = main(["doctor", *args])
        printed = capsys.readouterr()
        return subprocess.CompletedProcess(["doctor", *args], code, printed.out, printed.err)

    yield run


@pytest.mark.subprocess
def test_doctor_passes_on_the_sample_desk(sample_desk_report: subprocess.CompletedProcess[str]) -> None:
    completed = sample_desk_report
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "[ok] stdio handshake, tools/list, resources/read, stdout purity" in completed.stdout
    assert "all checks passed" in completed.stdout


@pytest.mark.subprocess
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


def test_a_missing_keychain_is_a_warning_when_no_secret_needs_it(in_process: Any) -> None:
    """Headless Linux has only keyring's fail backend; the stdio sample desk needs no secret from it."""
    with using_keyring(_NO_KEYCHAIN):
        completed = in_process()
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "[warn] keychain: " in completed.stdout
    assert "no configured secret needs it" in completed.stdout
    assert "all checks passed" in completed.stdout


def test_a_missing_keychain_fails_when_a_configured_secret_depends_on_it(in_process: Any) -> None:
    with using_keyring(_NO_KEYCHAIN):
        completed = in_process(env={"INCIDENT_DESK_PROVIDER": "anthropic", "INCIDENT_DESK_PROVIDER_MODEL": "claude-x"})
    assert completed.returncode == 1
    assert "[FAIL] keychain: " in completed.stdout
    assert "needed for the anthropic API key" in completed.stdout


@pytest.mark.subprocess
def test_doctor_names_what_the_desk_registers(
    tmp_path: Path, sample_desk_report: subprocess.CompletedProcess[str]
) -> None:
    """The line is generated from the registrations: every tool, resource and prompt, counted."""
    import anyio

    from incident_desk.assembly import build_app
    from incident_desk.server import build_server
    from incident_desk.settings.model import load_settings

    async def registered() -> tuple[list[str], list[str]]:
        server = build_server(build_app(load_settings({"audit_db": tmp_path / "probe.sqlite3"})))
        tools = [tool.name for tool in await server.list_tools()]
        resources = [str(resource.uri) for resource in await server.list_resources()]
        return tools, resources

    tools, resources = anyio.run(registered)
    completed = sample_desk_report
    assert completed.returncode == 0, completed.stdout + completed.stderr
    line = next(line for line in completed.stdout.splitlines() if "the desk serves" in line)
    assert "seven tools" not in line
    from incident_desk.cli.doctor import _NUMBER_WORDS

    number = _NUMBER_WORDS[len(tools)] if len(tools) < len(_NUMBER_WORDS) else str(len(tools))
    assert f"{number} tools ({', '.join(tools)})" in line
    for name in [*tools, *resources, "incident://{id}/log", "runbook://{service}", "postmortem"]:
        assert name in line


def test_doctor_warns_about_a_data_dir_without_incidents(tmp_path: Path, in_process: Any) -> None:
    root = tmp_path / "desk"
    (root / "runbooks").mkdir(parents=True)
    completed = in_process("--data-dir", str(root))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert f"[warn] data directory incidents/: {root / 'incidents'} does not exist" in completed.stdout


def test_doctor_checks_each_log_source(tmp_path: Path, in_process: Any) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "api.log").write_text("INFO up\n")
    config = tmp_path / "desk.toml"
    config.write_text(
        f'[services.api.logs]\nkind = "files"\npaths = ["{logs}/api*.log"]\n'
        f'[services.web.logs]\nkind = "files"\npaths = ["{logs}/web*.log"]\n'
        '[services.jobs.logs]\nkind = "command"\nargv = ["no-such-program-for-doctor", "{service}"]\n'
        '[services.shell.logs]\nkind = "command"\nargv = ["cat", "/dev/null"]\n'
    )
    completed = in_process("--config", str(config))
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert "[ok] log source of api: files: 1 file(s) match" in completed.stdout
    assert f"[FAIL] log source of web: files: no file matches {logs}/web*.log" in completed.stdout
    assert "[FAIL] log source of jobs: command: no-such-program-for-doctor is not found" in completed.stdout
    assert "[ok] log source of shell: command: runs " in completed.stdout


def test_doctor_warns_about_an_unknown_desk_variable(tmp_path: Path, in_process: Any) -> None:
    completed = in_process(env={"INCIDENT_DESK_DATADIR": str(tmp_path)})
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert (
        "[warn] environment: INCIDENT_DESK_DATADIR is not a setting of this desk and is ignored; did you mean "
        "INCIDENT_DESK_DATA_DIR?" in completed.stdout
    )


@pytest.mark.subprocess
def test_doctor_says_how_each_act_is_approved(
    tmp_path: Path, sample_desk_report: subprocess.CompletedProcess[str], in_process: Any
) -> None:
    plain = sample_desk_report
    assert "  - approvals: every act in band" in plain.stdout
    config = tmp_path / "desk.toml"
    config.write_text('[act_approval]\nrestart = "out-of-band"\n[services.search-api]\napproval = "out-of-band"\n')
    completed = in_process("--config", str(config))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert (
        "  - approvals on the desk's page instead: restart: out-of-band; service search-api: out-of-band"
        in completed.stdout
    )
    assert "APPROVAL PENDING" in completed.stdout and "every act in band" not in completed.stdout
