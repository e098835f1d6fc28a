"""The Containerfile, built and run with Debian's podman, serving a handshake over Streamable HTTP.

The base image comes from Debian: ``docker.io/library/debian:bookworm-slim`` by default, or the image named by
``INCIDENT_DESK_CONTAINER_BASE`` (a rootfs made by debootstrap and ``podman import``-ed, where no registry is
reachable). The desk's wheels are built on the host and installed in the image with ``--no-index``, so the build
itself needs no network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from incident_desk import __version__
from tests.helpers import ROOT, free_port, text_of
from tests.http_desk import TOKEN

pytestmark = [pytest.mark.slow, pytest.mark.http, pytest.mark.timeout(1800)]

PODMAN = shutil.which("podman")
BASE = os.environ.get("INCIDENT_DESK_CONTAINER_BASE", "docker.io/library/debian:bookworm-slim")
CONTEXT_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"
)


def _podman(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    assert PODMAN is not None
    return subprocess.run([PODMAN, *args], capture_output=True, text=True, timeout=timeout)


def _base_image() -> str:
    if _podman("image", "exists", BASE).returncode == 0:
        return BASE
    pulled = _podman("pull", "--quiet", BASE, timeout=300)
    if pulled.returncode != 0:
        pytest.skip(
            f"no Debian base image: {BASE} is not local and cannot be pulled ({pulled.stderr.strip()[-300:]}); "
            "import one made by debootstrap and name it in INCIDENT_DESK_CONTAINER_BASE"
        )
    return BASE


@pytest.mark.skipif(PODMAN is None, reason="podman is not installed (Debian package podman)")
@pytest.mark.anyio
async def test_the_container_image_builds_from_debian_and_serves_a_handshake(tmp_path: Path) -> None:
    base = _base_image()
    context = tmp_path / "context"
    shutil.copytree(ROOT, context, ignore=CONTEXT_IGNORE)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(context / "wheels"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=900,
    )
    tag = f"localhost/incident-desk-test:{__version__}"
    built = _podman(
        "build",
        "--network=none",
        "--build-arg",
        f"BASE={base}",
        "--build-arg",
        "PIP_OPTIONS=--no-index --find-links=/src/wheels",
        "-t",
        tag,
        "-f",
        str(context / "Containerfile"),
        str(context),
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    port = free_port()
    name = f"incident-desk-test-{port}"
    started = _podman(
        "run",
        "--detach",
        "--rm",
        "--name",
        name,
        "--network=host",
        "-e",
        f"INCIDENT_DESK_PORT={port}",
        "-e",
        f"INCIDENT_DESK_HTTP_TOKEN={TOKEN}",
        "-e",
        'INCIDENT_DESK_ALLOWED_HOSTS=["127.0.0.1:*"]',
        tag,
    )
    assert started.returncode == 0, started.stderr
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, _podman("logs", name).stderr[-3000:]
            time.sleep(0.5)
        assert httpx2.post(url + "/mcp", json={}, timeout=5).status_code == 401
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
            Client(streamable_http_client(url + "/mcp", http_client=http), mode="legacy") as client,
        ):
            assert client.server_info is not None
            assert client.server_info.version == __version__
            index = text_of(await client.read_resource("incident://index"))
        assert index.split() == ["INC-1042", "INC-1043"]
        user = _podman("exec", name, "id", "-u")
        assert user.stdout.strip() == "10001", "the desk runs as an unprivileged user"
    finally:
        _podman("stop", "--time", "5", name)
