"""Tool-argument errors in the desk's own words instead of the SDK's raw pydantic text.

mcp 2.3 answers a call whose arguments fail the input schema with ``Error executing tool x: 1 validation error for
x_Arguments ... [type=string_too_short, ...] For further information visit https://errors.pydantic.dev/...``. A
model reads that, but it names internals and links a site about a library. This middleware rewrites only that
answer: each rejected argument by the name the tool's schema gives it, with what it needs, and never the value.
A resource read the SDK refuses echoes its URI (``Unknown resource: {uri}``): that echo is capped here too.
"""

from __future__ import annotations

from typing import Any

import structlog
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from incident_desk.core.errors import echoed
from incident_desk.protocol.library_hooks import sdk_tool_arguments

logger = structlog.get_logger(__name__)


def _requirement(error: Any) -> str:
    """What one rejected argument needs, from pydantic's error type and context (never the input)."""
    kind, context = error["type"], error.get("ctx") or {}
    match kind:
        case "missing":
            return "is required"
        case "string_too_short":
            minimum = context.get("min_length")
            return "must not be empty" if minimum == 1 else f"must be at least {minimum} characters"
        case "string_too_long":
            return f"must be at most {context.get('max_length')} characters"
        case "string_type":
            return "must be a string"
        case "int_type" | "int_parsing" | "int_from_float":
            return "must be a whole number"
        case "float_type" | "float_parsing":
            return "must be a number"
        case "bool_type" | "bool_parsing":
            return "must be true or false"
        case "greater_than_equal":
            return f"must be at least {context.get('ge')}"
        case "greater_than":
            return f"must be greater than {context.get('gt')}"
        case "less_than_equal":
            return f"must be at most {context.get('le')}"
        case "less_than":
            return f"must be less than {context.get('lt')}"
        case "literal_error" | "enum":
            return f"must be one of {context.get('expected')}"
        case "string_pattern_mismatch":
            return "is not in the expected form (see the tool's input schema)"
        case _:
            return str(error.get("msg", "is not valid")).split("[type=")[0].strip()


def describe_argument_errors(tool: str, exc: ValidationError) -> str:
    """``Invalid arguments for read_incident_log: incidentId is required; lines must be at least 1.``"""
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        name = ".".join(str(part) for part in error["loc"]) or "the arguments"
        problems.append(f"{name} {_requirement(error)}")
    return f"Invalid arguments for {tool}: {'; '.join(problems)}. Check the tool's input schema and call it again."


class DeskWordsForArgumentErrors:
    """Server middleware: a ``tools/call`` the SDK refused for its arguments gets the desk's sentence instead."""

    def __init__(self, server: MCPServer) -> None:
        self._server = server

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/call" or not isinstance(result, dict) or not result.get("isError"):
            return result
        params = ctx.params if isinstance(ctx.params, dict) else {}
        name = params.get("name")
        content = result.get("content") or []
        text = content[0].get("text", "") if content and isinstance(content[0], dict) else ""
        refused_by_schema = (
            isinstance(name, str) and text.startswith(f"Error executing tool {name}: ") and "validation error" in text
        )
        if not refused_by_schema:
            return result
        errors = self._validation_errors(str(name), params.get("arguments") or {})
        if errors is not None:
            result["content"] = [{"type": "text", "text": describe_argument_errors(str(name), errors)}]
        return result

    def _validation_errors(self, name: str, arguments: Any) -> ValidationError | None:
        """Validate again, through the tool's own argument model, to get the errors as data, not text.

        mcp 2.3 has no public accessor for a registered tool (``library_hooks.sdk_tool_arguments``); without one
        the SDK's text is left as it is.
        """
        metadata = sdk_tool_arguments(self._server, name)
        if metadata is None or not isinstance(arguments, dict):
            return None
        try:
            metadata.validate_arguments(arguments)
        except ValidationError as exc:
            return exc
        except Exception:  # a validator that crashes keeps the SDK's generic answer
            logger.debug("argument re-validation failed", tool=name)
        return None


class CappedUriEchoes:
    """Server middleware: a ``resources/read`` error does not carry a client's 200,000-character URI back whole;
    its message and its ``data.uri`` show the capped head (``core.errors.echoed``)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            return await call_next(ctx)
        except MCPError as exc:
            uri = ctx.params.get("uri") if ctx.method == "resources/read" and isinstance(ctx.params, dict) else None
            if not isinstance(uri, str) or uri == echoed(uri, "uri"):
                raise
            data = {**exc.data, "uri": echoed(uri, "uri")} if isinstance(exc.data, dict) else exc.data
            raise MCPError(exc.code, exc.message.replace(uri, echoed(uri, "uri")), data) from None
