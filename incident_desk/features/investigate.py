"""``investigate_incident``: the incident's evidence, ranked, each finding with where to check it, within a token
budget (``incident_desk.investigation``; the work is ``core.evidence``'s)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field

from incident_desk import investigation
from incident_desk.app import DeskApp
from incident_desk.core.incidents import DataError
from incident_desk.protocol import tool_results as results
from incident_desk.protocol.tool_kinds import ToolKinds, read


class Finding(BaseModel):
    model_config = ConfigDict(extra="allow")  # a log_pattern's fields; kept out of the schema to keep it short

    kind: Literal["log_pattern", "metric_change", "change", "similar_incident", "runbook"]
    score: float
    summary: str
    provenance: dict[str, Any]


WrittenOutFinding = Annotated[Finding, results.written_out(Finding)]


class Evidence(BaseModel):
    incident_id: str
    covers: str
    findings: list[WrittenOutFinding] = Field(
        description="Best first. log_pattern adds pattern, count, first_line, last_line, first_time, new, sample"
    )
    dropped: int = Field(description="Lower-ranked findings left out to fit budgetTokens")


TOOLS = ToolKinds(investigate_incident=read(open_world=True))


def register(server: MCPServer, app: DeskApp) -> None:
    @TOOLS.tool(server)
    async def investigate_incident(
        incidentId: str,
        budgetTokens: Annotated[int, Field(ge=100, le=20000, description="text size")] = (
            investigation.DEFAULT_BUDGET_TOKENS
        ),
    ) -> Annotated[CallToolResult, Evidence]:
        """Ranked evidence with provenance: new log templates, metric steps, changes, similar incidents."""
        try:
            found = await investigation.investigate(app, incidentId)
        except DataError as exc:
            return results.failed(exc)
        answer = found.report(budgetTokens)
        findings = [
            Finding(kind=f.kind, score=f.score, summary=f.summary, provenance=f.provenance, **f.detail)  # type: ignore[arg-type]
            for f in answer.findings
        ]
        evidence = Evidence(incident_id=incidentId, covers=found.covers, findings=findings, dropped=answer.dropped)
        return results.ok(answer.text, evidence)
