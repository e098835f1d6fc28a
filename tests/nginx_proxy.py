"""Debian's nginx in front of desk replicas, for tests: the shipped deploy/nginx.conf on loopback ports chosen now."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import ROOT, free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SHIPPED = ROOT / "deploy" / "nginx.conf"


def unavailable_reason() -> str | None:
    if not Path(NGINX).exists():
        return "nginx not found (.ci/run installs Debian's nginx)"
    return None


def site_config(listen_port: int, replica_ports: Sequence[int]) -> str:
    """deploy/nginx.conf with its example ports (8080; 8001, 8002) replaced by the ports of this run."""
    text = SHIPPED.read_text(encoding="utf-8")
    text = text.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{listen_port};")
    for index, port in enumerate(replica_ports, start=1):
        text = re.sub(rf"127\.0\.0\.1:800{index}\b", f"127.0.0.1:{port}", text)
    return text


@contextmanager
def running_nginx(replica_ports: Sequence[int]) -> Iterator[str]:
    """nginx in the foreground in a temp dir; yields the balanced ``/mcp`` URL."""
    directory = Path(tempfile.mkdtemp(prefix="desk-nginx-"))
    port = free_port()
    (directory / "site.conf").write_text(site_config(port, replica_ports), encoding="utf-8")
    temp_paths = "\n".join(
        f"    {kind}_temp_path {directory / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (directory / "nginx.conf").write_text(
        f"""{"user root;" if os.geteuid() == 0 else ""}
daemon off;
worker_processes 1;
pid {directory / "nginx.pid"};
error_log {directory / "error.log"} warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
{temp_paths}
    include {directory / "site.conf"};
}}
""",
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [NGINX, "-p", str(directory), "-c", str(directory / "nginx.conf"), "-e", str(directory / "error.log")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    error = process.stderr.read().decode() if process.stderr else ""
                    raise AssertionError(f"nginx did not start: {error}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()
        shutil.rmtree(directory, ignore_errors=True)
