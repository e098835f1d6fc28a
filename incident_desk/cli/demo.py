"""``incident-desk demo``: watch the whole desk work without any client.

It replays twelve scripted exchanges (the handshake, reads, prompts, sampling, approval, refusals, the wire
requests and the text timeline) against the bundled sample desk with an in-process MCP client whose model
answers and human approvals are scripted, and prints each as a transcript, for either protocol era. A
``note:`` line says where the desk behaves differently from a plain MCP server on purpose. Output goes to stdout:
demo is a command for people, not the server.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CreateMessageResult,  # noqa: TID251  the demo plays the client's model: it builds the model's answer
    ElicitResult,  # noqa: TID251  and the client's human: it builds the approval answer
    TextContent,
)

from incident_desk import safe_write
from incident_desk.app import DeskApp
from incident_desk.assembly import build_app
from incident_desk.protocol.eras import era_features
from incident_desk.server import build_server
from incident_desk.settings.model import load_settings

ERAS = ("legacy", "2026-07-28")
SLOW_MODEL_SECONDS = 2.0
DEMO_LIMITS_OFF = {"per_person_per_hour": 0, "restarts_per_service_per_hour": 0, "cooldown_seconds": 0}
MODEL_ANSWER = (
    "Connection pool on payments-api was exhausted by a 14.8s ledger query, so 212 clients got HTTP 503. "
    "Fix the query or raise the pool."
)
Transcript = list[str]


def _text(result: Any) -> str:
    return "\n".join(str(getattr(block, "text", block)) for block in result.content)


class ScriptedModel:
    """Plays the client's model: records what the desk asked, answers with a fixed two-sentence summary."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.seen: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> CreateMessageResult:
        self.seen.append(params)
        await anyio.sleep(self.delay)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=MODEL_ANSWER), model="demo")


class ScriptedHuman:
    """Plays the human at the approval form: one scripted answer per question, recording each question."""

    def __init__(self, answers: list[ElicitResult]) -> None:
        self.answers = answers
        self.seen: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.seen.append(params)
        return self.answers.pop(0)


async def _initialize(connect: Connect, era: str) -> Transcript:
    out = ["# initialize handshake (client declares sampling + elicitation)"]
    # A pinned 2026-07-28 client never asks the server who it is; "auto" discovers it, then speaks 2026-07-28.
    mode = "legacy" if era == "legacy" else "auto"
    scripted = {"sampling_callback": ScriptedModel(), "elicitation_callback": ScriptedHuman([])}
    async with connect(mode=mode, **scripted) as client:
        out.append(f"server.name: {client.server_info.name}")
        out.append(f"negotiated protocolVersion: {client.protocol_version}")
        caps = client.server_capabilities
        for name in ("tools", "resources", "prompts", "logging"):
            out.append(f"server capability: {name}: {str(getattr(caps, name) is not None).lower()}")
    out += ["client declared: sampling: true", "client declared: elicitation: true"]
    if era != "legacy":
        out.append(f"note: {era} has no handshake; the client learns this from server/discover")
    return out


async def _resources(connect: Connect, era: str) -> Transcript:
    out = ["# resources/list, resources/templates/list, resources/read"]
    async with connect() as client:
        listed = [
            f"resource {r.uri} name={r.name} mime={r.mime_type}" for r in (await client.list_resources()).resources
        ]
        templates = (await client.list_resource_templates()).resource_templates
        listed += [f"template {t.uri_template} name={t.name}" for t in templates]
        out += sorted(listed)
        for uri in ("incident://index", "incident://INC-1043/log"):
            out.append(f"read {uri} ->")
            out += _text_of_read(await client.read_resource(uri)).rstrip("\n").split("\n")
        try:
            await client.read_resource("incident://INC-9999/log")
        except MCPError as exc:
            out.append(f"read incident://INC-9999/log -> MCPError: {exc}")
    out.append("note: a missing incident is a clean not-found error: the message alone, no cause text appended")
    out.append(
        "note: the desk also lists audit://recent, its timeline view ui://incident-desk/timeline and its "
        "incident-triage skill skill://incident-triage/SKILL.md"
    )
    return out


def _text_of_read(result: Any) -> str:
    return "".join(str(getattr(content, "text", "")) for content in result.contents)


async def _prompts(connect: Connect, era: str) -> Transcript:
    out = ["# prompts/list and prompts/get"]
    async with connect() as client:
        for prompt in (await client.list_prompts()).prompts:
            out.append(f"prompt {prompt.name} -- {prompt.description}")
            out += [f"arg {arg.name} required={str(bool(arg.required)).lower()}" for arg in prompt.arguments or []]
        got = await client.get_prompt("postmortem", {"incidentId": "INC-1043", "audience": "the on-call manager"})
        out.append("get postmortem(INC-1043, the on-call manager) ->")
        for message in got.messages:
            out += f"[{message.role.upper()}] {getattr(message.content, 'text', '')}".rstrip("\n").split("\n")
        try:
            await client.get_prompt("postmortem", {"incidentId": "INC-9999"})
        except MCPError as exc:
            out.append(f"get postmortem(INC-9999) -> MCPError: {exc}")
    out.append("note: a missing incident is a clean not-found error: the message alone, no cause text appended")
    return out


async def _sampling(connect: Connect, era: str) -> Transcript:
    out = ["# tools/call summarize_incident -> server asks the client's model"]
    model = ScriptedModel()
    async with connect(sampling_callback=model) as client:
        result = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    (params,) = model.seen
    out += [
        "what the CLIENT received from the server:",
        f"systemPrompt: {params.system_prompt}",
        f"messages: {len(params.messages)}",
        *[f"messages[{i}].role: {m.role.upper()}" for i, m in enumerate(params.messages)],
        f"messages[0] starts with: {params.messages[0].content.text.split(chr(10))[0]}",
        f"maxTokens: {params.max_tokens}",
        f"temperature: {params.temperature}",
        f"includeContext: {(params.include_context or 'none').upper()}",
        "tool result returned to the caller:",
        _text(result),
        f"isError: {str(bool(result.is_error)).lower()}",
    ]
    if era != "legacy":
        out.append(f"note: in {era} the question travels as an input_required result and the call is retried")
    return out


APPROVALS = [
    (
        "ACCEPT confirm=true ticket=CHG-2291",
        ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-2291"}),
    ),
    ("ACCEPT confirm=false", ElicitResult(action="accept", content={"confirm": False, "ticket": "CHG-2291"})),
    ("DECLINE", ElicitResult(action="decline")),
    ("CANCEL ", ElicitResult(action="cancel")),
]


async def _elicitation(connect: Connect, era: str) -> Transcript:
    out = ["# tools/call restart_service -> server asks the human"]
    human = ScriptedHuman([answer for _, answer in APPROVALS])
    outcomes: list[str] = []
    async with connect(elicitation_callback=human) as client:
        for label, _ in APPROVALS:
            result = await client.call_tool("restart_service", {"service": "payments-api"})
            outcomes.append(f"{label}: {_text(result)}")
    first = human.seen[0]
    out.append(f"message shown to the human: {first.message}")
    out.append(f"requestedSchema sent by the server: {json.dumps(first.requested_schema, sort_keys=True)}")
    return out + outcomes


async def _no_capabilities(connect: Connect, era: str) -> Transcript:
    out = ["# a client that declared neither sampling nor elicitation"]
    async with connect() as client:
        summary = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
        restart = await client.call_tool("restart_service", {"service": "payments-api"})
    out += ["summarize_incident:", _text(summary), "restart_service:", _text(restart)]
    out.append("note: the desk has no ungated twin; every tool checks what the client declared")
    return out


async def _slow_client(connect: Connect, era: str) -> Transcript:
    out = [f"# client model takes {SLOW_MODEL_SECONDS:g}s, the desk waits at most 1s (sampling_timeout_seconds=1)"]
    began = time.monotonic()
    async with connect(
        sampling_callback=ScriptedModel(delay=SLOW_MODEL_SECONDS), sampling_timeout_seconds=1.0
    ) as client:
        result = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    out.append(f"outcome: result isError={str(bool(result.is_error)).lower()} text={_text(result)}")
    returned_first = time.monotonic() - began < SLOW_MODEL_SECONDS
    out.append(f"returned before the model answered: {'yes' if returned_first else 'no'}")
    if era != "legacy":
        out.append(f"note: in {era} the client runs its model between the call's two rounds, so nothing returns sooner")
    out.append("note: the desk treats a model that misses its deadline as no model: the raw log, not an exception")
    return out


async def _stateless(connect: Connect, era: str) -> Transcript:
    out = ["# the desk's tools, as a stateless HTTP desk lists them too"]
    async with connect() as client:
        out.append("tools listed: " + ", ".join(sorted(tool.name for tool in (await client.list_tools()).tools)))
    out.append("note: a stateless desk keeps every tool (approval and sampling degrade per era instead)")
    return out


async def _stateless_warning(connect: Connect, era: str) -> Transcript:
    out = ["# what a stateless HTTP desk logs at start, per protocol era"]
    out += [f"{name}: {what}" for name, what in era_features(stateless=True).items()]
    out.append("note: the desk says what each era gets instead of skipping tools with a WARN")
    return out


def _wire(method: str, params: Any) -> Transcript:
    body = {
        "jsonrpc": "2.0",
        "method": method,
        "params": params.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    return json.dumps(body, indent=2, sort_keys=True).split("\n")


async def _wire_sampling(connect: Connect, era: str) -> Transcript:
    model = ScriptedModel()
    async with connect(sampling_callback=model) as client:
        await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    out = ["# the sampling request the client received (params as sent; the id varies and is left out)"]
    return out + _wire("sampling/createMessage", model.seen[0])


async def _wire_elicitation(connect: Connect, era: str) -> Transcript:
    human = ScriptedHuman([APPROVALS[2][1]])
    async with connect(elicitation_callback=human) as client:
        await client.call_tool("restart_service", {"service": "payments-api"})
    out = ["# the elicitation request the client received (params as sent; the id varies and is left out)"]
    return out + _wire("elicitation/create", human.seen[0])


async def _timeline(connect: Connect, era: str) -> Transcript:
    out = ["# tools/call show_incident_timeline: the text every client gets (app-rendering clients also draw it)"]
    async with connect() as client:
        result = await client.call_tool("show_incident_timeline", {"incidentId": "INC-1042"})
    out += _text(result).split("\n")
    out.append("note: `incident-desk timeline INC-1042 --html page.html` writes the chart as a page for a browser")
    return out


Connect = Callable[..., Any]
TRANSCRIPTS: list[tuple[str, Callable[[Connect, str], Awaitable[Transcript]]]] = [
    ("01-initialize", _initialize),
    ("02-resources", _resources),
    ("03-prompts", _prompts),
    ("04-sampling", _sampling),
    ("05-elicitation", _elicitation),
    ("06-no-capabilities", _no_capabilities),
    ("07-slow-client-timeout", _slow_client),
    ("08-stateless-server", _stateless),
    ("09-stateless-warning", _stateless_warning),
    ("10-wire-sampling", _wire_sampling),
    ("11-wire-elicitation", _wire_elicitation),
    ("12-timeline", _timeline),
]


async def replay(era: str, workdir: Path) -> list[tuple[str, str]]:
    """Every transcript as (name, text), each against a fresh desk on the bundled sample data."""
    done: list[tuple[str, str]] = []
    apps: list[DeskApp] = []
    for name, play in TRANSCRIPTS:

        def connect(name: str = name, **options: Any) -> Client:
            client_keys = ("sampling_callback", "elicitation_callback", "mode")
            client_options = {key: options.pop(key) for key in client_keys if key in options}
            client_options.setdefault("mode", era)
            # Transcript 05 answers one restart every way in a row: the act limits would refuse all but the first.
            settings = load_settings(
                {"audit_db": workdir / f"{name}-audit.sqlite3", "act_limits": DEMO_LIMITS_OFF, **options}
            )
            apps.append(build_app(settings))
            return Client(build_server(apps[-1]), **client_options)

        done.append((name, "\n".join(await play(connect, era)) + "\n"))
        # The memory writes beside the journal in its own thread: let it finish before the work dir is removed.
        while apps:
            memory = apps.pop().memory
            if memory is not None:
                await anyio.to_thread.run_sync(memory.wait_idle)
    return done


def run_demo(era: str, out: Path | None) -> int:
    if out is not None:
        _prepare(out)  # before the replay: a bad --out is said at once, not after it
    with tempfile.TemporaryDirectory(prefix="incident-desk-demo-") as workdir:
        transcripts = anyio.run(replay, era, Path(workdir))
    for name, text in transcripts:
        sys.stdout.write(f"=== {name}.txt ({era})\n{text}\n")
        if out is not None:
            # A fresh file renamed into place: a link planted at the name is refused, never written through.
            safe_write.replace_file(out, f"{name}.txt", text.encode("utf-8"), 0o644)
    return 0


def _prepare(out: Path) -> None:
    """Make the --out directory, or say why it cannot be one (UnsafeTarget, no traceback)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise safe_write.UnsafeTarget(f"--out {out} exists and is not a directory") from None
    except OSError as exc:
        raise safe_write.UnsafeTarget(f"--out {out} cannot be made a directory: {exc.strerror or exc}") from None
    for name, _ in TRANSCRIPTS:
        target = out / f"{name}.txt"
        if target.is_symlink():
            raise safe_write.UnsafeTarget(f"{target} is a symbolic link; refusing to write through or over it")
        if target.exists() and not target.is_file():
            raise safe_write.UnsafeTarget(f"{target} exists and is not a regular file")
