"""Streamable HTTP mode: a shared desk at ``/mcp`` with ``/healthz``, DNS-rebinding checks and bearer auth.

Loopback by default. Binding any other address requires a bearer token (from the keychain or the environment,
never a flag), and the desk refuses to start without one. The auth layer is a small pure-ASGI wrapper: one
shared token is what a team desk behind a VPN needs, and it keeps the SDK's OAuth machinery (which would
advertise an authorization server the desk does not have) out of the picture.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from incident_desk import __version__
from incident_desk.server import DeskApp
from incident_desk.settings import Settings

logger = structlog.get_logger(__name__)

PRINCIPAL_HEADER = "x-incident-desk-principal"
HEALTH_PATH = "/healthz"
MCP_PATH = "/mcp"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_fingerprint(token: str) -> str:
    """A stable, non-reversible name for a token: who approved, without storing the secret."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


class BearerAuth:
    """Require ``Authorization: Bearer <token>`` on everything but /healthz; name the principal for the tools.

    The principal header is always stripped from the incoming request, so a client can never claim one: it is
    set only after the token has been checked.
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self._app = app
        self._token = token.encode() if token else None
        self._principal = f"bearer:{token_fingerprint(token)}" if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope.get("headers", []) if k.decode("latin-1").lower() != PRINCIPAL_HEADER]
        if self._token is not None and scope.get("path") != HEALTH_PATH:
            presented = dict(headers).get(b"authorization", b"")
            scheme, _, credential = presented.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(credential.strip(), self._token):
                error = "invalid_token" if presented else None
                await _unauthorized(send, error)
                return
            headers.append((PRINCIPAL_HEADER.encode(), (self._principal or "").encode()))
        await self._app({**scope, "headers": headers}, receive, send)


async def _unauthorized(send: Send, error: str | None) -> None:
    challenge = 'Bearer realm="incident-desk"' + (f', error="{error}"' if error else "")
    body = b'{"error":"unauthorized","message":"a valid bearer token is required"}'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", challenge.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection, always on: loopback names plus the bind address plus configured extras."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if settings.host not in ("0.0.0.0", "::", "127.0.0.1", "localhost", "::1"):  # noqa: S104 - compared, not bound
        bracketed = f"[{settings.host}]" if ":" in settings.host else settings.host
        hosts.append(f"{bracketed}:*")
        origins.append(f"http://{bracketed}:*")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts + list(settings.allowed_hosts),
        allowed_origins=origins + list(settings.allowed_origins),
    )


def era_features(settings: Settings) -> dict[str, str]:
    """What each protocol era gets in this mode, logged at start so a stateless surprise is never silent."""
    if settings.stateless:
        legacy = (
            "tools listed in full; no back-channel: summarize_incident uses the provider or the raw log, "
            "restart_service refuses (ELICITATION_UNAVAILABLE)"
        )
    else:
        legacy = "sampling and elicitation on the open call (stateful sessions)"
    modern = "approval and sampling by multi round-trip (input_required), in any mode"
    return {"2025-11-25": legacy, "2026-07-28": modern}


def build_asgi(server: MCPServer, app: DeskApp, token: str | None) -> ASGIApp:
    settings = app.settings

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__, "incidents": len(app.desk.incidents())})

    # The SDK's route decorator is untyped; registering through it keeps mypy strict elsewhere.
    add_route = server.custom_route(HEALTH_PATH, methods=["GET"], include_in_schema=False)
    add_route(healthz)

    asgi = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=settings.stateless,
        transport_security=transport_security(settings),
        host=settings.host,
    )
    return BearerAuth(asgi, token)


def resolve_token(settings: Settings) -> tuple[str | None, str | None]:
    """The bearer token and where it came from (environment or keychain); never from a flag or file."""
    from incident_desk.core import credentials

    found = credentials.resolve_secret(settings.http_token, settings.keyring_service, credentials.HTTP_TOKEN)
    if found.problem:
        logger.warning("keychain lookup for the HTTP token failed", problem=found.problem)
    return found.value, found.source


def serve_http(server: MCPServer, app: DeskApp) -> int:
    import uvicorn

    settings = app.settings
    token, source = resolve_token(settings)
    if token is None and not is_loopback(settings.host):
        sys.stderr.write(
            f"incident-desk: refusing to serve on {settings.host}: binding beyond loopback requires a bearer "
            "token. Create one with `incident-desk token create` (keychain) or set INCIDENT_DESK_HTTP_TOKEN.\n"
        )
        return 2
    if settings.host in ("0.0.0.0", "::") and not settings.allowed_hosts:  # noqa: S104 - compared, not bound
        sys.stderr.write(
            f"incident-desk: refusing to serve on {settings.host} without allowed_hosts: DNS-rebinding protection "
            "would answer every remote client 421. Set allowed_hosts to the names clients use, e.g. "
            "INCIDENT_DESK_ALLOWED_HOSTS='[\"desk.example.com:*\"]'.\n"
        )
        return 2
    asgi = build_asgi(server, app, token)
    logger.info(
        "serving Streamable HTTP",
        url=f"http://{settings.host}:{settings.port}{MCP_PATH}",
        stateless=settings.stateless,
        auth="bearer token from " + source if token and source else "none (loopback only)",
        **{f"era_{era}": features for era, features in era_features(settings).items()},
    )
    config = uvicorn.Config(
        asgi,
        host=settings.host,
        port=settings.port,
        log_config=None,  # keep uvicorn on the desk's stderr handlers; it never writes to stdout
        access_log=settings.log_level == "debug",
        lifespan="on",
        server_header=False,
    )
    uvicorn.Server(config).run()
    return 0
