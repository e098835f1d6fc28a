"""Tool results: the text a model reads plus structured content an application can use."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

from incident_desk.core.errors import IncidentDeskError, NotFound
from incident_desk.protocol.tool_schemas import written_out as written_out  # where the features found it


def ok(text: str, structured: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured.model_dump(mode="json", by_alias=True),
    )


def ok_rendered(text: str, structured_content: dict[str, Any]) -> CallToolResult:
    """:func:`ok` from structured content already dumped for the wire (an answer rendered once and reused)."""
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured_content)


def error(text: str) -> CallToolResult:
    """A tool failure the model can read and act on; never an empty result that looks like success."""
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def failed(exc: IncidentDeskError) -> CallToolResult:
    """A core failure as the tool's answer, the one place this mapping is made: its message names what failed
    and why, so it is the whole text."""
    return error(str(exc))


def resource_failure(exc: IncidentDeskError) -> ResourceError:
    """The same failure read as a resource: one that does not exist is the SDK's not-found, any other its
    resource error; the text is the message either way."""
    return ResourceNotFoundError(str(exc)) if isinstance(exc, NotFound) else ResourceError(str(exc))
