"""The replica tag in 2025 session ids, so a stock nginx ``map`` keeps each stateful session on its replica.

The SDK makes session ids itself (``uuid4().hex``) with no knob, and keeps sessions in process memory. This layer
sends ``{tag}.{id}`` to clients and hands the SDK back its own id; an id tagged for another replica is left as it
is, so it is unknown here (404), never mistaken for a local session. 2026-07-28 requests carry no session id.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

SESSION_HEADER = b"mcp-session-id"


class ReplicaTag:
    def __init__(self, app: ASGIApp, tag: str) -> None:
        self._app = app
        self._prefix = f"{tag}.".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        prefix = self._prefix
        headers = [
            (name, value[len(prefix) :] if name == SESSION_HEADER and value.startswith(prefix) else value)
            for name, value in scope["headers"]
        ]

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [
                    (name, prefix + value if name.lower() == SESSION_HEADER else value)
                    for name, value in message.get("headers", [])
                ]
            await send(message)

        await self._app({**scope, "headers": headers}, receive, tagged)
