"""Who an HTTP peer is, checked before anything counts it: its real address, and the Host and Origin it sent.

uvicorn would trust ``X-Forwarded-For`` from loopback by default, so any local process could name itself any
client and escape the per-client session cap. Here forwarded headers (``X-Forwarded-For`` and the standard
``Forwarded``) are read only when the connection comes from a configured proxy (``trusted_proxies``); the client
is then the nearest address in the chain that is not itself a trusted proxy. From any other peer they are ignored.

The DNS-rebinding checks (Host, Origin) are the SDK's own; running them here, ahead of the session accounting,
means a foreign Host gets 421 and a foreign Origin 403 however many sessions its client holds.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
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
            refusal = await self._checks.validate_request(Request(scope, receive), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self._app(scope, receive, send)
