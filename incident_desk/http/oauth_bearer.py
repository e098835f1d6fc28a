"""The OAuth layer of the HTTP desk: Protected Resource Metadata (RFC 9728), 401 challenges, scopes per tool.

It sits where the shared-token check sits in ``token`` mode (inside ``auth.BearerAuth``, which still refuses two
Authorization headers or a credential in the URL and strips any principal header a client sent). A checked token
names its person in that header for the journal and the session limiter; a tool call beyond the caller's scopes
is answered 403 ``insufficient_scope`` naming the scope needed, before the SDK sees it, so clients can step up.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from incident_desk.http.bearer import is_open_path
from incident_desk.identity.oauth import IssuerUnavailable, OAuthVerifier, TokenRejected
from incident_desk.identity.principal import PRINCIPAL_HEADER, PRINCIPAL_KEY_HEADER
from incident_desk.protocol.tool_kinds import READ_SCOPE, SCOPES

# Refusals a peer can repeat at will, without a token that checks out, go through the standard library's logging,
# whose handler counts repeats and holds them back per interval (``observability.log.RepeatLimiter``), as it does
# for the SDK's and uvicorn's own refusals: 2,000 bad tokens are five lines and a count, not 2,000 lines.
refusals = logging.getLogger(__name__ + ".refusals")

PRM_PATH = "/.well-known/oauth-protected-resource"
MAX_INSPECTED_BODY = 4 * 1024 * 1024  # a JSON-RPC request whose tool call is read for its scope


class OAuthBearer:
    """Serve the PRM document; let in requests whose access token checks out and whose scopes suffice."""

    def __init__(
        self, app: ASGIApp, verifier: OAuthVerifier, *, resource: str, mcp_path: str, tool_scopes: Mapping[str, str]
    ) -> None:
        """``tool_scopes``: the scope each tool needs, from its declared kind (``tool_kinds``); a name the desk
        has no tool for needs incidents:read, and the SDK answers that it does not exist."""
        self._app = app
        self._tool_scopes = dict(tool_scopes)
        self._verifier = verifier
        self._resource = resource
        self._mcp_path = mcp_path
        base = resource[: -len(mcp_path)] if resource.endswith(mcp_path) else resource.rstrip("/")
        self.metadata_url = f"{base}{PRM_PATH}{mcp_path}"
        self._metadata = {
            "resource": resource,
            "authorization_servers": [verifier.issuer],
            "scopes_supported": [verifier.issuer_scope(scope) for scope in SCOPES],
            "bearer_methods_supported": ["header"],
            "resource_name": "incident-desk",
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_open_path(str(scope.get("path", ""))):
            await self._app(scope, receive, send)
            return
        path = scope.get("path")
        if path in (PRM_PATH, PRM_PATH + self._mcp_path):
            await JSONResponse(self._metadata, headers={"cache-control": "max-age=3600"})(scope, receive, send)
            return
        headers = list(scope.get("headers", []))
        presented = next((value for name, value in headers if name.lower() == b"authorization"), b"")
        scheme, _, credential = presented.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            await self._challenge(scope, receive, send, 401, None, "a bearer access token is required", READ_SCOPE)
            return
        try:
            principal = await self._verifier.verify(credential.strip())
        except TokenRejected as exc:
            refusals.info("access token refused: %s", exc)
            await self._challenge(scope, receive, send, 401, "invalid_token", str(exc), READ_SCOPE)
            return
        except IssuerUnavailable as exc:
            refusals.warning("cannot check access tokens: the issuer is unavailable: %s", exc)
            refusal = {"error": "issuer_unavailable", "message": f"cannot check the token: {exc}"}
            await JSONResponse(refusal, status_code=503, headers={"retry-after": "5"})(scope, receive, send)
            return
        needed = READ_SCOPE
        if scope.get("method") == "POST" and path == self._mcp_path:
            payload, receive = await _buffered(receive)
            if payload is None:
                await JSONResponse({"error": "request_too_large"}, status_code=413)(scope, receive, send)
                return
            needed = next((s for s in self._called_tools_scopes(payload) if s not in principal.scopes), READ_SCOPE)
        if needed not in principal.scopes:
            refusals.info("call beyond the token's scopes: %s needs %s", principal.label, needed)
            await self._challenge(
                scope, receive, send, 403, "insufficient_scope", f"this needs the scope {needed}", needed
            )
            return
        headers.append((PRINCIPAL_HEADER.encode(), principal.label.encode()))
        headers.append((PRINCIPAL_KEY_HEADER.encode(), principal.owner.encode()))
        await self._app({**scope, "headers": headers}, receive, send)

    def _called_tools_scopes(self, body: bytes) -> list[str]:
        """The scopes the tool calls in a JSON-RPC request (or batch) need; bad JSON is the SDK's to answer."""
        try:
            parsed: Any = json.loads(body)
        except ValueError:
            return []
        messages = parsed if isinstance(parsed, list) else [parsed]
        names = [
            (message.get("params") or {}).get("name") if isinstance(message.get("params"), dict) else None
            for message in messages
            if isinstance(message, dict) and message.get("method") == "tools/call"
        ]
        return [self._tool_scopes.get(name, READ_SCOPE) if isinstance(name, str) else READ_SCOPE for name in names]

    async def _challenge(
        self, request: Scope, receive: Receive, send: Send, status: int, error: str | None, message: str, scope: str
    ) -> None:
        wanted = self._verifier.issuer_scope(scope)
        parts = [f'resource_metadata="{self.metadata_url}"', f'scope="{wanted}"']
        if error:
            parts.insert(0, f'error="{error}"')
            parts.append('error_description="' + message.replace('"', "'") + '"')
        challenge = "Bearer " + ", ".join(parts)
        body = {"error": error or "unauthorized", "message": message, "scope": wanted}
        header = challenge.encode("latin-1", "replace").decode("latin-1")
        await JSONResponse(body, status_code=status, headers={"www-authenticate": header})(request, receive, send)


async def _buffered(receive: Receive) -> tuple[bytes | None, Receive]:
    """The whole request body (None past the cap) and a receive that replays it to the app.

    The replayed ``http.request`` message is written by hand: Starlette has types for answering, not for
    playing a request back to the app.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > MAX_INSPECTED_BODY:
            return None, receive
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay
