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
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream

from tests.browser import AsyncPage, Browser, BrowserError, BrowserTimeout, launch, live_processes
from tests.oidc_provider import OpenIDProvider, claims_of


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


def _sign_in(
    oidc_provider: OpenIDProvider, browser: Browser, user: str, confidential: bool
) -> tuple[dict[str, str], str]:
    """One person's whole sign-in in a fresh browser context; the callback's query and the ID token's subject."""
    with callback_server() as callback:
        client = oidc_provider.register_client(callback.url, confidential=confidential)
        authorization = oidc_provider.authorization(client)
        page = browser.new_page()
        page.open(authorization.url)
        assert "Sign-in" in page.text(), page.text()
        landed = oidc_provider.sign_in_with_browser(page, user)
        assert landed.startswith(callback.url + "?"), landed
        assert page.text().startswith("Signed in"), page.text()
        [query] = callback.queries
        assert query["state"] == authorization.state and query["iss"] == oidc_provider.issuer, query
        tokens = oidc_provider.exchange_code(client, query["code"], authorization)
        claims = oidc_provider.id_token_claims(tokens["id_token"], client, nonce=authorization.nonce)
        return query, claims["sub"] + " " + claims["preferred_username"]


def test_bob_signs_in_with_code_and_pkce_and_the_id_token_names_him(
    oidc_provider: OpenIDProvider, browser: Browser
) -> None:
    _, bob = _sign_in(oidc_provider, browser, "bob", confidential=False)
    assert bob == "bob bob@example.test" == f"{claims_of('bob')['sub']} {claims_of('bob')['preferred_username']}"


def test_two_people_in_one_browser_do_not_share_a_session(oidc_provider: OpenIDProvider, browser: Browser) -> None:
    """Each page is its own browser context: bob's sign-in after alice's still asks for a login, and each ID token
    (one through a confidential client) names its own person."""
    _, alice = _sign_in(oidc_provider, browser, "alice", confidential=True)
    _, bob = _sign_in(oidc_provider, browser, "bob", confidential=False)
    assert (alice, bob) == ("alice alice@example.test", "bob bob@example.test")


def test_the_code_is_useless_without_the_pkce_verifier(oidc_provider: OpenIDProvider, browser: Browser) -> None:
    with callback_server() as callback:
        client = oidc_provider.register_client(callback.url)
        authorization = oidc_provider.authorization(client)
        page = browser.new_page()
        page.open(authorization.url)
        oidc_provider.sign_in_with_browser(page, "bob")
        code = callback.queries[0]["code"]
        forged = type(authorization)(authorization.url, "a-verifier-the-attacker-guessed-" * 2, "s", "n")
        with pytest.raises(AssertionError, match="invalid_grant"):
            oidc_provider.exchange_code(client, code, forged)
        cookies = {cookie["name"] for cookie in page.cookies()}
        assert "_session" in cookies, cookies  # the provider's session cookie, read from the browser
        page.close()
        with pytest.raises(BrowserError, match=r"Storage\.getCookies"):
            page.cookies()  # the context is gone with its cookies


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


@pytest.mark.subprocess
def test_the_browser_and_its_profile_are_gone_after_the_block_even_on_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="the test failed"), launch(tmp_path) as running:
        pid = running.process.pid
        [root] = list(tmp_path.iterdir())
        assert (root / "profile").is_dir() and pid in live_processes(pid)
        raise RuntimeError("the test failed")
    assert list(tmp_path.iterdir()) == []
    assert live_processes(pid) == []


@pytest.mark.anyio
async def test_an_async_test_signs_in_while_its_own_loop_serves_the_callback(
    oidc_provider: OpenIDProvider, browser: Browser
) -> None:
    """The shape of an in-process desk: the page the browser lands on is served by the test's own event loop, so
    the browser calls must leave that loop free (AsyncPage runs them in a worker thread)."""
    queries: list[str] = []

    async def answer(stream: SocketStream) -> None:
        async with stream:
            request = b""
            while b"\r\n\r\n" not in request:
                request += await stream.receive()
            queries.append(request.split(b" ", 2)[1].decode())
            body = b"<h1>Signed in</h1>"
            await stream.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n")
            await stream.send(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)  # noqa: S610 -- anyio typed attributes, not Django
    async with listener, anyio.create_task_group() as serving:
        serving.start_soon(listener.serve, answer)
        client = oidc_provider.register_client(f"http://127.0.0.1:{port}/approval/callback")
        authorization = oidc_provider.authorization(client)
        page = AsyncPage(browser.new_page())
        await page.open(authorization.url)
        landed = await page.run(oidc_provider.sign_in_with_browser, page.page, "alice")
        assert landed.startswith(client.redirect_uri + "?") and await page.text() == "Signed in", landed
        assert await page.evaluate("document.querySelector('h1').textContent") == "Signed in"
        await page.close()
        serving.cancel_scope.cancel()
    [query] = [parse_qs(urlsplit(path).query) for path in queries if path.startswith("/approval/callback")]
    tokens = oidc_provider.exchange_code(client, query["code"][0], authorization)
    assert oidc_provider.id_token_claims(tokens["id_token"], client, authorization.nonce)["sub"] == "alice"


def test_a_sign_in_the_provider_refuses_says_why_at_once(oidc_provider: OpenIDProvider, browser: Browser) -> None:
    client = oidc_provider.register_client("http://127.0.0.1:9/callback", confidential=True)
    wrong = replace(client, redirect_uri="http://127.0.0.1:9/elsewhere")
    page = browser.new_page()
    page.open(oidc_provider.authorization(wrong).url)
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"refused bob's sign-in.*redirect_uri"):
        oidc_provider.sign_in_with_browser(page, "bob")
    assert time.monotonic() - started < 15
