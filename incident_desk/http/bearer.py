"""The HTTP bearer-token layer: one shared token, checked before anything else sees the request.

It is a small pure-ASGI wrapper: one shared token is what a team desk behind a VPN needs, and it keeps
the SDK's OAuth machinery (which would advertise an authorization server the desk does not have) out of the
picture. It names the checked principal in a header that only it can set; ``identity.principal`` reads it back.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qsl, unquote_plus

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from incident_desk.approvals import PAGE_PREFIX as APPROVAL_PAGE_PREFIX
from incident_desk.identity.principal import PRINCIPAL_HEADER
from incident_desk.identity.principal import SET_BY_THE_DESK as _SET_BY_THE_DESK

HEALTH_PATH = "/healthz"
# Query parameter names that carry credentials, compared without case, "-" or "_" (access_token, api-key...).
CREDENTIAL_PARAMETERS = frozenset(
    {"token", "accesstoken", "authtoken", "idtoken", "bearer", "auth", "authorization", "apikey", "key", "secret"}
)


def token_fingerprint(token: str) -> str:
    """A stable, non-reversible name for a token: who approved, without storing the secret."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


class BearerAuth:
    """Require ``Authorization: Bearer <token>`` on everything but /healthz; name the principal for the tools.

    The principal header is always stripped from the incoming request, so a client can never claim one: it is
    set only after the token has been checked. On every path, with or without a token configured, a request with
    two Authorization headers or a credential in its URL is refused (400) before anything else reads it.
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self._app = app
        self._token = token.encode() if token else None
        self._principal = f"bearer:{token_fingerprint(token)}" if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope.get("headers", []) if k.decode("latin-1").lower() not in _SET_BY_THE_DESK]
        authorizations = [value for name, value in headers if name.lower() == b"authorization"]
        if len(authorizations) > 1:
            # Proxies and servers disagree on which copy counts; a request that carries two is refused, not guessed.
            await _bad_request(scope, receive, send, f"send one Authorization header, not {len(authorizations)}")
            return
        if self._credential_in_url(scope):
            await _bad_request(
                scope,
                receive,
                send,
                "credentials do not belong in the URL, where logs and proxies keep them: "
                "send the token in the Authorization header",
            )
            return
        if self._token is not None and not is_open_path(str(scope.get("path", ""))):
            presented = authorizations[0] if authorizations else b""
            scheme, _, credential = presented.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(credential.strip(), self._token):
                error = "invalid_token" if presented else None
                await _unauthorized(scope, receive, send, error)
                return
            headers.append((PRINCIPAL_HEADER.encode(), (self._principal or "").encode()))
        await self._app({**scope, "headers": headers}, receive, send)

    def _credential_in_url(self, scope: Scope) -> bool:
        """A query parameter named like a credential, or the desk's own token anywhere in the path or query."""
        query = bytes(scope.get("query_string", b"")).decode("latin-1")
        names = {name.lower().replace("_", "").replace("-", "") for name, _ in parse_qsl(query, keep_blank_values=True)}
        if names & CREDENTIAL_PARAMETERS:
            return True
        if self._token is None:
            return False
        token = self._token.decode("latin-1")
        path = bytes(scope.get("raw_path") or str(scope.get("path", "")).encode()).decode("latin-1")
        return token in unquote_plus(query) or token in unquote_plus(path)


def is_open_path(path: str) -> bool:
    """Paths served without the desk's token: liveness, and the approval page (its link is its credential)."""
    return path == HEALTH_PATH or path.startswith(APPROVAL_PAGE_PREFIX)


async def _bad_request(scope: Scope, receive: Receive, send: Send, message: str) -> None:
    await JSONResponse({"error": "bad_request", "message": message}, status_code=400)(scope, receive, send)


async def _unauthorized(scope: Scope, receive: Receive, send: Send, error: str | None) -> None:
    challenge = 'Bearer realm="incident-desk"' + (f', error="{error}"' if error else "")
    body = {"error": "unauthorized", "message": "a valid bearer token is required"}
    await JSONResponse(body, status_code=401, headers={"www-authenticate": challenge})(scope, receive, send)
