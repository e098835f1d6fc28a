"""Who is asking: the person a checked request names, and the approver identity the journal records.

The HTTP layers (``http/bearer``, ``http/oauth_bearer``) name the checked principal in headers that only they can
set; :func:`approver` and :func:`approver_key` read them back. Over stdio the person is the OS user.
"""

from __future__ import annotations

import getpass

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context

PRINCIPAL_HEADER = "x-incident-desk-principal"
# Who the principal is, for comparing people (``oauth:{issuer} {subject}``); set with the label under OAuth only.
PRINCIPAL_KEY_HEADER = "x-incident-desk-principal-key"
SET_BY_THE_DESK = (PRINCIPAL_HEADER, PRINCIPAL_KEY_HEADER)


def approver(ctx: Context) -> str:
    """Who is answering: the authenticated HTTP principal, else the OS user running the desk.

    Never a form field: the MCP specification forbids trusting an identity typed into an elicitation form.
    """
    token = get_access_token()
    if token is not None:
        return f"token:{token.subject or token.client_id}"
    headers = ctx.headers or {}
    # Set only by the HTTP layer after it checked the token; it strips any copy a client sent.
    principal = headers.get(PRINCIPAL_HEADER)
    if principal:
        # The layer that set it wrote UTF-8 (an OAuth display name); Starlette reads header bytes as latin-1.
        return principal.encode("latin-1").decode("utf-8", "replace")
    if headers:
        return f"http-unauthenticated:{_os_user()}"
    return f"os:{_os_user()}"


def approver_key(ctx: Context) -> str | None:
    """Who the caller is as a subject at the identity provider (``oauth:{issuer} {subject}``), to tell two people
    apart; None when the caller is no such subject (the OS user, the static token)."""
    key = (ctx.headers or {}).get(PRINCIPAL_KEY_HEADER)
    return key.encode("latin-1").decode("utf-8", "replace") if key else None


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
