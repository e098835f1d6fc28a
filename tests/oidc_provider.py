"""A real OpenID provider for the OAuth tests: npm's ``oidc-provider`` (OpenID Certified), run by Node.

Installed once into the ignored build dir like the other npm tools. It issues client-credentials access tokens as
JWTs bound to the resource asked for (RFC 8707), with a ``preferred_username`` so the journal shows a name.

People sign in through the provider's own login and consent pages (devInteractions: any login name and any
password; the login name is the subject). :data:`USERS` are the two the tests use; ``sub`` is the login name,
``preferred_username`` is ``<login>@example.test``. For a browser sign-in, register a client with the redirect URI
chosen at run time (:meth:`OpenIDProvider.register_client`), open :meth:`OpenIDProvider.authorization`'s URL in a
:mod:`tests.browser` page, :meth:`OpenIDProvider.sign_in_with_browser`, then :meth:`OpenIDProvider.exchange_code`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx2
import jwt

from tests.helpers import free_port
from tests.npm_tools import OIDC_PROVIDER as PACKAGE
from tests.npm_tools import install_root, npm_install

if TYPE_CHECKING:
    from tests.browser import Page

SECRET = "client-secret-for-tests-only"
REDIRECT = "http://127.0.0.1:1/callback"  # never visited: the test reads the code from the redirect itself
CLIENTS = {
    "desk-reader": "incidents:read",
    "desk-writer": "incidents:read incidents:write",
    "desk-operator": "incidents:read incidents:write services:restart",
}
USERS = ("alice", "bob")  # any login name signs in; these two are the people the browser tests use


def claims_of(user: str) -> dict[str, str]:
    """The identity the provider asserts for a login name (ID token, userinfo, access token)."""
    return {"sub": user, "preferred_username": f"{user}@example.test", "name": user.capitalize()}


@dataclass(frozen=True)
class RegisteredClient:
    """A client registered at run time: public (PKCE only) or confidential (PKCE and a client secret)."""

    client_id: str
    redirect_uri: str
    client_secret: str | None = None


@dataclass(frozen=True)
class Authorization:
    """One authorization request: the URL to open in the browser and what the code exchange needs back."""

    url: str
    verifier: str
    state: str
    nonce: str
    resource: str | None = None


SCRIPT = """
import Provider from "%(module)s";
const issuer = process.argv[2];
const port = Number(process.argv[3]);
const clients = JSON.parse(process.argv[4]);
const provider = new Provider(issuer, {
  clients: Object.entries(clients).map(([id, scope]) => ({
    client_id: id, client_secret: "%(secret)s", grant_types: ["client_credentials"],
    redirect_uris: [], response_types: [], scope,
  })).concat([{
    client_id: "desk-desktop", application_type: "native", token_endpoint_auth_method: "none",
    grant_types: ["authorization_code"], response_types: ["code"], redirect_uris: ["%(redirect)s"],
  }]),
  scopes: ["openid", "profile", "incidents:read", "incidents:write", "services:restart"],
  claims: { openid: ["sub"], profile: ["preferred_username", "name"] },
  conformIdTokenClaims: false,
  findAccount: (ctx, id) => ({
    accountId: id,
    claims: () => ({ sub: id, preferred_username: id + "@example.test", name: id[0].toUpperCase() + id.slice(1) }),
  }),
  features: {
    clientCredentials: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => ({
        scope: "incidents:read incidents:write services:restart",
        audience: indicator, accessTokenFormat: "jwt", accessTokenTTL: 600, jwt: { sign: { alg: "RS256" } },
      }),
    },
  },
  extraTokenClaims: (ctx, token) => ({ preferred_username: (token.accountId || token.clientId) + "@example.test" }),
});
provider.listen(port, "127.0.0.1", () => console.log("listening"));
"""


@dataclass
class OpenIDProvider:
    issuer: str
    process: subprocess.Popen[bytes]

    def token(self, client_id: str, resource: str, scope: str | None = None) -> str:
        """A client-credentials access token for ``resource`` with ``scope`` (default: all the client may have)."""
        answer = httpx2.post(
            f"{self.issuer}/token",
            data={"grant_type": "client_credentials", "resource": resource, "scope": scope or CLIENTS[client_id]},
            auth=(client_id, SECRET),
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])

    def sign_in(self, user: str, resource: str, scope: str) -> str:
        """A person's access token by authorization code + PKCE, through the provider's own login and consent pages
        (devInteractions: any user name and password), as a desktop client's browser would go."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = {
            "client_id": "desk-desktop",
            "response_type": "code",
            "redirect_uri": REDIRECT,
            "scope": f"openid {scope}",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": resource,
            "state": "state-1",
        }
        with httpx2.Client(base_url=self.issuer, timeout=10) as browser:
            page = browser.get("/auth", params=query)
            for _ in range(10):
                location = page.headers.get("location", "")
                if location.startswith(REDIRECT):
                    break
                if page.status_code in (302, 303):
                    page = browser.get(location)
                    continue
                action = re.search(r'action="([^"]+)"', page.text)
                assert action, page.text
                fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', page.text))
                if 'name="login"' in page.text:
                    fields.update(login=user, password="any")
                page = browser.post(action.group(1), data=fields)
            code = re.search(r"[?&]code=([^&]+)", location)
            assert code, f"no code in the redirect: {location}"
            answer = browser.post(
                "/token",
                data={
                    "grant_type": "authorization_code",
                    "code": code.group(1),
                    "redirect_uri": REDIRECT,
                    "code_verifier": verifier,
                    "client_id": "desk-desktop",
                    "resource": resource,
                },
            )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])

    def register_client(self, redirect_uri: str, confidential: bool = False) -> RegisteredClient:
        """Register (RFC 7591) an authorization-code client for ``redirect_uri``. A public client is "native", so
        a loopback redirect matches on any port (RFC 8252); a confidential one must come back to the exact URI."""
        metadata: dict[str, Any] = {
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "application_type": "web" if confidential else "native",
            "token_endpoint_auth_method": "client_secret_basic" if confidential else "none",
        }
        answer = httpx2.post(f"{self.issuer}/reg", json=metadata, timeout=10)
        assert answer.status_code == 201, answer.text
        registered = answer.json()
        return RegisteredClient(registered["client_id"], redirect_uri, registered.get("client_secret"))

    def authorization(
        self, client: RegisteredClient, scope: str = "openid profile", resource: str | None = None
    ) -> Authorization:
        """A fresh authorization request with PKCE (S256), state and nonce for ``client``."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        query = {
            "client_id": client.client_id,
            "response_type": "code",
            "redirect_uri": client.redirect_uri,
            "scope": scope,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "nonce": nonce,
        }
        if resource:
            query["resource"] = resource
        return Authorization(f"{self.issuer}/auth?{urlencode(query)}", verifier, state, nonce, resource)

    def sign_in_with_browser(self, page: Page, user: str, timeout: float = 60) -> str:
        """On a page at this provider's authorization endpoint: sign in as ``user`` and consent, as a person
        would (typing, clicking). Returns the URL the provider sent the browser on to (the redirect URI + code)."""
        deadline = time.monotonic() + timeout
        for _ in range(4):  # login, consent, and at most a repeated prompt each
            left = max(deadline - time.monotonic(), 0.1)
            prompt = page.wait_for(
                f"document.readyState === 'complete' && (location.origin !== {json.dumps(self.issuer)}"
                " ? 'left' : document.querySelector('input[name=prompt]')?.value || 'no prompt')",
                f"the provider's login or consent page for {user}",
                left,
            )
            if prompt == "left":
                return page.url
            if prompt == "no prompt":
                raise AssertionError(f"the provider refused {user}'s sign-in at {page.url}: {page.text()[:500]}")
            if prompt == "login":
                page.fill("input[name=login]", user, left)
                page.fill("input[name=password]", "any password", left)
            page.click("button[type=submit]", timeout=left)
        raise AssertionError(f"the provider kept prompting {user}: {page.url}\n{page.text()[:500]}")

    def exchange_code(self, client: RegisteredClient, code: str, authorization: Authorization) -> dict[str, Any]:
        """Trade an authorization code (with its PKCE verifier) for tokens; fails the test on an error answer."""
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": client.redirect_uri,
            "code_verifier": authorization.verifier,
        }
        if authorization.resource:
            form["resource"] = authorization.resource
        auth = (client.client_id, client.client_secret) if client.client_secret else None
        if auth is None:
            form["client_id"] = client.client_id
        answer = httpx2.post(f"{self.issuer}/token", data=form, auth=auth, timeout=10)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def id_token_claims(self, id_token: str, client: RegisteredClient, nonce: str | None = None) -> dict[str, Any]:
        """The ID token's claims after checking its signature (the provider's JWKS), issuer, audience and nonce."""
        kid = jwt.get_unverified_header(id_token).get("kid")
        keys = httpx2.get(f"{self.issuer}/jwks", timeout=10).json()["keys"]
        key = next(jwt.PyJWK(jwk) for jwk in keys if jwk.get("kid") == kid)
        claims: dict[str, Any] = jwt.decode(
            id_token, key, algorithms=["RS256", "ES256", "EdDSA"], audience=client.client_id, issuer=self.issuer
        )
        if nonce is not None:
            assert claims.get("nonce") == nonce, f"the ID token's nonce is not the one sent: {claims}"
        return claims


@contextmanager
def run_provider(tmp_path: Path) -> Iterator[OpenIDProvider]:
    _installed()
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    module = install_root(PACKAGE) / "node_modules" / "oidc-provider" / "lib" / "index.js"
    script = tmp_path / "provider.mjs"
    script.write_text(SCRIPT % {"module": module.as_posix(), "secret": SECRET, "redirect": REDIRECT})
    log = (tmp_path / "provider.log").open("wb")
    process = subprocess.Popen(
        ["node", str(script), issuer, str(port), json.dumps(CLIENTS)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx2.get(f"{issuer}/.well-known/openid-configuration", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"oidc-provider did not start: {(tmp_path / 'provider.log').read_text()}")
            time.sleep(0.1)
        yield OpenIDProvider(issuer, process)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def _installed() -> None:
    """Install oidc-provider (a library, no command) through the npm-tools cache."""
    import shutil

    import pytest

    if shutil.which("node") is None:
        pytest.skip(f"node is not installed: cannot run {PACKAGE}")
    npm_install(PACKAGE, install_root(PACKAGE) / "node_modules" / "oidc-provider" / "package.json")
