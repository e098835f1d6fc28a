"""What kind each tool is, declared once beside its function, and everything derived from that kind.

A feature module declares its tools in one ``ToolKinds`` table at its top and registers each function with
``kinds.tool(server)``, which refuses a function the table does not name. The tool's annotations, whether
``read_only`` serves it, and the OAuth scope a call needs all come from its kind, so no other table can disagree
(``tests/test_tool_kinds.py`` checks each derived surface against the declarations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from incident_desk.protocol.tool_schemas import Answer, lean_description, lean_input_schema, lean_output_schema

if TYPE_CHECKING:  # the declarations are read without the SDK (`incident-desk tools`); registering loads it
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

# The OAuth scopes, one per kind of access; the issuer may name them otherwise (``oauth_scope_map``).
READ_SCOPE, WRITE_SCOPE, RESTART_SCOPE = "incidents:read", "incidents:write", "services:restart"
SCOPES = (READ_SCOPE, WRITE_SCOPE, RESTART_SCOPE)

F = TypeVar("F", bound=Callable[..., Any])


class ToolKind(StrEnum):
    """What calling a tool can change."""

    READ = "read"  # nothing: reads the desk, its sources and neighbours
    NOTE = "note"  # the desk's own journal only (acknowledge, note, save a postmortem)
    ACT = "act"  # something outside the desk, after a human approves (resolve, silence, unsilence)
    RESTART = "restart"  # a service, after a human approves: restart-like

    @property
    def acting(self) -> bool:
        return self is not ToolKind.READ

    @property
    def scope(self) -> str:
        """The OAuth scope a call needs: reading is incidents:read, any other act incidents:write, restarting
        its own scope."""
        return {ToolKind.READ: READ_SCOPE, ToolKind.RESTART: RESTART_SCOPE}.get(self, WRITE_SCOPE)


@dataclass(frozen=True)
class ToolDeclaration:
    kind: ToolKind
    open_world: bool = False  # reaches a neighbour (Alertmanager, Prometheus, a model, a command)
    repeatable: bool = True  # the MCP idempotent hint: calling twice does no more than calling once
    answer: Answer = Answer.TEXT  # what its output schema says (protocol/tool_schemas.py)

    def output_schema(self, full: dict[str, Any]) -> dict[str, Any] | None:
        """The output schema ``tools/list`` publishes, made from the model's ``full`` one."""
        return lean_output_schema(full, self.answer)

    def annotations(self) -> ToolAnnotations:
        """The MCP hints of its kind, each said only where the spec's default would say otherwise.

        ``readOnlyHint`` is always said, and an acting tool always says whether it is destructive. The spec reads
        ``destructiveHint`` and ``idempotentHint`` only when ``readOnlyHint`` is false, and takes
        ``idempotentHint`` false and ``openWorldHint`` true when unsaid: saying those again costs every
        conversation bytes (protocol/tool_schemas.py) and tells a client nothing.
        """
        from mcp_types import ToolAnnotations

        if self.kind is ToolKind.READ:
            return ToolAnnotations(read_only_hint=True, open_world_hint=None if self.open_world else False)
        return ToolAnnotations(
            read_only_hint=False,
            destructive_hint=self.kind in (ToolKind.ACT, ToolKind.RESTART),
            idempotent_hint=True if self.repeatable else None,
            open_world_hint=None if self.open_world else False,
        )


def read(*, open_world: bool = False, repeatable: bool = True, answer: Answer = Answer.TEXT) -> ToolDeclaration:
    return ToolDeclaration(ToolKind.READ, open_world=open_world, repeatable=repeatable, answer=answer)


def note(*, repeatable: bool = False, answer: Answer = Answer.TEXT) -> ToolDeclaration:
    """A write to the desk's own journal; ``repeatable`` when doing it twice leaves what doing it once did."""
    return ToolDeclaration(ToolKind.NOTE, repeatable=repeatable, answer=answer)


def act() -> ToolDeclaration:
    return ToolDeclaration(ToolKind.ACT, open_world=True, repeatable=False)


def restart() -> ToolDeclaration:
    return ToolDeclaration(ToolKind.RESTART, open_world=True, repeatable=False)


class ToolKinds(Mapping[str, ToolDeclaration]):
    """One feature module's tools by name: the only place their kinds are written."""

    def __init__(self, **declared: ToolDeclaration) -> None:
        self._declared = dict(declared)

    def __getitem__(self, name: str) -> ToolDeclaration:
        return self._declared[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._declared)

    def __len__(self) -> int:
        return len(self._declared)

    def tool(self, server: Any, **options: Any) -> Callable[[F], F]:
        """Register a function as its declared tool, with the annotations its kind gives and lean schemas."""

        def register(fn: F) -> F:
            declared = self._declared.get(fn.__name__)
            if declared is None:
                raise LookupError(f"tool {fn.__name__} has no kind: declare it in its module's ToolKinds")
            from mcp.server.mcpserver import MCPServer

            options.setdefault("description", lean_description(fn.__doc__))
            server.tool(annotations=declared.annotations(), **options)(fn)
            if isinstance(server, MCPServer):  # else an extension registers it later: see publish()
                self.publish(server, fn.__name__)
            return fn

        return register

    def publish(self, server: MCPServer, *names: str) -> None:
        """Have ``tools/list`` publish these tools (every one declared here, by default) with lean schemas.

        ``tool()`` does it for a tool it registers on the server; an extension's tool is registered when the
        server is built, which then calls this."""
        from incident_desk.protocol.library_hooks import sdk_publish_tool_schemas

        for name in names or tuple(self._declared):
            sdk_publish_tool_schemas(server, name, lean_input_schema, self._declared[name].output_schema)


def merged(tables: Iterator[ToolKinds] | tuple[ToolKinds, ...]) -> dict[str, ToolDeclaration]:
    """Every feature's declarations in one sorted dict; a name declared twice is a mistake."""
    catalog: dict[str, ToolDeclaration] = {}
    for table in tables:
        for name, declared in table.items():
            if name in catalog:
                raise LookupError(f"tool {name} is declared twice")
            catalog[name] = declared
    return dict(sorted(catalog.items()))
