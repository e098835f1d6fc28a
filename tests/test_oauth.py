"""The HTTP desk as an OAuth 2.1 resource server: a real OpenID provider, a real MCP client, and forged tokens.

The provider is npm's oidc-provider; the forged tokens are signed by a key the tests hold, published by a small
JWKS server that counts its fetches and can be told to hang (the issuer going down mid-run).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp_types import ElicitResult

from incident_desk.identity.oauth import IssuerUnavailable, OAuthVerifier, Principal, TokenRejected, resource_url
from incident_desk.observability.log import REPEATS_PER_WINDOW
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import load_settings
from tests.helpers import ROOT, child_env, free_port, text_of
from tests.http_desk import INITIALIZE, MCP_HEADERS, Desk, desk_env, open_session, run_desk
from tests.oidc_provider import CLIENTS, SECRET, run_provider

pytestmark = pytest.mark.anyio

FAKE_ISSUER = "https://issuer.test"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _challenge(answer: httpx2.Response) -> str:
    return answer.headers.get("www-authenticate", "")


def _post(url: str, token: str | None, body: Any = None) -> httpx2.Response:
    headers = {**MCP_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx2.post(url, json=body or INITIALIZE, headers=headers, timeout=30)


def _tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


async def test_a_real_client_signs_in_at_a_real_provider_and_its_person_is_journaled(tmp_path: Path) -> None:
    with run_provider(tmp_path) as provider:
        env = {"INCIDENT_DESK_HTTP_AUTH": "oauth", "INCIDENT_DESK_OAUTH_ISSUER": provider.issuer}
        with run_desk(tmp_path, **env) as desk:
            # Discovery, as a client does it: the 401 points at the metadata, which names the issuer.
            refused = _post(desk.url, None)
            assert refused.status_code == 401
            challenge = _challenge(refused)
            assert challenge.startswith("Bearer ") and 'scope="incidents:read"' in challenge
            metadata_url = challenge.split('resource_metadata="')[1].split('"')[0]
            assert metadata_url == f"http://127.0.0.1:{desk.port}/.well-known/oauth-protected-resource/mcp"
            metadata = httpx2.get(metadata_url, timeout=10).json()
            assert metadata["resource"] == desk.url
            assert metadata["authorization_servers"] == [provider.issuer]
            assert set(metadata["scopes_supported"]) == {"incidents:read", "incidents:write", "services:restart"}
            plain = httpx2.get(f"http://127.0.0.1:{desk.port}/.well-known/oauth-protected-resource", timeout=10)
            assert plain.json() == metadata
            issuer = metadata["authorization_servers"][0]
            discovery = httpx2.get(f"{issuer}/.well-known/openid-configuration", timeout=10).json()
            assert discovery["token_endpoint"] == f"{provider.issuer}/token"
            token = provider.token("desk-writer", metadata["resource"])

            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
            async with http, Client(streamable_http_client(desk.url, http_client=http)) as client:
                tools = {tool.name for tool in (await client.list_tools()).tools}
                assert "restart_service" in tools  # listed, though this token may not call it
                acked = await client.call_tool("acknowledge_incident", {"incidentId": "INC-1042"})
                person = f"desk-writer@example.test (sub desk-writer @ {provider.issuer})"
                assert person in text_of(acked)
                audit = text_of(await client.call_tool("get_incident_activity", {"incidentId": "INC-1042"}))
                assert person in audit

            # Beyond its scopes: 403 insufficient_scope naming the scope needed, for the client to step up.
            with httpx2.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as raw:
                opened = open_session(raw, desk.url)
                session = {**MCP_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
                session["mcp-protocol-version"] = "2025-11-25"
                restart = raw.post(desk.url, json=_tool_call("restart_service", {"service": "x"}), headers=session)
                assert restart.status_code == 403
                assert 'error="insufficient_scope"' in _challenge(restart)
                assert 'scope="services:restart"' in _challenge(restart)
                # Sessions belong to their person: another principal's token cannot use this session id.
                other = provider.token("desk-operator", desk.url)
                stolen = httpx2.post(
                    desk.url,
                    json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
                    headers={**session, "Authorization": f"Bearer {other}"},
                    timeout=30,
                )
                assert stolen.status_code == 404
                assert raw.post(
                    desk.url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=session
                ).is_success

            reader = provider.token("desk-reader", desk.url)
            write = _post(desk.url, reader, _tool_call("acknowledge_incident", {"incidentId": "INC-1043"}))
            assert write.status_code == 403 and 'scope="incidents:write"' in _challenge(write)

            elsewhere = provider.token("desk-writer", "http://other.example/mcp")
            wrong_audience = _post(desk.url, elsewhere)
            assert wrong_audience.status_code == 401
            assert 'error="invalid_token"' in _challenge(wrong_audience)
            assert "another audience" in _challenge(wrong_audience)


@dataclass
class KeyServer:
    """Publishes a JWKS; counts fetches; ``hang`` makes it accept and never answer."""

    url: str = ""
    jwks: dict[str, Any] = field(default_factory=lambda: {"keys": []})
    fetches: int = 0
    hang: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)


@contextmanager
def key_server() -> Iterator[KeyServer]:
    state = KeyServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.fetches += 1
            if state.hang.is_set():
                state.stop.wait(30)
                return
            body = json.dumps(state.jwks).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/jwks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        server.shutdown()
        server.server_close()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims(audience: str, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": FAKE_ISSUER,
        "sub": "u-42",
        "aud": audience,
        "iat": now,
        "exp": now + 600,
        "scope": "incidents:read incidents:write",
        "preferred_username": "alice",
    }
    claims.update(changes)
    return claims


def test_forged_and_stale_tokens_are_refused_with_a_challenge(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with key_server() as keys:
        published = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        keys.jwks = {"keys": [{**published, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        env = {
            "INCIDENT_DESK_HTTP_AUTH": "oauth",
            "INCIDENT_DESK_OAUTH_ISSUER": FAKE_ISSUER,
            "INCIDENT_DESK_OAUTH_JWKS_URL": keys.url,
            "INCIDENT_DESK_OAUTH_TIMEOUT_SECONDS": "2",
        }
        with run_desk(tmp_path, **env) as desk:
            port, audience = desk.port, desk.url

            def signed(claims: dict[str, Any], kid: str = "k1", signer: Any = key) -> str:
                return jwt.encode(claims, signer, algorithm="RS256", headers={"kid": kid})

            good = signed(_claims(audience))
            assert _post(desk.url, good).status_code == 200
            assert keys.fetches == 1  # fetched once at start

            now = int(time.time())
            header, _, signature = good.split(".")
            tampered_claims = _claims(audience, sub="root", scope="incidents:read services:restart")
            hmac_header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
            hmac_payload = _b64(json.dumps(_claims(audience)).encode())
            hmac_signature = _b64(
                hmac.new(public_pem, f"{hmac_header}.{hmac_payload}".encode(), hashlib.sha256).digest()
            )
            none_header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
            forged = {
                "expired": signed(_claims(audience, iat=now - 7200, exp=now - 3600)),
                "not yet valid": signed(_claims(audience, nbf=now + 3600)),
                "wrong issuer": signed(_claims(audience, iss="https://evil.test")),
                "other audience": signed(_claims(audience, aud="https://other.test/mcp")),
                "alg none": f"{none_header}.{hmac_payload}.",
                "HMAC with the public key": f"{hmac_header}.{hmac_payload}.{hmac_signature}",
                "tampered payload": f"{header}.{_b64(json.dumps(tampered_claims).encode())}.{signature}",
            }
            for case, token in forged.items():
                answer = _post(desk.url, token)
                assert answer.status_code == 401, case
                challenge = _challenge(answer)
                assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge, case
                assert f'resource_metadata="http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"' in (
                    challenge
                ), case
            assert keys.fetches == 1  # none of them needed the keys again

            unknown = signed(_claims(audience), kid="k9", signer=stranger)
            refused = _post(desk.url, unknown)
            assert refused.status_code == 401 and "k9" in _challenge(refused)
            assert keys.fetches == 2  # one refresh for the unknown kid...
            assert _post(desk.url, signed(_claims(audience), kid="k8", signer=stranger)).status_code == 401
            assert keys.fetches == 2  # ...and no more within the minute
            no_token = _post(desk.url, None)
            assert no_token.status_code == 401 and "error=" not in _challenge(no_token)
            assert "resource_metadata=" in _challenge(no_token)
            assert _post(desk.url, good).status_code == 200


@dataclass
class SigningDesk:
    """An OAuth desk whose issuer's key this test holds: it signs tokens for any subject it likes."""

    desk: Desk
    key: Any

    def token(self, **claims: Any) -> str:
        return jwt.encode(_claims(self.desk.url, **claims), self.key, algorithm="RS256", headers={"kid": "k1"})


@contextmanager
def signing_desk(tmp_path: Path) -> Iterator[SigningDesk]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with key_server() as keys:
        published = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        keys.jwks = {"keys": [{**published, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        env = {
            "INCIDENT_DESK_HTTP_AUTH": "oauth",
            "INCIDENT_DESK_OAUTH_ISSUER": FAKE_ISSUER,
            "INCIDENT_DESK_OAUTH_JWKS_URL": keys.url,
            "INCIDENT_DESK_LOG_FORMAT": "json",
        }
        with run_desk(tmp_path, **env) as desk:
            yield SigningDesk(desk, key)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("p" * 200 + "-alice", "p" * 200 + "-mallory"),  # the same first 200 characters
        ("alice\x01", "alice\x02"),  # differ only in a control character
        ("alice\u202e", "alice\u202d"),  # or in a bidi mark
    ],
    ids=["shared-200", "control", "bidi"],
)
def test_two_subjects_never_share_a_session(tmp_path: Path, first: str, second: str) -> None:
    """A session belongs to the exact (issuer, subject) pair; a subject shortened or made printable for the
    journal's label is no key."""
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    with signing_desk(tmp_path) as signing, httpx2.Client(timeout=30) as raw:
        url = signing.desk.url
        owner, other = (
            signing.token(sub=first, preferred_username=None),
            signing.token(sub=second, preferred_username=None),
        )
        opened = open_session(raw, url, Authorization=f"Bearer {owner}")
        assert opened.status_code == 200
        session = {
            **MCP_HEADERS,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        borrowed = raw.post(url, json=ping, headers={**session, "Authorization": f"Bearer {other}"})
        own = raw.post(url, json=ping, headers={**session, "Authorization": f"Bearer {owner}"})
    assert own.status_code == 200
    assert borrowed.status_code == 404, "another subject used the session"


def test_a_stranger_sending_bad_tokens_writes_a_bounded_log(tmp_path: Path) -> None:
    """2,000 refused tokens from an unauthenticated peer wrote 2,000 log lines: repeats are counted and held back
    by the one limiter the HTTP stack's own refusals go through (observability.log.RepeatLimiter)."""
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with signing_desk(tmp_path) as signing, httpx2.Client(timeout=30) as raw:
        url = signing.desk.url
        forged = jwt.encode(_claims(url), stranger, algorithm="RS256", headers={"kid": "k1"})
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {forged}"}
        answers = {raw.post(url, json=INITIALIZE, headers=headers).status_code for _ in range(2000)}
        good = raw.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {signing.token()}"})
        stderr = signing.desk.stderr()
    assert answers == {401}
    assert good.status_code == 200
    refusals = [line for line in stderr.splitlines() if "access token refused" in line]
    assert 1 <= len(refusals) <= REPEATS_PER_WINDOW, f"{len(refusals)} lines for 2,000 refusals"
    assert len(stderr.splitlines()) < 100


def test_an_issuer_down_at_start_gives_a_named_error_and_no_freeze(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    env = {"INCIDENT_DESK_HTTP_AUTH": "oauth", "INCIDENT_DESK_OAUTH_ISSUER": closed}
    with run_desk(tmp_path, **env) as desk:
        assert "the OAuth issuer is unavailable at start" in desk.stderr()
        token = jwt.encode({"sub": "x"}, rsa.generate_private_key(65537, 2048), algorithm="RS256")
        answer = _post(desk.url, token)
        assert answer.status_code == 503
        assert "the issuer's metadata" in answer.json()["message"]
        assert "cannot be reached" in answer.json()["message"]
        assert _post(desk.url, None).status_code == 401


def test_an_issuer_hanging_mid_run_gives_a_named_error_and_no_freeze(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with key_server() as keys:
        published = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        keys.jwks = {"keys": [{**published, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        env = {
            "INCIDENT_DESK_HTTP_AUTH": "oauth",
            "INCIDENT_DESK_OAUTH_ISSUER": FAKE_ISSUER,
            "INCIDENT_DESK_OAUTH_JWKS_URL": keys.url,
            "INCIDENT_DESK_OAUTH_TIMEOUT_SECONDS": "2",
        }
        with run_desk(tmp_path, **env) as desk:
            port, audience = desk.port, desk.url
            keys.hang.set()
            rotated = jwt.encode(_claims(audience), key, algorithm="RS256", headers={"kid": "k2"})
            outcome: list[httpx2.Response] = []
            waiting = threading.Thread(target=lambda: outcome.append(_post(desk.url, rotated)))
            started = time.monotonic()
            waiting.start()
            time.sleep(0.3)
            # While a caller waits on the hanging issuer, the desk answers others, cached keys included.
            assert httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
            good = jwt.encode(_claims(audience), key, algorithm="RS256", headers={"kid": "k1"})
            assert _post(desk.url, good).status_code == 200
            waiting.join(30)
            assert outcome and outcome[0].status_code == 503
            assert "the issuer's JWKS" in outcome[0].json()["message"]
            assert "did not answer within 2s" in outcome[0].json()["message"]
            assert time.monotonic() - started < 15


def _doctor(tmp_path: Path, issuer: str) -> subprocess.CompletedProcess[str]:
    env = child_env(tmp_path / "audit.sqlite3", INCIDENT_DESK_HTTP_AUTH="oauth", INCIDENT_DESK_OAUTH_ISSUER=issuer)
    return subprocess.run(
        [sys.executable, "-m", "incident_desk", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_doctor_reads_the_issuers_metadata_and_keys(tmp_path: Path) -> None:
    with run_provider(tmp_path) as provider:
        done = _doctor(tmp_path, provider.issuer)
        line = next(line for line in done.stdout.splitlines() if "OAuth issuer" in line)
        assert line.startswith("[ok]"), done.stdout
        assert f"metadata of {provider.issuer}" in line and "signing key(s)" in line
    down = _doctor(tmp_path, provider.issuer)
    line = next(line for line in down.stdout.splitlines() if "OAuth issuer" in line)
    assert line.startswith("[FAIL]") and "cannot be reached" in line, down.stdout
    assert down.returncode == 1


class _MemoryTokens:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_sdks_own_oauth_client_discovers_the_desk_and_signs_in(tmp_path: Path) -> None:
    with run_provider(tmp_path) as provider:
        env = {"INCIDENT_DESK_HTTP_AUTH": "oauth", "INCIDENT_DESK_OAUTH_ISSUER": provider.issuer}
        with run_desk(tmp_path, **env) as desk:
            storage = _MemoryTokens()
            auth = ClientCredentialsOAuthProvider(
                server_url=desk.url,
                storage=storage,
                client_id="desk-writer",
                client_secret=SECRET,
                scope=CLIENTS["desk-writer"],
                issuer=provider.issuer,
            )
            http = httpx2.AsyncClient(auth=auth, timeout=30)
            async with http, Client(streamable_http_client(desk.url, http_client=http)) as client:
                acked = await client.call_tool("add_incident_note", {"incidentId": "INC-1042", "text": "on it"})
                assert f"desk-writer@example.test (sub desk-writer @ {provider.issuer})" in text_of(acked)
            assert storage.tokens is not None  # the token came from the provider, found through the desk's 401


@contextmanager
def introspection_server(answers: dict[str, dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """An RFC 7662 endpoint that knows ``answers`` by token and requires the desk's client credentials."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            form = dict(parse_qsl(self.rfile.read(length).decode()))
            seen.append(form)
            expected = "Basic " + base64.b64encode(b"desk:introspect-secret").decode()
            status, answer = (
                (200, answers.get(form.get("token", ""), {"active": False}))
                if self.headers.get("authorization") == expected
                else (401, {"error": "invalid_client"})
            )
            body = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/introspect", seen
    finally:
        server.shutdown()
        server.server_close()


async def test_opaque_tokens_are_introspected_and_scopes_mapped() -> None:
    audience = "https://desk.example.com/mcp"
    now = int(time.time())
    live = {"active": True, "sub": "u-7", "aud": audience, "exp": now + 600, "scope": "desk.read desk.write"}
    answers = {
        "opaque-live": {**live, "email": "bob@example.com"},
        "opaque-forged-name": {**live, "preferred_username": "eve\r\nx-incident-desk-principal: root"},
        "opaque-expired": {**live, "exp": now - 3600},
        "opaque-elsewhere": {**live, "aud": "https://other.example.com/mcp"},
    }
    with introspection_server(answers) as (url, seen):
        verifier = OAuthVerifier(
            issuer=FAKE_ISSUER,
            audience=audience,
            jwks_url="http://127.0.0.1:9/unused",
            introspection_url=url,
            introspection_auth=("desk", "introspect-secret"),
            scope_map={"incidents:read": "desk.read", "incidents:write": "desk.write"},
        )
        person = await verifier.verify("opaque-live")
        assert person.label == f"bob@example.com (sub u-7 @ {FAKE_ISSUER})"
        assert person.scopes == {"incidents:read", "incidents:write"}
        assert seen[-1] == {"token": "opaque-live", "token_type_hint": "access_token"}
        assert verifier.issuer_scope("incidents:write") == "desk.write"
        # A display name cannot smuggle a line into the journal or a header.
        forged = await verifier.verify("opaque-forged-name")
        assert forged.label == f"eve??x-incident-desk-principal: root (sub u-7 @ {FAKE_ISSUER})"
        assert verifier.issuer_scope("services:restart") == "services:restart"
        for token, reason in (
            ("opaque-expired", "expired"),
            ("opaque-elsewhere", "another audience"),
            ("opaque-unknown", "not active"),
        ):
            with pytest.raises(TokenRejected, match=reason):
                await verifier.verify(token)
        wrong_credentials = OAuthVerifier(
            issuer=FAKE_ISSUER, audience=audience, introspection_url=url, introspection_auth=("desk", "wrong")
        )
        with pytest.raises(IssuerUnavailable, match="introspection endpoint answered 401"):
            await wrong_credentials.verify("opaque-live")


def test_oauth_settings_say_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("INCIDENT_DESK_")]:
        monkeypatch.delenv(name)
    with pytest.raises(SettingsError, match="oauth_issuer is required when http_auth is 'oauth'"):
        load_settings({"http_auth": "oauth"})
    with pytest.raises(SettingsError, match="http_auth"):
        load_settings({"http_auth": "password"})
    settings = load_settings({"http_auth": "oauth", "oauth_issuer": FAKE_ISSUER, "port": 9000})
    assert resource_url(settings, "/mcp") == "http://127.0.0.1:9000/mcp"
    public = load_settings({"http_auth": "oauth", "oauth_issuer": FAKE_ISSUER, "public_url": "https://d.example/"})
    assert resource_url(public, "/mcp") == "https://d.example/mcp"
    beyond = subprocess.run(
        [sys.executable, "-m", "incident_desk", "--transport", "http", "--host", "10.0.0.1", "--port", "1"],
        capture_output=True,
        text=True,
        env=desk_env(tmp_path, INCIDENT_DESK_HTTP_AUTH="oauth", INCIDENT_DESK_OAUTH_ISSUER=FAKE_ISSUER),
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert beyond.returncode == 2 and "needs public_url" in beyond.stderr, beyond.stderr


async def test_a_person_signs_in_with_authorization_code_and_pkce_and_is_journaled(tmp_path: Path) -> None:
    with run_provider(tmp_path) as provider:
        env = {"INCIDENT_DESK_HTTP_AUTH": "oauth", "INCIDENT_DESK_OAUTH_ISSUER": provider.issuer}
        with run_desk(tmp_path, **env) as desk:
            token = provider.sign_in("alice", desk.url, "incidents:read incidents:write")
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
            async with http, Client(streamable_http_client(desk.url, http_client=http)) as client:
                acked = await client.call_tool("acknowledge_incident", {"incidentId": "INC-1043"})
                alice = f"alice@example.test (sub alice @ {provider.issuer})"
                assert alice in text_of(acked)
                activity = await client.call_tool("get_incident_activity", {"incidentId": "INC-1043"})
                assert alice in text_of(activity)


async def _approve(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-2291"})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_restart_is_approved_in_the_persons_name(tmp_path: Path, mode: str) -> None:
    with run_provider(tmp_path) as provider:
        env = {"INCIDENT_DESK_HTTP_AUTH": "oauth", "INCIDENT_DESK_OAUTH_ISSUER": provider.issuer}
        with run_desk(tmp_path, **env) as desk:
            token = provider.sign_in("carol", desk.url, "incidents:read services:restart")
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
            client = Client(
                streamable_http_client(desk.url, http_client=http), mode=mode, elicitation_callback=_approve
            )
            async with http, client:
                restart = await client.call_tool("restart_service", {"service": "payments-api"})
                assert text_of(restart).startswith("RESTARTED payments-api under CHG-2291"), text_of(restart)
                journal = (await client.call_tool("get_audit_log", {})).structured_content
                assert journal is not None
                approvers = {entry["approver"] for entry in journal["decisions"]}
                assert approvers == {f"carol@example.test (sub carol @ {provider.issuer})"}, journal


async def test_a_read_token_calls_no_tool_that_acts(tmp_path: Path) -> None:
    """Every tool the desk lists as not read-only answers 403 to a token with incidents:read alone, before the
    SDK sees the call; the acting tools come from tools/list, not from the desk's own scope table."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with key_server() as keys:
        published = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        keys.jwks = {"keys": [{**published, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        env = {
            "INCIDENT_DESK_HTTP_AUTH": "oauth",
            "INCIDENT_DESK_OAUTH_ISSUER": FAKE_ISSUER,
            "INCIDENT_DESK_OAUTH_JWKS_URL": keys.url,
        }
        with run_desk(tmp_path, **env) as desk:
            every_scope = "incidents:read incidents:write services:restart"
            full = jwt.encode(_claims(desk.url, scope=every_scope), key, algorithm="RS256", headers={"kid": "k1"})
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {full}"}, timeout=30)
            async with http, Client(streamable_http_client(desk.url, http_client=http)) as client:
                listed = (await client.list_tools()).tools
            acting = sorted(t.name for t in listed if not (t.annotations and t.annotations.read_only_hint))
            reading = sorted(t.name for t in listed if t.annotations and t.annotations.read_only_hint)
            assert "save_postmortem" in acting and "restart_service" in acting and reading

            reader = jwt.encode(
                _claims(desk.url, scope="incidents:read"), key, algorithm="RS256", headers={"kid": "k1"}
            )
            with httpx2.Client(headers={"Authorization": f"Bearer {reader}"}, timeout=30) as raw:
                opened = open_session(raw, desk.url)
                session = {**MCP_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
                session["mcp-protocol-version"] = "2025-11-25"
                for name in acting:
                    answer = raw.post(desk.url, json=_tool_call(name, {"incidentId": "INC-1042"}), headers=session)
                    assert answer.status_code == 403, name
                    assert 'error="insufficient_scope"' in _challenge(answer), name
                    assert 'scope="incidents:read"' not in _challenge(answer), name
                for name in reading:
                    answer = raw.post(desk.url, json=_tool_call(name, {"incidentId": "INC-1042"}), headers=session)
                    assert answer.status_code != 403, name


def test_a_principals_owner_is_its_exact_issuer_and_subject() -> None:
    def person(subject: str, issuer: str = FAKE_ISSUER) -> Principal:
        return Principal(subject=subject, issuer=issuer, name=None, scopes=frozenset())

    shared = "p" * 200
    assert person(shared + "a").label == person(shared + "b").label, "the label is shortened for a reader"
    assert person(shared + "a").owner != person(shared + "b").owner
    assert person("alice\x01").owner != person("alice\x02").owner
    assert "\x01" not in person("alice\x01").label
    assert person("b c", "https://a").owner != person("c", "https://a b").owner
    assert person("alice").owner == person("alice").owner
