"""A real Prometheus Alertmanager (Debian's ``prometheus-alertmanager``) on a loopback port chosen at run time."""

from __future__ import annotations

import ctypes
import ctypes.util
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.helpers import free_port

BINARY = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
needs_alertmanager = pytest.mark.skipif(BINARY is None, reason="prometheus-alertmanager is not installed")


@dataclass
class Alertmanager:
    url: str
    process: subprocess.Popen[bytes]
    basic_auth: tuple[str, str] | None = None

    def post(self, *alerts: dict[str, Any]) -> None:
        response = httpx2.post(self.url + "/api/v2/alerts", json=list(alerts), timeout=5, auth=self.basic_auth)
        assert response.status_code == 200, response.text

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def alert(name: str, *, starts: datetime, ends: datetime | None = None, **labels: str) -> dict[str, Any]:
    summary = labels.pop("summary", None)
    body: dict[str, Any] = {"labels": {"alertname": name, **labels}, "startsAt": starts.isoformat()}
    if summary:
        body["annotations"] = {"summary": summary}
    if ends is not None:
        body["endsAt"] = ends.isoformat()
    return body


@dataclass
class CountingProxy:
    """A loopback HTTP proxy in front of Alertmanager counting the API reads it forwards (Alertmanager 0.25 does
    not count its API v2 requests in its own metrics)."""

    url: str
    alert_reads: int = 0


@contextmanager
def counting_proxy(upstream: str) -> Iterator[CountingProxy]:
    proxy = CountingProxy("")

    class Forward(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/api/v2/alerts"):
                proxy.alert_reads += 1
            body = httpx2.get(upstream + self.path, timeout=5).content
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()


def bcrypt_hash(password: str) -> str:
    """What Alertmanager's web config wants for a basic-auth user, from the C library's crypt (libxcrypt): no bcrypt
    package here, and Python 3.13 has no ``crypt`` module."""
    found = ctypes.util.find_library("crypt")
    if found is None:
        pytest.skip("no libcrypt here to hash a basic-auth password with bcrypt")
    libcrypt = ctypes.CDLL(found)
    libcrypt.crypt_gensalt.restype = ctypes.c_char_p
    libcrypt.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    libcrypt.crypt.restype = ctypes.c_char_p
    libcrypt.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = libcrypt.crypt_gensalt(b"$2b$", 0, None, 0)  # no random bytes given: libxcrypt reads the OS's own
    hashed: bytes | None = libcrypt.crypt(password.encode(), salt) if salt else None
    if not hashed or not hashed.startswith(b"$2b$"):
        raise AssertionError(f"libcrypt made no bcrypt hash (salt {salt!r}, hash {hashed!r})")
    return hashed.decode()


@contextmanager
def running_alertmanager(tmp_path: Path, basic_auth: tuple[str, str] | None = None) -> Iterator[Alertmanager]:
    assert BINARY is not None
    config = tmp_path / "alertmanager.yml"
    config.write_text("route:\n  receiver: nobody\nreceivers:\n  - name: nobody\n", encoding="utf-8")
    port = free_port()
    argv = [
        BINARY,
        f"--config.file={config}",
        f"--storage.path={tmp_path / 'alertmanager-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    if basic_auth is not None:
        web = tmp_path / "web.yml"
        web.write_text(f"basic_auth_users:\n  {basic_auth[0]}: '{bcrypt_hash(basic_auth[1])}'\n", encoding="utf-8")
        argv.append(f"--web.config.file={web}")
    process = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    manager = Alertmanager(f"http://127.0.0.1:{port}", process, basic_auth)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx2.get(manager.url + "/-/ready", timeout=1, auth=basic_auth).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("alertmanager did not start")
            time.sleep(0.1)
        yield manager
    finally:
        manager.stop()
