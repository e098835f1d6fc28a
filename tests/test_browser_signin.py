"""The browser tooling the out-of-band approval tests stand on: headless Chromium (tests/browser.py) signs people in
at the oidc-provider test issuer with authorization code + PKCE and lands on a loopback callback, and no wait of the
driver can hang a test.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.browser import AsyncPage, Browser, BrowserError, BrowserTimeout, launch, live_processes
from tests.oidc_provider import OpenIDProvider, claims_of, run_provider


@dataclass
class Callback:
    """A loopback redirect target that records each query it is sent and shows a page saying so."""

    url: str
    queries: list[dict[str, str]] = field(default_factory=list)


@contextmanager
def callback_server(path: str = "/callback") -> Iterator[Callback]:
    callback = Callback("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path != path:
                self.send_error(404)
                return
            query = {name: values[0] for name, values in parse_qs(parts.query).items()}
            callback.queries.append(query)
            body = f"<html><body><h1>Signed in</h1><p>state {query.get('state')}</p></body></html>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the test reads what it needs from ``callback.queries``."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    callback.url = f"http://127.0.0.1:{server.server_address[1]}{path}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield callback
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def silent_server() -> Iterator[str]:
    """A loopback HTTP server that accepts connections and never answers: a page that never loads."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/never"
    finally:
        stop.set()
        thread.join(timeout=10)
        for connection in accepted:
            connection.close()
        listener.close()


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenIDProvider]:
    with run_provider(tmp_path_factory.mktemp("provider")) as running:
        yield running


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with launch(tmp_path_factory.mktemp("browser")) as running:
        yield running


def _sign_in(provider: OpenIDProvider, browser: Browser, user: str, confidential: bool) -> tuple[dict[str, str], str]:
    """One person's whole sign-in in a fresh browser context; the callback's query and the ID token's subject."""
    with callback_server() as callback:
        client = provider.register_client(callback.url, confidential=confidential)
        authorization = provider.authorization(client)
        page = browser.new_page()
        page.open(authorization.url)
        assert "Sign-in" in page.text(), page.text()
        landed = provider.sign_in_with_browser(page, user)
        assert landed.startswith(callback.url + "?"), landed
        assert page.text().startswith("Signed in"), page.text()
        [query] = callback.queries
        assert query["state"] == authorization.state and query["iss"] == provider.issuer, query
        tokens = provider.exchange_code(client, query["code"], authorization)
        claims = provider.id_token_claims(tokens["id_token"], client, nonce=authorization.nonce)
        return query, claims["sub"] + " " + claims["preferred_username"]


def test_bob_signs_in_with_code_and_pkce_and_the_id_token_names_him(provider: OpenIDProvider, browser: Browser) -> None:
    _, bob = _sign_in(provider, browser, "bob", confidential=False)
    assert bob == "bob bob@example.test" == f"{claims_of('bob')['sub']} {claims_of('bob')['preferred_username']}"


def test_two_people_in_one_browser_do_not_share_a_session(provider: OpenIDProvider, browser: Browser) -> None:
    """Each page is its own browser context: bob's sign-in after alice's still asks for a login, and each ID token
    (one through a confidential client) names its own person."""
    _, alice = _sign_in(provider, browser, "alice", confidential=True)
    _, bob = _sign_in(provider, browser, "bob", confidential=False)
    assert (alice, bob) == ("alice alice@example.test", "bob bob@example.test")


def test_the_code_is_useless_without_the_pkce_verifier(provider: OpenIDProvider, browser: Browser) -> None:
    with callback_server() as callback:
        client = provider.register_client(callback.url)
        authorization = provider.authorization(client)
        page = browser.new_page()
        page.open(authorization.url)
        provider.sign_in_with_browser(page, "bob")
        code = callback.queries[0]["code"]
        forged = type(authorization)(authorization.url, "a-verifier-the-attacker-guessed-" * 2, "s", "n")
        with pytest.raises(AssertionError, match="invalid_grant"):
            provider.exchange_code(client, code, forged)
        cookies = {cookie["name"] for cookie in page.cookies()}
        assert "_session" in cookies, cookies  # the provider's session cookie, read from the browser


def test_a_page_that_never_loads_fails_in_bounded_time_naming_what_was_awaited(browser: Browser) -> None:
    page = browser.new_page()
    with silent_server() as never:
        started = time.monotonic()
        with pytest.raises(BrowserTimeout, match=re.escape(f"waited 2.0 s for {never} to load")):
            page.open(never, timeout=2)
        assert time.monotonic() - started < 15
    with callback_server() as callback:  # the same page still works after a timed-out navigation
        page.open(callback.url + "?state=after")
        assert page.text() == "Signed in\n\nstate after"
    started = time.monotonic()
    with pytest.raises(BrowserTimeout, match=r"waited 1\.0 s for the text 'Approved'.*says: 'Signed in"):
        page.wait_for_text("Approved", timeout=1)
    assert time.monotonic() - started < 15
    with pytest.raises(BrowserTimeout, match="'#approve' to be visible; last: Error: no element matches"):
        page.click("#approve", timeout=1)


def test_a_refused_connection_is_a_clear_error(browser: Browser) -> None:
    page = browser.new_page()
    with socket.create_server(("127.0.0.1", 0)) as closed:
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/"
    with pytest.raises(BrowserError, match="ERR_CONNECTION_REFUSED"):
        page.open(url, timeout=10)


def test_the_browser_and_its_profile_are_gone_after_the_block_even_on_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="the test failed"), launch(tmp_path) as running:
        pid = running.process.pid
        [root] = list(tmp_path.iterdir())
        assert (root / "profile").is_dir() and pid in live_processes(pid)
        raise RuntimeError("the test failed")
    assert list(tmp_path.iterdir()) == []
    assert live_processes(pid) == []


@pytest.mark.anyio
async def test_an_async_test_drives_a_page_while_its_loop_serves(browser: Browser) -> None:
    """An async test keeps its event loop free while the browser works (AsyncPage runs calls in a thread)."""
    page = AsyncPage(browser.new_page())
    with callback_server() as callback:
        await page.open(callback.url + "?state=async")
        assert await page.url() == callback.url + "?state=async"
        assert await page.evaluate("document.querySelector('h1').textContent") == "Signed in"
