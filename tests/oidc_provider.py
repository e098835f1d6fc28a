"""A real OpenID provider for the OAuth tests: npm's ``oidc-provider`` (OpenID Certified), run by Node.

Installed once into the ignored build dir like the other npm tools. It issues client-credentials access tokens as
JWTs bound to the resource asked for (RFC 8707), with a ``preferred_username`` so the journal shows a name.
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

import httpx2

from tests.helpers import free_port
from tests.npm_tools import OIDC_PROVIDER as PACKAGE
from tests.npm_tools import install_root, npm_install

SECRET = "client-secret-for-tests-only"
REDIRECT = "http://127.0.0.1:1/callback"  # never visited: the test reads the code from the redirect itself
CLIENTS = {
    "desk-reader": "incidents:read",
    "desk-writer": "incidents:read incidents:write",
    "desk-operator": "incidents:read incidents:write services:restart",
}

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
  scopes: ["openid", "incidents:read", "incidents:write", "services:restart"],
  features: {
    clientCredentials: { enabled: true },
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
