"""Out-of-band approval test helpers: a person at a browser, played with plain HTTP (httpx2) against the page."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitRequestURLParams, ElicitResult, ErrorData

CSRF = re.compile(r"name='csrf' value='([^']+)'")


@dataclass
class PageVisit:
    """What the person saw and answered on one page."""

    status: int
    text: str
    headers: dict[str, str]
    decided: int | None = None


def visit(url: str, decision: str = "approve", ticket: str = "CHG-2291", *, post: bool = True) -> PageVisit:
    """Open the page and (with ``post``) answer it as a browser would: form field plus the SameSite cookie."""
    with httpx2.Client(timeout=10) as browser:
        page = browser.get(url)
        seen = PageVisit(page.status_code, page.text, dict(page.headers))
        if post and page.status_code == 200:
            token = CSRF.search(page.text)
            assert token, page.text
            answer = browser.post(url, data={"csrf": token.group(1), "decision": decision, "ticket": ticket})
            seen.decided = answer.status_code
            seen.text += answer.text
    return seen


@dataclass
class LinkFollower:
    """The client's URL-mode callback: records the link; with ``decision`` a person opens it and decides; the
    client's own answer (``client_action``, with a form-like content) must never count."""

    decision: str | None = "approve"
    client_action: str = "accept"
    ticket: str = "CHG-2291"
    urls: list[str] = field(default_factory=list)
    visits: list[PageVisit] = field(default_factory=list)
    form_asks: list[ElicitRequestParams] = field(default_factory=list)

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        if not isinstance(params, ElicitRequestURLParams):
            self.form_asks.append(params)
            return ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-FORGED"})
        self.urls.append(params.url)
        if self.decision is not None:
            decision, ticket = self.decision, self.ticket
            self.visits.append(await anyio.to_thread.run_sync(lambda: visit(params.url, decision, ticket)))
        # A client that accepts sends a ticked form with a ticket of its own: it must count for nothing.
        content: dict[str, Any] | None = None
        if self.client_action == "accept":
            content = {"confirm": True, "ticket": "CHG-FORGED"}
        return ElicitResult(action=self.client_action, content=content)  # type: ignore[arg-type]
