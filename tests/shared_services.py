"""Real services started once per test session (once per xdist worker), each test taking a part of its own.

Starting PostgreSQL (initdb and a server), headless Chromium or the oidc-provider issuer costs seconds of CPU; the
suite used to start them per module. A service is started the first time a test asks for it, so a worker that runs
no such test starts none, and stopped at the end of the session. What isolates tests is the part each one takes:

- ``postgres_database``: the URL of a new, empty database on the session's ``postgres_cluster`` (no password in
  it: give the desk ``PASSWORD`` of tests/postgres_cluster.py, as a user's environment would);
- ``browser``: the session's Chromium; ``browser.new_page()`` opens a tab in a new browser context, so no cookie is
  shared between pages;
- ``oidc_provider``: the session's issuer; people sign in afresh each time, and each test registers its own clients.

A test that uses one of them is marked ``service`` at collection (the fast lane, .ci/fast, leaves those to the
full lane). A test that stops or restarts its service (PostgreSQL going down mid-run, a browser's processes gone after a
failure) starts its own with ``running_cluster()``, ``launch()`` or ``run_provider()``, as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.browser import Browser, launch
from tests.oidc_provider import OpenIDProvider, run_provider
from tests.postgres_cluster import Cluster, running_cluster, unavailable_reason

SERVICES = ("postgres_cluster", "browser", "oidc_provider")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``service`` every test that asks for a shared service, directly or through another fixture."""
    for item in items:
        if any(name in SERVICES for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.service)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """One PostgreSQL cluster for the session; skips, saying why, where PostgreSQL cannot run."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with running_cluster() as running:
        yield running


@pytest.fixture
def postgres_database(postgres_cluster: Cluster) -> str:
    """The URL of a database of this test's own on the session's cluster."""
    return postgres_cluster.new_database(f"test_{uuid.uuid4().hex[:16]}")


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium for the session; skips, saying why, where chromium is not installed."""
    with launch(tmp_path_factory.mktemp("browser")) as running:
        yield running


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenIDProvider]:
    """One oidc-provider issuer for the session; skips, saying why, where node is not installed."""
    with run_provider(tmp_path_factory.mktemp("oidc-provider")) as running:
        yield running
