"""The approval page of out-of-band approvals: what the person opens from the link, never the client.

``GET /approvals/{link}`` shows the act, its target, the requester, the reason and who may approve, with an approve
or decline form; ``POST`` records the decision once. Protections: the link is single use and expires with the
approval timeout; the form carries a CSRF token that must also come back in a SameSite=Strict cookie; the page
may not be framed (``X-Frame-Options: DENY``, CSP ``frame-ancestors 'none'``) and sends no Referer (the link is in
its URL). On the HTTP desk the page is a route of the desk; over stdio :class:`LoopbackPage` serves it on a
loopback port while any approval is pending.
"""

from __future__ import annotations

import asyncio
import html
import math
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import anyio
import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from incident_desk.approvals import PAGE_PREFIX as APPROVAL_PAGE_PREFIX
from incident_desk.approvals.signin import (
    SESSION_COOKIE,
    SIGN_IN_CALLBACK,
    Identity,
    OpenIDSignIn,
    OsUser,
    SignedIn,
)
from incident_desk.core.acts.approval import MAX_TICKET_CHARS, TICKET
from incident_desk.core.acts.links import ApprovalBook, LinkRefused, PageStep, Pending, SelfApproval, State
from incident_desk.core.journal.audit import AuditError
from incident_desk.identity.oauth import IssuerUnavailable

if TYPE_CHECKING:
    from incident_desk.approvals.context import IncidentView

log = structlog.get_logger(__name__)

# What the page shows of the incident behind an approval's target (blocking; run in a worker thread).
IncidentLookup = Callable[[str], "IncidentView | None"]

PAGE_PREFIX = APPROVAL_PAGE_PREFIX
CSRF_COOKIE = "incident_desk_approval_csrf"
MAX_FORM_BYTES = 4096  # a ticket, a decision and a CSRF token
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


# The page's one stylesheet, inline: the CSP allows inline styles (``style-src 'unsafe-inline'``) and nothing else,
# so the page loads no asset. Laid out for a phone first (360 px wide) and capped at a readable desktop width.
STYLE = (
    "*{box-sizing:border-box}"
    "body{font:16px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;padding:1rem;color:#1b1f24;"
    "background:#f4f5f7;overflow-wrap:anywhere}"
    "main{max-width:46rem;margin:0 auto;background:#fff;border:1px solid #d8dce1;border-radius:8px;padding:1rem}"
    "h1{font-size:1.3rem;line-height:1.3;margin:.2rem 0 .8rem}"
    "h2{font-size:.8rem;text-transform:uppercase;letter-spacing:.05em;color:#57606a;margin:1.2rem 0 .4rem}"
    ".act{font-size:.85rem;color:#57606a;margin:0}"
    "pre{white-space:pre-wrap;overflow-wrap:anywhere;font:14px/1.4 ui-monospace,Menlo,Consolas,monospace;margin:0}"
    ".preview{background:#f6f8fa;border:1px solid #d8dce1;border-radius:6px;padding:.6rem}"
    ".incident{border-left:4px solid #cf222e;padding:.1rem 0 .1rem .7rem}"
    ".incident p{margin:.2rem 0}"
    ".state{display:inline-block;border-radius:1em;padding:0 .6em;background:#eaeef2;font-size:.85rem}"
    ".log{list-style:none;padding:0;margin:.4rem 0 0}"
    ".log li{font:13px/1.5 ui-monospace,Menlo,Consolas,monospace;white-space:nowrap;overflow:hidden;"
    "text-overflow:ellipsis;background:#fff5f5;border-radius:4px;padding:0 .4rem;margin:2px 0}"
    "dl{display:grid;grid-template-columns:minmax(0,1fr);margin:0}"
    "dt{font-weight:600;font-size:.85rem;color:#57606a;margin-top:.6rem}dd{margin:0}"
    "@media (min-width:40rem){dl{grid-template-columns:10rem minmax(0,1fr);gap:.4rem 1rem}dt{margin:0}}"
    ".note{background:#fff8c5;border:1px solid #e7d26e;border-radius:6px;padding:.5rem .7rem;font-size:.9rem}"
    "label{display:block;font-weight:600;margin:1rem 0 .3rem}"
    "input{width:100%;font:inherit;padding:.55rem;border:1px solid #8c959f;border-radius:6px}"
    ".buttons{display:flex;flex-wrap:wrap;gap:.6rem;margin-top:1rem}"
    "button{flex:1 1 9rem;font:inherit;font-weight:600;padding:.7rem 1rem;border-radius:6px;border:1px solid;"
    "cursor:pointer}"
    "#approve{background:#1f883d;border-color:#1a7f37;color:#fff}#decline{background:#fff;border-color:#cf222e;"
    "color:#cf222e}"
)


def _page(
    title: str, body: str, status: int = 200, cookie: str | None = None, link: str = "", heading: str | None = None
) -> HTMLResponse:
    document = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'><title>"
        + html.escape(title)
        + f"</title><style>{STYLE}</style></head><body><main><h1>"
        + html.escape(title if heading is None else heading)
        + "</h1>"
        + body
        + "</main></body></html>"
    )
    response = HTMLResponse(document, status_code=status, headers=SECURITY_HEADERS)
    if cookie is not None:
        # Scoped to this link's page, so two approvals open in one browser do not overwrite each other's token.
        response.set_cookie(CSRF_COOKIE, cookie, httponly=True, samesite="strict", path=PAGE_PREFIX + link)
    return response


def _ticket_problem(ticket: str | None) -> str | None:
    """Why the act would refuse this change ticket, or None: checked before the link is used up."""
    if ticket is None:
        return "a change ticket is required"
    if len(ticket) > MAX_TICKET_CHARS:
        return f"the change ticket is too long ({len(ticket)} characters, at most {MAX_TICKET_CHARS})"
    if not TICKET.fullmatch(ticket):
        return "the change ticket must be letters, digits and _ . : # / - (e.g. CHG-2291)"
    return None


def _refused(exc: LinkRefused) -> HTMLResponse:
    log.info("approval page refused", reason=str(exc))
    return _page("Approval refused", f"<p>{html.escape(str(exc))}</p>", exc.status)


def _expiry(pending: Pending, now: float | None = None) -> str:
    moment = datetime.fromtimestamp(pending.expires_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    minutes = math.ceil(pending.seconds_left(now) / 60)
    return f"{moment} ({minutes} minute{'' if minutes == 1 else 's'} left)"


def _incident(view: IncidentView | None, problem: str | None) -> str:
    """The incident section: id, title, state and the last error lines, all escaped (untrusted text)."""
    if view is None:
        return f"<p class='note'>{html.escape(problem)}</p>" if problem else ""
    errors = "".join(f"<li>{html.escape(line)}</li>" for line in view.errors)
    if view.problem:
        tail = f"<p>{html.escape(view.problem)}</p>"
    elif errors:
        tail = f"<p>Last error lines of its log (masked):</p><ol class='log'>{errors}</ol>"
    else:
        tail = "<p>No error lines at the end of its log.</p>"
    return (
        "<h2>Incident</h2><section class='incident'>"
        f"<p><strong>{html.escape(view.id)}</strong> <span class='state'>{html.escape(view.state)}</span></p>"
        f"<p>{html.escape(view.title)}</p>{tail}</section>"
    )


def _details(pending: Pending, sign_in: SignedIn, view: IncidentView | None, problem: str | None) -> str:
    """Everything but the heading and the form: the act, its preview, the incident, and who and until when."""
    _, _, rest = pending.question.partition("\n")
    act = f"<p class='act'>{html.escape(pending.act)} · {html.escape(pending.target)}</p>"
    preview = f"<h2>What will happen</h2><pre class='preview'>{html.escape(rest)}</pre>" if rest.strip() else ""
    rows = [
        ("Reason", pending.reason),
        ("Requested by", pending.requester),
        ("Who may approve", pending.who_may_approve),
        ("You are", sign_in.approver),
        ("Link expires", _expiry(pending)),
    ]
    items = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in rows)
    note = f"<p class='note'>{html.escape(sign_in.note)}</p>"
    return f"{act}{preview}{_incident(view, problem)}<h2>The request</h2><dl>{items}</dl>{note}"


async def _journal_step(pending: Pending, step: PageStep, who: str) -> str | None:
    """Write the page's step through the approval's hook, whatever becomes of the browser's request; the problem
    when the journal cannot take it."""
    if pending.journal is None:
        return None
    try:
        with anyio.CancelScope(shield=True):
            await pending.journal(pending, step, who)
    except AuditError as exc:
        log.error("audit journal write failed", approval=pending.public_id, step=step, error=str(exc))
        return str(exc)
    return None


def page_routes(
    book: ApprovalBook, identity: Identity | None = None, incident: IncidentLookup | None = None
) -> list[Route]:
    """The page's routes, for the HTTP desk's app or the loopback server."""
    identity = identity or OsUser()

    async def incident_of(pending: Pending) -> tuple[IncidentView | None, str | None]:
        """The incident to show, or why it cannot be: the page still asks its question without it."""
        if incident is None:
            return None, None
        try:
            return await anyio.to_thread.run_sync(incident, pending.target), None
        except Exception as exc:  # a source that is down must not hide the question
            log.warning("approval page could not read the incident", approval=pending.public_id, error=str(exc))
            return None, "the incident behind this request could not be read just now"

    async def signed_in(request: Request, link: str, pending: Pending) -> SignedIn | Response:
        try:
            return await identity.who(request, link, pending)
        except IssuerUnavailable as exc:
            log.warning("approval page cannot sign people in", problem=str(exc))
            return _page("Sign-in unavailable", f"<p>{html.escape(str(exc))}</p>", 503)

    async def show(request: Request) -> Response:
        link = request.path_params["link"]
        try:
            pending = book.open(link)
        except LinkRefused as exc:
            return _refused(exc)
        who = await signed_in(request, link, pending)
        if isinstance(who, Response):
            return who
        log.info("approval page opened", approval=pending.public_id)
        if book.first_view(pending, who.approver, who.key):
            await _journal_step(pending, "opened", who.approver)
        view, problem = await incident_of(pending)
        form = (
            "<form method='post'>"
            f"<input type='hidden' name='csrf' value='{html.escape(pending.csrf)}'>"
            "<label for='ticket'>Change ticket (e.g. CHG-2291)</label>"
            "<input id='ticket' name='ticket' required autocomplete='off'>"
            "<div class='buttons'><button id='approve' name='decision' value='approve'>Approve</button>"
            "<button id='decline' name='decision' value='decline' formnovalidate>Decline</button></div></form>"
        )
        heading = pending.question.partition("\n")[0]
        body = _details(pending, who, view, problem) + form
        return _page(f"Approve: {heading}", body, cookie=pending.csrf, link=link, heading=heading)

    async def decide(request: Request) -> Response:
        link = request.path_params["link"]
        length = request.headers.get("content-length", "")
        if not length.isdigit() or int(length) > MAX_FORM_BYTES:
            return _page(
                "Approval refused", f"<p>the form must be sent with a length of at most {MAX_FORM_BYTES} bytes</p>", 413
            )
        form = await request.form()
        sent = str(form.get("csrf") or "")
        cookie = request.cookies.get(CSRF_COOKIE, "")
        # Double submit: the hidden field and the SameSite cookie must both be there and agree.
        csrf = sent if sent and sent == cookie else ""
        decision = str(form.get("decision") or "")
        if decision not in ("approve", "decline"):
            return _page("Approval refused", "<p>the form must say approve or decline</p>", 400)
        ticket = str(form.get("ticket") or "").strip() or None
        if decision == "approve" and (problem := _ticket_problem(ticket)):
            # Refused before the link is used: the person corrects the ticket and approves again.
            return _page("Approval not sent", f"<p>{html.escape(problem)}: go back and correct it</p>", 400)
        try:
            opened = book.open(link)
        except LinkRefused as exc:
            return _refused(exc)
        who = await signed_in(request, link, opened)
        if isinstance(who, Response):
            return _page("Approval refused", "<p>sign in first: open the approval link again</p>", 403)
        try:
            approve = decision == "approve"
            pending = book.decide(
                link, csrf, approve=approve, approver=who.approver, approver_key=who.key, ticket=ticket
            )
        except SelfApproval as exc:
            # The link stays open for someone else; the auditor sees who tried to approve their own request.
            await _journal_step(opened, "refused", who.approver)
            return _refused(exc)
        except LinkRefused as exc:
            return _refused(exc)
        log.info("approval decided on the page", approval=pending.public_id, state=pending.state, by=who.approver)
        verb: PageStep = "approved" if pending.state == "approved" else "declined"
        problem = await _journal_step(pending, verb, who.approver)
        book.journalled(pending, problem)
        if problem is not None:
            text = f"the desk's journal could not record your decision, so nothing will run: {problem}"
            return _page("Decision not recorded", f"<p>{html.escape(text)}</p>", 503)
        done = f"<pre class='preview'>{html.escape(pending.question)}</pre><p>You can close this page.</p>"
        return _page(f"You {verb}", done)

    async def sign_in_callback(request: Request) -> Response:
        if not isinstance(identity, OpenIDSignIn):
            return _page("Not found", "<p>this desk signs nobody in</p>", 404)
        finished = await identity.callback(request)
        if isinstance(finished, str):
            log.info("approval page sign-in refused", reason=finished)
            return _page("Sign-in refused", f"<p>{html.escape(finished)}</p>", 403)
        link, session = finished
        response = RedirectResponse(PAGE_PREFIX + link, status_code=303, headers=SECURITY_HEADERS)
        # Lax, not Strict: it arrives at the end of the provider's cross-site redirect and must come straight back.
        response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="lax", path=PAGE_PREFIX)
        return response

    return [
        Route(SIGN_IN_CALLBACK, sign_in_callback, methods=["GET"]),
        Route(PAGE_PREFIX + "{link}", show, methods=["GET"]),
        Route(PAGE_PREFIX + "{link}", decide, methods=["POST"]),
    ]


async def wait_for_decision(book: ApprovalBook, pending: Pending) -> State:
    """Poll until the person's decision on the page is journalled, or the link expires."""
    # The page may decide on another thread's event loop: poll, at a person's pace, rather than share an event.
    while True:
        if book.decided(pending):
            return pending.state
        await anyio.sleep(min(ApprovalBook.POLL_SECONDS, max(pending.seconds_left(), ApprovalBook.POLL_SECONDS / 4)))


class LoopbackPage:
    """The page of a stdio desk: a loopback HTTP server on its own thread, up while any approval is pending."""

    def __init__(
        self, book: ApprovalBook, identity: Identity | None = None, incident: IncidentLookup | None = None
    ) -> None:
        self._book, self._identity, self._incident = book, identity, incident
        self._lock = threading.Lock()
        self._base: str | None = None
        self._running: Callable[[], bool] = lambda: False

    def base_url(self) -> str:
        """Start the server if it is not running; its ``http://127.0.0.1:port``."""
        with self._lock:
            if self._base is None or not self._running():
                routes = page_routes(self._book, self._identity, self._incident)
                self._base, self._running = _start_loopback(Starlette(routes=routes), self._book, self._lock)
            return self._base


class LoopbackHostGuard:
    """Answers only requests addressed to this loopback server by name (``127.0.0.1:port``, ``localhost:port``):
    a web page whose own host name was rebound to 127.0.0.1 (DNS rebinding) reaches the port under its own name,
    and is refused (421; 400 without a Host header) before any route sees it."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self._app = app
        self._hosts = {f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        hosts = [value.lower() for name, value in scope.get("headers", []) if name.lower() == b"host"]
        if len(hosts) == 1 and hosts[0] in self._hosts:
            await self._app(scope, receive, send)
            return
        problem = "this page answers only at 127.0.0.1 or localhost with its own port" if hosts else "no Host header"
        log.info("approval page refused a request by its Host header", hosts=len(hosts))
        refused = _page("Wrong address", f"<p>{html.escape(problem)}</p>", 421 if hosts else 400)
        await refused(scope, receive, send)


def _start_loopback(asgi: Starlette, book: ApprovalBook, lock: threading.Lock) -> tuple[str, Callable[[], bool]]:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    guarded = LoopbackHostGuard(asgi, port)
    config = uvicorn.Config(guarded, log_config=None, access_log=False, lifespan="off", server_header=False, ws="none")
    server = uvicorn.Server(config)  # off the main thread, it leaves the desk's signal handling alone

    def run() -> None:
        asyncio.run(server.serve(sockets=[sock]))

    def idle_watch() -> None:
        # Up while an approval is pending (and a minute beyond its expiry, so a late click gets a clear page).
        while not server.should_exit:
            time.sleep(1)
            with lock:  # the lock base_url() holds: a link handed out now never points at a stopping server
                if len(book) == 0:
                    server.should_exit = True

    threading.Thread(target=run, name="approval-page", daemon=True).start()
    threading.Thread(target=idle_watch, name="approval-page-idle", daemon=True).start()
    log.info("approval page serving on loopback", port=port)

    return f"http://127.0.0.1:{port}", lambda: not server.should_exit
