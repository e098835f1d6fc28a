"""``summarize_incident``: the client's model, else the desk's own provider, else the raw log, saying which."""

from __future__ import annotations

from typing import Annotated, Literal

import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import BaseModel, Field

from incident_desk import investigation
from incident_desk.app import DeskApp
from incident_desk.core.incidents import DataError
from incident_desk.core.neighbours import provider
from incident_desk.protocol import client_features, client_logging
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, read

log = structlog.get_logger(__name__)

SYSTEM_PROMPT = "You are an SRE. Answer in two sentences, no preamble."
USER_PREFIX = "Summarize this incident log:\n"
MAX_TOKENS = 120
TEMPERATURE = 0.2
RAW_PREFIX = "SAMPLING_UNAVAILABLE -- client has no model to lend. Raw log:\n"


class Summary(BaseModel):
    incident_id: str
    mode: Literal["sampled", "provider", "raw"] = Field(description="Which step of the degrade chain answered")
    text: str
    model: str | None = Field(description="The model that wrote the summary; null for the raw log")
    skipped: list[str] = Field(description="Why each earlier step did not answer")


async def _from_provider(app: DeskApp, log_text: str, findings: str) -> provider.ProviderAnswer | str:
    """The provider's answer, or why there is none (never raises: a provider failure is a normal outcome)."""
    settings = app.settings
    if settings.provider == "none" or settings.provider_model is None:
        return "no model provider is configured"
    key = await app.provider_key()
    if key.problem:
        # Said even when a keyless (local) endpoint answers anyway: the operator meant to store a key.
        log.warning("provider key lookup failed", problem=key.problem)
    config = provider.ProviderConfig(
        kind=settings.provider,
        model=settings.provider_model,
        base_url=settings.provider_base_url,
        timeout_seconds=settings.provider_timeout_seconds,
        max_response_bytes=settings.provider_max_response_bytes,
    )
    try:
        return await provider.complete(
            config,
            key.value,
            system=SYSTEM_PROMPT,
            user=USER_PREFIX + investigation.after_log(log_text, findings),
            max_tokens=MAX_TOKENS,
            temperature=TEMPERATURE,
        )
    except provider.ProviderError as exc:
        return f"{exc}" + (f" ({key.problem})" if key.problem and key.value is None else "")
    except Exception as exc:
        # A failure provider.py does not translate (e.g. httpx2.DecodingError for a garbled body). Only the
        # type is shown: an exception's text may quote the request, and with it the key.
        return f"{settings.provider} provider at {config.where}: failed unexpectedly ({type(exc).__name__})"


async def _skipped(ctx: Context, app: DeskApp, incident_id: str, step: str, reason: str) -> None:
    """Record why a step of the chain did not answer: in the desk's log, and for a client that asked for logs."""
    log.info("summary step skipped", step=step, incident=incident_id, reason=reason)
    fields = {"step": step, "incident": incident_id, "reason": reason}
    await client_logging.tell_client(ctx, app.log_levels, "warning", "summary step skipped", **fields)


TOOLS = ToolKinds(summarize_incident=read(open_world=True, repeatable=False))


def register(server: MCPServer, app: DeskApp) -> None:
    @TOOLS.tool(server)
    async def summarize_incident(
        incidentId: Annotated[str, Field(description="Incident id, e.g. INC-1042")],
        ctx: Context,
    ) -> Annotated[CallToolResult, Summary] | InputRequiredResult:
        """Summarize an incident log in two sentences (raw log when no model is available, and it says so)."""
        try:
            log_text = await app.bounded_log_from_loop(incidentId)
        except DataError as exc:
            return results.failed(exc)
        skipped: list[str] = []

        question = client_features.SamplingQuestion(SYSTEM_PROMPT, USER_PREFIX + log_text, MAX_TOKENS, TEMPERATURE)
        sampled = await client_features.sample(
            ctx,
            question,
            timeout=app.settings.sampling_timeout_seconds,
            binding={"tool": "summarize_incident", "incidentId": incidentId},
        )
        if isinstance(sampled, client_features.Ask):
            return sampled.result
        if isinstance(sampled, client_features.Sampled):
            summary = Summary(
                incident_id=incidentId,
                mode="sampled",
                text=sampled.text,
                model=sampled.model,
                skipped=skipped,
            )
            return results.ok(sampled.text, summary)
        skipped.append(f"sampling: {sampled.reason}")
        await _skipped(ctx, app, incidentId, "sampling", sampled.reason)

        # The sampling question stays as it always was; the desk's own model and the raw log get the evidence too.
        findings = await investigation.findings_for_prompt(app, incidentId)
        answer = await _from_provider(app, log_text, findings)
        if isinstance(answer, provider.ProviderAnswer):
            # Masked like the log it summarises: a provider's answer may quote a secret (its own key among them).
            text = await app.redacted(answer.text)
            summary = Summary(incident_id=incidentId, mode="provider", text=text, model=answer.model, skipped=skipped)
            return results.ok(text, summary)
        skipped.append(f"provider: {answer}")
        await _skipped(ctx, app, incidentId, "provider", answer)

        text = RAW_PREFIX + investigation.after_log(log_text, findings)
        return results.ok(text, Summary(incident_id=incidentId, mode="raw", text=text, model=None, skipped=skipped))
