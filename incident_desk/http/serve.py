"""Streamable HTTP mode: a shared desk at ``/mcp`` with ``/healthz``, DNS-rebinding checks and bearer auth.

Loopback by default. Binding any other address requires a bearer token (from the keychain or the environment,
never a flag), and the desk refuses to start without one (the token check itself lives in ``auth``).
"""

from __future__ import annotations

import socket
import sys
from types import FrameType
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from incident_desk import __version__
from incident_desk.app import DeskApp
from incident_desk.approvals import out_of_band
from incident_desk.approvals.page import page_routes
from incident_desk.approvals.signin import OpenIDSignIn
from incident_desk.http.bearer import HEALTH_PATH, BearerAuth
from incident_desk.http.limits import guarded_protocol
from incident_desk.http.oauth_bearer import OAuthBearer
from incident_desk.http.peers import ClientAddress, RebindingGuard
from incident_desk.http.replica import ReplicaTag
from incident_desk.http.sessions import SessionLimiter
from incident_desk.identity.oauth import IssuerUnavailable, OAuthVerifier, resource_url, verifier_for
from incident_desk.observability.telemetry import CONTENT_TYPE, CallTelemetry
from incident_desk.protocol.eras import era_features
from incident_desk.settings.model import Settings, is_loopback

if TYPE_CHECKING:
    import uvicorn


class _Signalled(Protocol):
    stopped_by: int | None

    def run(self, sockets: list[socket.socket] | None = None) -> None: ...


logger = structlog.get_logger(__name__)

MCP_PATH = "/mcp"
METRICS_PATH = "/metrics"
DESCRIPTOR_RESERVE = 64  # the journal, data files being read, the listening socket, logs


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


def build_asgi(server: MCPServer, app: DeskApp, token: str | None, verifier: OAuthVerifier | None = None) -> ASGIApp:
    settings = app.settings

    async def healthz(_: Request) -> Response:
        # Liveness only, O(1): polled by load balancers, so it must never scan the data directory on the loop.
        return JSONResponse({"status": "ok", "version": __version__})

    # The SDK's route decorator is untyped; registering through it keeps mypy strict elsewhere.
    add_route = server.custom_route(HEALTH_PATH, methods=["GET"], include_in_schema=False)
    add_route(healthz)
    telemetry = next((layer for layer in server.middleware if isinstance(layer, CallTelemetry)), None)
    if telemetry is not None and telemetry.metrics is not None:
        counted = telemetry

        async def metrics(_: Request) -> Response:
            # Behind BearerAuth like /mcp: call counts and tool names are the operator's business.
            return Response(counted.exposition(app.sources.health), media_type=CONTENT_TYPE)

        add_metrics = server.custom_route(METRICS_PATH, methods=["GET"], include_in_schema=False)
        add_metrics(metrics)

    serve_approval_page(server, app)
    security = transport_security(settings)
    asgi: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=settings.stateless,
        transport_security=security,
        host=settings.host,
        session_idle_timeout=settings.http_session_idle_seconds,
        max_sessions=settings.http_max_sessions,
    )
    if not settings.stateless:  # stateless: no sessions to count
        asgi = SessionLimiter(
            asgi,
            path=MCP_PATH,
            per_client=settings.http_max_sessions_per_client,
            max_sessions=settings.http_max_sessions,
            idle_seconds=settings.http_session_idle_seconds,
        )
        if settings.replica_tag:
            asgi = ReplicaTag(asgi, settings.replica_tag)
    # Outermost first: the real client address, then Host and Origin, then the token, then the accounting.
    if settings.http_auth == "oauth":
        resource = resource_url(settings, MCP_PATH)
        from incident_desk.features import tool_catalog

        scopes = {name: declared.kind.scope for name, declared in tool_catalog().items()}
        checker = verifier or verifier_for(settings, resource)
        asgi = OAuthBearer(asgi, checker, resource=resource, mcp_path=MCP_PATH, tool_scopes=scopes)
        token = None  # the shared token's layer keeps its header and URL checks; OAuthBearer checks the person
    authenticated = BearerAuth(asgi, token)
    guarded = RebindingGuard(authenticated, path=MCP_PATH, security=security)
    return ClientAddress(guarded, settings.trusted_proxies)


def serve_approval_page(server: MCPServer, app: DeskApp) -> None:
    """The out-of-band approval page as a route of this desk, reached at its public address."""
    settings = app.settings
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host  # noqa: S104 - compared, not bound
    host = f"[{host}]" if ":" in host else host
    approvals = out_of_band.approval_store(app)
    approvals.base_url = (settings.public_url or f"http://{host}:{settings.port}").rstrip("/")
    if isinstance(approvals.identity, OpenIDSignIn):
        approvals.identity.public_base = approvals.base_url
    for route in page_routes(approvals.book, approvals.identity, approvals.incident_view):
        add_page = server.custom_route(route.path, methods=sorted(route.methods or ()), include_in_schema=False)
        add_page(route.endpoint)


def ensure_descriptors(max_connections: int) -> str | None:
    """Make room for ``max_connections`` sockets plus the desk's own files; why not, when the OS will not."""
    try:
        import resource
    except ImportError:  # Windows: no per-process descriptor limit to raise
        return None
    needed = max_connections + DESCRIPTOR_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    if hard != resource.RLIM_INFINITY and hard < needed:
        return (
            f"http_max_connections ({max_connections}) needs {needed} file descriptors, but this process may open "
            f"at most {hard} (ulimit -Hn): lower http_max_connections or raise the limit"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return None


def resolve_token(settings: Settings) -> tuple[str | None, str | None]:
    """The bearer token and where it came from (environment or keychain); never from a flag or file."""
    from incident_desk.core import credentials

    found = credentials.resolve_secret(settings.http_token, settings.keyring_service, credentials.HTTP_TOKEN)
    if found.problem:
        # On loopback the desk serves without a token, so a missing keychain is news only to someone debugging.
        log = logger.debug if is_loopback(settings.host) else logger.warning
        log("keychain lookup for the HTTP token failed", problem=found.problem)
    return found.value, found.source


def serve_http(server: MCPServer, app: DeskApp) -> int:
    import uvicorn

    settings = app.settings
    verifier: OAuthVerifier | None = None
    if settings.http_auth == "oauth":
        token, source = None, None
        if settings.public_url is None and not is_loopback(settings.host):
            sys.stderr.write(
                "incident-desk: http_auth = 'oauth' beyond loopback needs public_url (the address clients use, "
                "e.g. https://desk.example.com): it is the resource tokens must be issued for.\n"
            )
            return 2
        verifier = verifier_for(settings, resource_url(settings, MCP_PATH))
        try:
            anyio.run(verifier.warm)
        except IssuerUnavailable as exc:
            # Served anyway: each request answers 503 naming the problem until the issuer is back.
            logger.warning("the OAuth issuer is unavailable at start; tokens cannot be checked yet", problem=str(exc))
    else:
        token, source = resolve_token(settings)
    if token is None and verifier is None and not is_loopback(settings.host):
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
    problem = ensure_descriptors(settings.http_max_connections)
    if problem:
        sys.stderr.write(f"incident-desk: refusing to serve: {problem}.\n")
        return 2
    try:
        listener = listen(settings.host, settings.port)
    except OSError as exc:
        sys.stderr.write(
            f"incident-desk: cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}. "
            "Is another desk already running there? Choose another port with --port or INCIDENT_DESK_PORT.\n"
        )
        return 2
    asgi = build_asgi(server, app, token, verifier)
    logger.info(
        "serving Streamable HTTP",
        url=f"http://{settings.host}:{settings.port}{MCP_PATH}",
        stateless=settings.stateless,
        replica_tag=settings.replica_tag,
        auth=_auth_description(settings, token, source),
        **{f"era_{era}": features for era, features in era_features(stateless=settings.stateless).items()},
    )
    config = uvicorn.Config(
        asgi,
        host=settings.host,
        port=settings.port,
        log_config=None,  # keep uvicorn on the desk's stderr handlers; it never writes to stdout
        access_log=settings.log_level == "debug",
        lifespan="on",
        server_header=False,
        http=guarded_protocol(settings.http_max_connections, settings.http_read_timeout_seconds),
        proxy_headers=False,  # forwarded headers are read by peers.ClientAddress, from trusted_proxies only
        ws="none",
    )
    server_process = _signalled_server(config)
    server_process.run(sockets=[listener])
    # uvicorn raises a stopping signal again once it has shut down (so SIGINT ends as KeyboardInterrupt, 130);
    # when asyncio's own SIGINT handling swallows that re-raise, the exit status still says what stopped it.
    return 128 + server_process.stopped_by if server_process.stopped_by else 0


def _signalled_server(config: uvicorn.Config) -> _Signalled:
    """uvicorn's server, remembering the first signal that asked it to stop (imported here: serving over stdio
    never loads uvicorn)."""
    import uvicorn

    class SignalledServer(uvicorn.Server):
        stopped_by: int | None = None

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            self.stopped_by = self.stopped_by or sig
            super().handle_exit(sig, frame)

    return SignalledServer(config)


def _auth_description(settings: Settings, token: str | None, source: str | None) -> str:
    if settings.http_auth == "oauth":
        return f"OAuth access tokens from {settings.oauth_issuer}"
    return "bearer token from " + source if token and source else "none (loopback only)"


def listen(host: str, port: int) -> socket.socket:
    """Bind before announcing anything: a busy port is a clear error at start, not a log line after 'serving'."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
