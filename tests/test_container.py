"""The Containerfile, built and run with podman or docker, serving a handshake over Streamable HTTP.

The runtime is podman when installed, else docker when its daemon answers: a docker CLI without a running
daemon (as on a sandbox with only the client binary) cannot build, so the test skips and says which is missing.
The base image comes from Debian: the image named by ``INCIDENT_DESK_CONTAINER_BASE``, else
``localhost/debian:bookworm`` (a debootstrap rootfs imported as docs/container.md shows, where no registry is
reachable), else ``docker.io/library/debian:bookworm-slim``. The desk's wheels (and the build backend's) are built
on the host and installed in the image with ``--no-index``, so the build itself needs no network.

Under podman, where crun cannot start containers (cgroups v1/v2 hybrid hosts), runc is used when installed; the
open-file and process limits are set below the host's, which a host without CAP_SYS_RESOURCE cannot raise.
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

BASES = [
    *filter(None, [os.environ.get("INCIDENT_DESK_CONTAINER_BASE")]),
    "localhost/debian:bookworm",
    "docker.io/library/debian:bookworm-slim",
]
LIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
CONTEXT_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"
)


def _find_runtime() -> tuple[list[str], str]:
    """The engine's argv prefix, or an empty one and why none can build here."""
    podman = shutil.which("podman")
    if podman:
        return [podman, *(["--runtime", "runc"] if shutil.which("runc") else [])], ""
    docker = shutil.which("docker")
    if docker is None:
        return [], "no container runtime: neither podman nor docker is installed"
    try:
        info = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        return [], "docker's daemon does not answer `docker info` within 20 s"
    if info.returncode != 0:
        return [], f"docker is only a client here: its daemon does not answer ({info.stderr.strip()[-200:]})"
    return [docker], ""


RUNTIME, NO_RUNTIME = _find_runtime()
IS_PODMAN = bool(RUNTIME) and Path(RUNTIME[0]).name == "podman"


def _engine(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUNTIME, *args], capture_output=True, text=True, timeout=timeout)


def _base_image() -> str:
    for base in BASES:
        if _engine("image", "inspect", base).returncode == 0:
            return base
    pulled = _engine("pull", "--quiet", BASES[-1], timeout=300)
    if pulled.returncode != 0:
        pytest.skip(
            f"no Debian base image: none of {BASES} is local and {BASES[-1]} cannot be pulled "
            f"({pulled.stderr.strip()[-300:]}); make one with debootstrap (docs/container.md)"
        )
    return BASES[-1]


@pytest.mark.skipif(not RUNTIME, reason=NO_RUNTIME)
@pytest.mark.anyio
async def test_the_container_image_builds_from_debian_and_serves_a_handshake(tmp_path: Path) -> None:
    base = _base_image()
    context = tmp_path / "context"
    shutil.copytree(ROOT, context, ignore=CONTEXT_IGNORE)
    wheels = [str(ROOT), "hatchling>=1.25"]  # the desk and its build backend: the image installs from these alone
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(context / "wheels"), *wheels],
        check=True,
        capture_output=True,
        timeout=900,
    )
    tag = f"localhost/incident-desk-test:{__version__}"
    built = _engine(
        "build",
        *(["--format=docker"] if IS_PODMAN else []),  # podman drops the HEALTHCHECK from OCI images
        # A local base made with Python in it builds offline; a registry's slim Debian first needs apt.
        "--network=none" if base.startswith("localhost/") else "--network=host",
        *LIMITS,
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
    started = _engine(
        "run",
        "--detach",
        "--rm",
        "--name",
        name,
        "--network=host",
        *LIMITS,
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
            if time.monotonic() > deadline:
                logs = _engine("logs", name)
                pytest.fail(f"no /healthz within 60 s: {(logs.stdout + logs.stderr)[-3000:]}")
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
        user = _engine("exec", name, "id", "-u")
        assert user.stdout.strip() == "10001", "the desk runs as an unprivileged user"
    finally:
        _engine("stop", "-t", "5", name)
