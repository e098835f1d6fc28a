"""Per-person access tokens: the HTTP desk as an OAuth 2.1 resource server (``http_auth = "oauth"``).

A token is a JWT checked against the issuer's JWKS (signature with an allowlist of asymmetric algorithms, ``iss``,
``aud`` = this desk, ``exp``/``nbf`` with a small leeway) or, when ``oauth_introspection_url`` is set, an opaque
token the issuer vouches for (RFC 7662). Every call to the issuer goes through ``core.outside``: a deadline and a
size cap, off the event loop, so an issuer that hangs costs a caller a named error, never the desk.

JWTs are checked with PyJWT (with ``cryptography``): the algorithm is never taken from the token on trust, it must
be in :data:`ALGORITHMS` and match the key the JWKS publishes for the token's ``kid``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import jwt

from incident_desk.core.errors import echoed
from incident_desk.core.neighbours import outside
from incident_desk.settings.model import Settings

# Asymmetric only: `none` and HMAC (which a public key would "sign" for anyone) are refused before any key is read.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_SECONDS = 30
JWKS_REFRESH_SECONDS = 60.0  # an unknown kid refetches the JWKS at most this often
MAX_METADATA_BYTES = 256 * 1024


class TokenRejected(Exception):
    """The token does not let its bearer in; the message says why (never the token)."""


class IssuerUnavailable(Exception):
    """The issuer's metadata, keys or introspection could not be read; the message names which and why."""


@dataclass(frozen=True)
class Principal:
    """Who a checked token speaks for."""

    subject: str
    issuer: str
    name: str | None
    scopes: frozenset[str]
    client_id: str | None = None

    @property
    def label(self) -> str:
        """The journal's actor: display name, subject and issuer, e.g. ``alice (sub 42 @ https://idp)``; made
        printable and shortened, so it names a person for a reader and is never compared."""
        where = f"sub {_printable(self.subject)} @ {self.issuer}"
        return f"{self.name} ({where})" if self.name else where

    @property
    def owner(self) -> str:
        """What a session and an approval are bound to: the exact (issuer, subject) pair, hashed, whatever scopes a
        later token of theirs carries. Two subjects that share 200 characters or differ in a control character
        are two owners."""
        pair = json.dumps([self.issuer, self.subject], ensure_ascii=True)
        return f"oauth:{hashlib.sha256(pair.encode()).hexdigest()}"


def verifier_for(settings: Settings, resource: str) -> OAuthVerifier:
    """The verifier ``settings`` describe, for the desk whose /mcp URL is ``resource``."""
    assert settings.oauth_issuer is not None
    secret = settings.oauth_introspection_client_secret
    client = settings.oauth_introspection_client_id
    return OAuthVerifier(
        issuer=settings.oauth_issuer,
        audience=settings.oauth_audience or resource,
        jwks_url=settings.oauth_jwks_url,
        introspection_url=settings.oauth_introspection_url,
        introspection_auth=(client, secret.get_secret_value()) if client and secret else None,
        scope_map={str(ours): theirs for ours, theirs in settings.oauth_scope_map.items()},
        timeout_seconds=settings.oauth_timeout_seconds,
    )


def resource_url(settings: Settings, mcp_path: str) -> str:
    """This desk's public /mcp URL: the OAuth resource and the default audience."""
    base = settings.public_url or f"http://{settings.host}:{settings.port}"
    return base.rstrip("/") + mcp_path


class OAuthVerifier:
    """Checks access tokens for one resource; holds the issuer's keys, refreshed on an unknown ``kid``."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str | None = None,
        introspection_url: str | None = None,
        introspection_auth: tuple[str, str] | None = None,
        scope_map: Mapping[str, str] | None = None,
        timeout_seconds: float = 5.0,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self._jwks_url = jwks_url
        self._introspection_url = introspection_url
        self._introspection_auth = introspection_auth
        # The issuer's scope name -> the desk's.
        self._scope_names = {theirs: ours for ours, theirs in (scope_map or {}).items()}
        self._timeout = timeout_seconds
        self._keys: dict[str, Any] | None = None
        self._refreshed_at: float | None = None  # when an unknown kid last refetched the JWKS
        self._lock: anyio.Lock | None = None  # made on first use, inside the serving loop

    async def warm(self) -> None:
        """Read the issuer's metadata and keys now (at start), so the first caller does not wait for them."""
        await self._jwks(refresh=False)

    async def check(self) -> str:
        """What doctor reports: the issuer's metadata and its signing keys, or IssuerUnavailable saying why not."""
        found = []
        if self._jwks_url is None or self._introspection_url is None:
            metadata = await self.metadata()
            found.append(f"metadata of {metadata['issuer']}")
        keys = await self._jwks(refresh=True)
        if not keys:
            raise IssuerUnavailable("the issuer's JWKS holds no signing key the desk can use")
        found.append(f"{len(keys)} signing key(s) in its JWKS")
        return ", ".join(found) + f"; tokens must be for {self.audience}"

    def issuer_scope(self, scope: str) -> str:
        """The issuer's name for one of the desk's scopes (what a 401/403 challenge asks for)."""
        return next((theirs for theirs, ours in self._scope_names.items() if ours == scope), scope)

    async def verify(self, token: str) -> Principal:
        """The token's principal, else TokenRejected (bad token) or IssuerUnavailable (the issuer is down)."""
        if token.count(".") != 2:
            if self._introspection_url:
                return await self._introspect(token)
            raise TokenRejected("the token is not a JWT and no introspection endpoint is configured")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRejected(f"malformed token: {exc}") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise TokenRejected(f"signing algorithm {algorithm!r} is not accepted (allowed: {', '.join(ALGORITHMS)})")
        key = await self._key(header.get("kid"))
        try:
            claims = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRejected("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRejected("the token is not valid yet (nbf/iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise TokenRejected(f"the token is for another audience, not {self.audience}") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected(f"the token was issued by someone other than {self.issuer}") from None
        except jwt.InvalidSignatureError:
            raise TokenRejected("the token's signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise TokenRejected(f"invalid token: {exc}") from None
        return self._principal(claims)

    def _principal(self, claims: Mapping[str, Any]) -> Principal:
        raw = claims.get("scope", claims.get("scp", ""))
        names = raw.split() if isinstance(raw, str) else [str(s) for s in raw] if isinstance(raw, list) else []
        scopes = frozenset(self._scope_names.get(name, name) for name in names)
        name = claims.get("preferred_username") or claims.get("email")
        return Principal(
            subject=str(claims["sub"]),
            issuer=str(claims.get("iss", self.issuer)),
            name=_printable(str(name)) if name else None,
            scopes=scopes,
            client_id=str(claims["client_id"]) if claims.get("client_id") else None,
        )

    async def _key(self, header_kid: object) -> Any:
        kid = str(header_kid)
        keys = await self._jwks(refresh=False)
        if kid not in keys:
            self._lock = self._lock or anyio.Lock()
            async with self._lock:
                now = time.monotonic()
                if kid not in (self._keys or {}) and (
                    self._refreshed_at is None or now - self._refreshed_at >= JWKS_REFRESH_SECONDS
                ):
                    self._refreshed_at = now
                    keys = await self._jwks(refresh=True)
                keys = self._keys or keys
        if kid not in keys:
            raise TokenRejected(f"the token's key id {echoed(kid, 'kid', quoted=True)} is not in the issuer's JWKS")
        return keys[kid]

    async def _jwks(self, *, refresh: bool) -> dict[str, Any]:
        if self._keys is not None and not refresh:
            return self._keys
        url = self._jwks_url or await self.discovered_jwks_url()
        document = await fetch_json(url, "the issuer's JWKS", self._timeout)
        keys: dict[str, Any] = {}
        for entry in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
                continue
            try:
                keys[str(entry.get("kid"))] = jwt.PyJWK(entry).key
            except jwt.PyJWTError:
                continue  # a key type or curve PyJWT cannot use: tokens signed with it are refused as unknown
        self._keys = keys
        return keys

    async def discovered_jwks_url(self) -> str:
        """``jwks_uri`` from the issuer's metadata (RFC 8414, then OpenID discovery)."""
        metadata = await self.metadata()
        url = metadata.get("jwks_uri")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise IssuerUnavailable(f"the issuer's metadata at {self.issuer} names no jwks_uri")
        return url

    async def metadata(self) -> dict[str, Any]:
        """The issuer's discovery document, whose ``issuer`` must be the configured one."""
        base = self.issuer.rstrip("/")
        failures: list[str] = []
        for url in (f"{base}/.well-known/openid-configuration", _rfc8414_url(self.issuer)):
            try:
                document = await fetch_json(url, "the issuer's metadata", self._timeout)
            except IssuerUnavailable as exc:
                failures.append(str(exc))
                continue
            if not isinstance(document, dict):
                failures.append(f"{url} is not a JSON object")
                continue
            if document.get("issuer") != self.issuer:
                raise IssuerUnavailable(
                    f"the metadata at {url} names issuer {document.get('issuer')!r}, not {self.issuer!r}"
                )
            return document
        raise IssuerUnavailable("; ".join(failures))

    async def _introspect(self, token: str) -> Principal:
        assert self._introspection_url is not None
        request = outside.Request(
            "POST",
            self._introspection_url,
            what="the issuer's introspection endpoint",
            deadline_seconds=self._timeout,
            max_bytes=MAX_METADATA_BYTES,
            form={"token": token, "token_type_hint": "access_token"},
            auth=self._introspection_auth,
            headers={"Accept": "application/json"},
        )
        answer = await exchange_json(request)
        if not isinstance(answer, dict) or answer.get("active") is not True:
            raise TokenRejected("the issuer says the token is not active")
        if answer.get("iss", self.issuer) != self.issuer:
            raise TokenRejected(f"the token was issued by someone other than {self.issuer}")
        audience = answer.get("aud")
        audiences = audience if isinstance(audience, list) else [audience] if audience else []
        if self.audience not in audiences:
            raise TokenRejected(f"the token is for another audience, not {self.audience}")
        now = time.time()
        if isinstance(answer.get("exp"), int | float) and answer["exp"] + LEEWAY_SECONDS < now:
            raise TokenRejected("the token has expired")
        if isinstance(answer.get("nbf"), int | float) and answer["nbf"] - LEEWAY_SECONDS > now:
            raise TokenRejected("the token is not valid yet (nbf/iat in the future)")
        if not answer.get("sub"):
            raise TokenRejected("the issuer's introspection names no subject")
        return self._principal({**answer, "iss": self.issuer})


def _printable(value: str) -> str:
    """A claim as the journal and a header may carry it: no control characters, at most 200 characters."""
    return "".join(char if char.isprintable() else "?" for char in value)[:200]


def _rfc8414_url(issuer: str) -> str:
    scheme, _, rest = issuer.partition("://")
    host, _, path = rest.partition("/")
    return f"{scheme}://{host}/.well-known/oauth-authorization-server" + (f"/{path.rstrip('/')}" if path else "")


async def fetch_json(url: str, what: str, timeout: float) -> Any:
    request = outside.Request(
        "GET",
        url,
        what=f"{what} ({url})",
        deadline_seconds=timeout,
        max_bytes=MAX_METADATA_BYTES,
        headers={"Accept": "application/json"},
    )
    return await exchange_json(request)


async def exchange_json(request: outside.Request) -> Any:
    def parse(response: outside.Response) -> Any:
        if not response.is_success:
            raise IssuerUnavailable(f"{request.what} answered {response.status_code} {response.reason_phrase}")
        try:
            return json.loads(response.content)
        except ValueError:
            raise IssuerUnavailable(f"{request.what} answered something that is not JSON") from None

    try:
        return await outside.exchange_from_loop(request, parse)
    except outside.OutsideError as exc:
        raise IssuerUnavailable(str(exc)) from None
