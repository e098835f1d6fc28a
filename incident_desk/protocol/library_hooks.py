"""Every place the desk reaches into a library's private parts, fenced behind one named function each.

A library owes nothing to code that uses its private names, so each hook here checks what it needs before using
it and degrades softly when that is gone: the desk keeps working, logs a warning naming the library and the hook,
and loses only what the hook's docstring says. ``tests/test_library_hooks.py`` checks every hook against the
installed versions and fails naming the library, its version and the hook; pyproject.toml caps ``mcp`` and
``uvicorn`` at the minor versions those tests have seen (``CHECKED_VERSIONS``).

RE2's private match entry point is fenced in ``core/re2_hook.py`` instead: ``core`` imports nothing outside it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from uvicorn.protocols.http.h11_impl import H11Protocol

logger = structlog.get_logger(__name__)

# The distributions whose private parts the hooks use, and the newest minor version the hook tests passed on.
CHECKED_VERSIONS = {"mcp": "2.3", "uvicorn": "0.54"}

# What GuardedH11Protocol overrides or reads on uvicorn's h11 protocol (``conn`` is set in its ``__init__``).
UVICORN_H11_METHODS = ("connection_made", "data_received", "on_response_complete", "connection_lost")
UVICORN_H11_STATES = ("IDLE", "SEND_BODY")


def _hook_gone(distribution: str, hook: str, loss: str) -> None:
    """Warn that a hook no longer fits: which library, which version, which hook, and what the user loses."""
    logger.warning("library hook gone", library=distribution, version=version(distribution), hook=hook, loss=loss)


def sdk_resource_templates(server: Any) -> MutableMapping[str, Any] | None:
    """The SDK's table of registered resource templates (``MCPServer._resource_manager._templates``), or None.

    mcp 2.3 has no public way to register a template of another class. Without this hook every log or runbook
    read through a template hops to a worker thread to return a value already computed: slower, nothing wrong.
    """
    templates = getattr(getattr(server, "_resource_manager", None), "_templates", None)
    if not isinstance(templates, MutableMapping):
        _hook_gone("mcp", "resource template", "template reads take an extra thread hop")
        return None
    return templates


def sdk_add_request_handler(
    server: Any, method: str, params_type: type[Any], handler: Callable[[Any, Any], Awaitable[Any]]
) -> bool:
    """Register ``handler`` for a JSON-RPC ``method`` MCPServer has no decorator for, on its low-level server.

    Used for ``logging/setLevel``. Without this hook the desk does not offer it: a client of the 2025-11-25 era
    cannot choose a log level and gets no ``notifications/message`` from the desk (2026-07-28 clients still do).
    """
    add = getattr(getattr(server, "_lowlevel_server", None), "add_request_handler", None)
    if not callable(add):
        _hook_gone("mcp", f"{method} handler", f"clients cannot send {method}")
        return False
    add(method, params_type, handler)
    return True


def sdk_connection(session: Any) -> object:
    """The connection a request's ``ServerSession`` belongs to (``ServerSession._connection``), or the session.

    mcp 2.3 makes a ``ServerSession`` per request, with no public way to tell two requests of one client apart.
    The index subscriptions are kept per connection; without this hook each ``resources/subscribe`` counts as a
    subscriber of its own, so subscribing twice sends two updates and ``resources/unsubscribe`` leaves the first
    subscription in place until a send to a closed client drops it.
    """
    connection = getattr(session, "_connection", None)
    if connection is None or not hasattr(connection, "outbound"):
        _hook_gone("mcp", "session connection", "resources/unsubscribe cannot find the subscription")
        return session
    return connection


def sdk_tool_arguments(server: Any, name: str) -> Any | None:
    """The argument model of the registered tool ``name`` (what ``validate_arguments`` is called on), or None.

    mcp 2.3 has no public accessor for a registered tool. Without this hook a call with bad arguments gets the
    SDK's own validation text instead of the desk's sentence naming each argument and what it needs.
    """
    tools = getattr(server, "_tool_manager", None)
    get_tool = getattr(tools, "get_tool", None)
    if not callable(get_tool):
        _hook_gone("mcp", "tool arguments", "argument errors keep the SDK's wording")
        return None
    metadata = getattr(get_tool(name), "fn_metadata", None)
    return metadata if callable(getattr(metadata, "validate_arguments", None)) else None


def uvicorn_h11_protocol() -> type[H11Protocol] | None:
    """uvicorn's h11 protocol class to extend with a request read deadline and a connection cap, or None.

    Its module is not uvicorn's public API. Without this hook uvicorn serves with its own protocol: a connection
    that never finishes its request is kept forever and half-open sockets count against the connection limit.
    Imported here, when HTTP is served, so a stdio desk never loads uvicorn.
    """
    import h11

    try:
        from uvicorn.protocols.http.h11_impl import H11Protocol
    except ImportError as exc:
        _hook_gone("uvicorn", "h11 protocol", f"no request read deadline or connection cap ({exc})")
        return None
    missing = [name for name in UVICORN_H11_METHODS if not callable(getattr(H11Protocol, name, None))]
    missing += [f"h11.{name}" for name in UVICORN_H11_STATES if not hasattr(h11, name)]
    if missing:
        loss = f"no request read deadline or connection cap ({', '.join(missing)} gone)"
        _hook_gone("uvicorn", "h11 protocol", loss)
        return None
    return H11Protocol
