"""Who approves on the approval page: a person signed in at the identity provider, or the OS user.

With ``approval_page_client_id`` (and ``oauth_issuer``), the page is an OpenID Connect public client: authorization
code + PKCE (S256) with ``state`` and ``nonce``, the ID token checked against the issuer's JWKS (signature,
issuer, audience = the client id, expiry, nonce), and the approver recorded by subject at the issuer. The
sign-in is bound to the browser that started it (a cookie) and to the one approval link it was started from.
Without it, the page trusts the holder of the one-time link as the OS user running the desk, and says so.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlencode

import jwt
import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from incident_desk.core.acts.links import Pending
from incident_desk.core.neighbours import outside
from incident_desk.identity.oauth import (
    IssuerUnavailable,
    OAuthVerifier,
    TokenRejected,
    exchange_json,
    fetch_json,
)
from incident_desk.settings.model import Settings

log = structlog.get_logger(__name__)

SIGN_IN_CALLBACK = "/approvals/sign-in/callback"
SESSION_COOKIE = "incident_desk_approval_session"
BROWSER_COOKIE = "incident_desk_approval_browser"
SIGN_IN_SECONDS = 600.0
OS_USER_NOTE = (
    "No identity provider signs you in here: the approval is recorded as the operating-system user running this "
    "desk ({who}) and proves only that someone holding this one-time link approved. The client that asked also "
    "received the link, so this proves no verified person, and not a second person."
)


@dataclass(frozen=True)
class SignedIn:
    """Who is deciding on the page, and what that proof is worth (shown on the page)."""

    approver: str
    note: str
    key: str | None = None  # ``oauth:{issuer} {subject}`` for a person signed in at the identity provider


class Identity(Protocol):
    """How the page learns who is in front of it: a :class:`SignedIn`, or a response that goes to sign in."""

    async def who(self, request: Request, link: str, pending: Pending) -> SignedIn | Response: ...


class OsUser:
    """The static-token and stdio desks without an identity provider: the one-time link plus the OS user."""

    async def who(self, request: Request, link: str, pending: Pending) -> SignedIn | Response:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        who = f"os:{user}"
        return SignedIn(who, OS_USER_NOTE.format(who=who))


@dataclass
class _Started:
    link: str
    browser: str
    verifier: str
    nonce: str
    redirect_uri: str
    expires_at: float


@dataclass
class _Session:
    approver: str
    key: str
    link_hash: str
    expires_at: float


def identity_for(settings: Settings) -> Identity:
    """How this desk's page knows its approvers."""
    if settings.approval_page_client_id and settings.oauth_issuer:
        return OpenIDSignIn(settings.oauth_issuer, settings.approval_page_client_id, settings.oauth_timeout_seconds)
    return OsUser()


def _link_hash(link: str) -> str:
    return hashlib.sha256(link.encode()).hexdigest()


class OpenIDSignIn:
    """Sign-in at ``issuer`` as the public client ``client_id`` (authorization code + PKCE)."""

    def __init__(self, issuer: str, client_id: str, timeout: float) -> None:
        self.issuer, self.client_id, self._timeout = issuer, client_id, timeout
        self._started: dict[str, _Started] = {}
        self.public_base: str | None = None  # the HTTP desk's public address; else the address the browser used
        self._sessions: dict[str, _Session] = {}

    async def who(self, request: Request, link: str, pending: Pending) -> SignedIn | Response:
        session = self._sessions.get(request.cookies.get(SESSION_COOKIE, ""))
        if session is not None and session.link_hash == _link_hash(link) and session.expires_at > time.time():
            note = f"You signed in at {self.issuer} as {session.approver}; the journal records you by subject."
            return SignedIn(session.approver, note, session.key)
        return await self._start(request, link)

    async def _start(self, request: Request, link: str) -> Response:
        metadata = await self._metadata()
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        browser = request.cookies.get(BROWSER_COOKIE) or secrets.token_urlsafe(24)
        redirect_uri = (self.public_base or str(request.base_url)).rstrip("/") + SIGN_IN_CALLBACK
        self._forget_old()
        self._started[state] = _Started(link, browser, verifier, nonce, redirect_uri, time.time() + SIGN_IN_SECONDS)
        query = {
            "client_id": self.client_id,
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "scope": "openid profile",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "nonce": nonce,
        }
        response = RedirectResponse(f"{metadata['authorization_endpoint']}?{urlencode(query)}", status_code=303)
        # Lax: the provider's redirect back is a cross-site top-level navigation, which must carry it.
        response.set_cookie(BROWSER_COOKIE, browser, httponly=True, samesite="lax", path="/approvals/")
        return response

    async def callback(self, request: Request) -> tuple[str, str] | str:
        """Finish a sign-in: (the link to go back to, a new session id), or why it is refused."""
        state = request.query_params.get("state", "")
        started = self._started.pop(state, None)
        if started is None or started.expires_at < time.time():
            return "this sign-in is unknown or expired: open the approval link again"
        if request.cookies.get(BROWSER_COOKIE) != started.browser:
            return "this sign-in was started in another browser"
        if "error" in request.query_params:
            return f"the identity provider refused the sign-in ({request.query_params['error'][:100]})"
        code = request.query_params.get("code", "")
        try:
            approver, key = await self._redeem(code, started)
        except (IssuerUnavailable, TokenRejected) as exc:
            log.warning("approval page sign-in failed", problem=str(exc))
            return f"the sign-in could not be checked: {exc}"
        session = secrets.token_urlsafe(32)
        self._sessions[session] = _Session(approver, key, _link_hash(started.link), time.time() + SIGN_IN_SECONDS)
        log.info("approval page sign-in", approver=approver)
        return started.link, session

    async def _redeem(self, code: str, started: _Started) -> tuple[str, str]:
        """The signed-in person's label (for the journal) and key (issuer and subject, for comparing people)."""
        metadata = await self._metadata()
        request = outside.Request(
            "POST",
            str(metadata["token_endpoint"]),
            what="the identity provider's token endpoint",
            deadline_seconds=self._timeout,
            max_bytes=256 * 1024,
            form={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": started.redirect_uri,
                "code_verifier": started.verifier,
                "client_id": self.client_id,
            },
            headers={"Accept": "application/json"},
        )
        answer = await exchange_json(request)
        id_token = answer.get("id_token") if isinstance(answer, dict) else None
        if not isinstance(id_token, str):
            raise TokenRejected("the identity provider sent no ID token")
        checker = OAuthVerifier(
            issuer=self.issuer,
            audience=self.client_id,
            jwks_url=None,
            introspection_url=None,
            introspection_auth=None,
            scope_map={},
            timeout_seconds=self._timeout,
        )
        principal = await checker.verify(id_token)
        claims = jwt.decode(id_token, options={"verify_signature": False})
        if claims.get("nonce") != started.nonce:
            raise TokenRejected("the ID token's nonce is not the one this sign-in sent")
        return principal.label, principal.owner

    async def _metadata(self) -> dict[str, object]:
        document = await fetch_json(
            self.issuer.rstrip("/") + "/.well-known/openid-configuration", "the issuer's metadata", self._timeout
        )
        if not isinstance(document, dict) or document.get("issuer") != self.issuer:
            raise IssuerUnavailable(f"the metadata of {self.issuer} does not name it as issuer")
        return document

    def _forget_old(self) -> None:
        now = time.time()
        for state in [s for s, started in self._started.items() if started.expires_at < now]:
            del self._started[state]
        for session in [s for s, kept in self._sessions.items() if kept.expires_at < now]:
            del self._sessions[session]
