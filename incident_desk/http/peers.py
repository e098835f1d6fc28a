"""Who an HTTP peer is, checked before anything counts it: its real address, and the Host and Origin it sent.

uvicorn would trust ``X-Forwarded-For`` from loopback by default, so any local process could name itself any
client and escape the per-client session cap. Here forwarded headers (``X-Forwarded-For`` and the standard
``Forwarded``) are read only when the connection comes from a configured proxy (``trusted_proxies``); the client
is then the nearest address in the chain that is not itself a trusted proxy. From any other peer they are ignored.

The DNS-rebinding checks (Host, Origin) are the SDK's own; running them here, ahead of the session accounting,
means a foreign Host gets 421 and a foreign Origin 403 however many sessions its client holds. The SDK matches an
allowed ``127.0.0.1:*`` by prefix, so ``127.0.0.1:8000@evil.example`` passed it: a Host or Origin must first be
well formed (a name or address and a numeric port, an Origin's scheme; no user information, path or anything else).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ClientAddress:
    """Set ``scope["client"]`` to the real client when the peer is a trusted proxy; otherwise leave the peer."""

    def __init__(self, app: ASGIApp, trusted: Sequence[Network]) -> None:
        self._app = app
        self._trusted = tuple(trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._trusted:
            client = scope.get("client")
            if client and self._is_trusted(client[0]):
                forwarded = self._client_from_headers(scope.get("headers", []))
                if forwarded is not None:
                    scope = {**scope, "client": (forwarded, 0)}
        await self._app(scope, receive, send)

    def _is_trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self._trusted if network.version == ip.version)

    def _client_from_headers(self, headers: Sequence[tuple[bytes, bytes]]) -> str | None:
        """The nearest hop that is not a trusted proxy (``Forwarded`` wins over ``X-Forwarded-For``)."""
        hops = forwarded_hops(headers)
        for hop in reversed(hops):
            if not self._is_trusted(hop):
                return hop
        return hops[0] if hops else None


def forwarded_hops(headers: Sequence[tuple[bytes, bytes]]) -> list[str]:
    """Client addresses named by ``Forwarded: for=`` (RFC 7239) or else ``X-Forwarded-For``, farthest first."""
    standard = [value.decode("latin-1") for name, value in headers if name.lower() == b"forwarded"]
    if standard:
        hops = []
        for element in ",".join(standard).split(","):
            for pair in element.split(";"):
                key, _, value = pair.strip().partition("=")
                if key.lower() == "for" and value:
                    hops.append(_bare_address(value))
        return [hop for hop in hops if hop]
    legacy = [value.decode("latin-1") for name, value in headers if name.lower() == b"x-forwarded-for"]
    return [hop for hop in (_bare_address(part) for part in ",".join(legacy).split(",")) if hop]


def _bare_address(value: str) -> str:
    """``"[2001:db8::1]:4711"`` -> ``2001:db8::1``; ``192.0.2.1:80`` -> ``192.0.2.1``; others as given."""
    value = value.strip().strip('"')
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") == 1:  # IPv4 with a port; a bare IPv6 address has several colons
        return value.partition(":")[0]
    return value


class RebindingGuard:
    """The SDK's Host and Origin checks on ``path``, before the session accounting behind this layer sees it."""

    def __init__(self, app: ASGIApp, *, path: str, security: TransportSecuritySettings) -> None:
        self._app = app
        self._path = path
        self._checks = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") == self._path:
            request = Request(scope, receive)
            refusal = _malformed(request) or await self._checks.validate_request(request, is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self._app(scope, receive, send)


# What a host name may hold (letters, digits, '.', '-', '_'); an IPv6 address comes in brackets.
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
_HEX_AND_COLONS = frozenset("0123456789abcdefABCDEF:.")


def well_formed_authority(value: str) -> bool:
    """``name``, ``name:port``, ``[v6]`` or ``[v6]:port``, nothing else: no ``user@``, path, query or space."""
    if value.startswith("["):
        address, closed, rest = value[1:].partition("]")
        if not closed or not address or not set(address) <= _HEX_AND_COLONS:
            return False
        port = rest[1:] if rest.startswith(":") else None if not rest else ""
    else:
        name, colon, port_text = value.partition(":")
        if not name or not set(name) <= _NAME_CHARACTERS:
            return False
        port = port_text if colon else None
    return port is None or (port.isascii() and port.isdigit() and len(port) <= 5)


def well_formed_origin(value: str) -> bool:
    """``http(s)://`` and a well-formed authority, nothing after it (an Origin has no path, user or query)."""
    scheme, separator, authority = value.partition("://")
    return scheme.lower() in ("http", "https") and bool(separator) and well_formed_authority(authority)


def _malformed(request: Request) -> Response | None:
    """421 for a Host, 403 for an Origin that is not well formed, before the SDK's allow-list sees it."""
    host = request.headers.get("host")
    if host is not None and not well_formed_authority(host):
        return Response("Invalid Host header", status_code=421)
    origin = request.headers.get("origin")
    if origin and origin != "null" and not well_formed_origin(origin):
        return Response("Invalid Origin header", status_code=403)
    return None
