"""A throwaway PostgreSQL cluster for tests: Debian's binaries, a temp dir, a loopback port chosen at run time.

PostgreSQL refuses to run as root, so under root (CI) the cluster runs as the ``postgres`` user. It requires a
password (scram), so the desks under test prove they take it from the environment, never from the URL.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.helpers import free_port


def _debian_pg_bin() -> Path:
    """The newest Debian PostgreSQL's binaries (or INCIDENT_DESK_TEST_PG_BIN)."""
    if "INCIDENT_DESK_TEST_PG_BIN" in os.environ:
        return Path(os.environ["INCIDENT_DESK_TEST_PG_BIN"])
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    return found[-1] if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _debian_pg_bin()
PASSWORD = "desk-test-password-4f1c"  # a throwaway cluster's password, never a real one
USER = "postgres"


def unavailable_reason() -> str | None:
    """Why these tests cannot run here, or None."""
    if not (PG_BIN / "postgres").exists() or not (PG_BIN / "initdb").exists():
        return f"PostgreSQL binaries not found in {PG_BIN} (.ci/run installs Debian's postgresql)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run PostgreSQL as"
    return None


def _as_postgres() -> dict[str, Any]:
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}


@dataclass
class Cluster:
    directory: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    databases: list[str] = field(default_factory=list)

    def url(self, database: str = "postgres") -> str:
        """The URL a desk is given: no password in it."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres") -> psycopg.Connection[Any]:
        return psycopg.connect(self.url(database), password=PASSWORD, autocommit=True, connect_timeout=5)

    def new_database(self, name: str) -> str:
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def start(self) -> None:
        """Start (or start again, on the same port when it has one); retry on a new port if another took it."""
        for _ in range(5):
            port = self.port or free_port()
            log = (self.directory / "log").open("ab")
            self.process = subprocess.Popen(
                [
                    str(PG_BIN / "postgres"),
                    "-D",
                    str(self.directory / "data"),
                    "-p",
                    str(port),
                    "-k",
                    str(self.directory),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-F",  # fsync off: a test cluster
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                **_as_postgres(),
            )
            log.close()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    psycopg.connect(
                        f"postgresql://{USER}@127.0.0.1:{port}/postgres", password=PASSWORD, connect_timeout=2
                    ).close()
                except psycopg.OperationalError:
                    time.sleep(0.05)
                    continue
                self.port = port
                return
            self.stop()
            if self.port:  # started again on its own port, which the desks know: no other port will do
                break
        raise RuntimeError(f"PostgreSQL did not start: {(self.directory / 'log').read_text()[-2000:]}")

    def stop(self) -> None:
        """Fast shutdown (SIGINT): SIGTERM would wait for the desks' pooled connections to leave."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@contextmanager
def running_cluster() -> Iterator[Cluster]:
    directory = Path(tempfile.mkdtemp(prefix="desk-pg-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(directory, "postgres", "postgres")
        pwfile = directory / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            shutil.chown(pwfile, "postgres", "postgres")
        subprocess.run(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(directory / "data"),
                "-U",
                USER,
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            **_as_postgres(),
        )
        cluster = Cluster(directory)
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
