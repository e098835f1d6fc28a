"""``incident-desk actions [SERVICE]``: the runbook actions a configuration offers, read from the settings alone,
so an operator can check a config file before any desk serves it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from incident_desk.cli.output import err, out

if TYPE_CHECKING:
    from incident_desk.settings.model import Settings


def run_actions(settings: Settings, service: str | None) -> int:
    from incident_desk.core.acts.links import strictest

    offered = settings.service_actions
    if service is not None and service not in offered:
        err(f"{service} has no runbook actions in this configuration (restart_service restarts it)")
        return 1
    if not offered:
        out("no runbook actions are configured ([services.<name>.actions.<action>])")
        return 0
    lines: list[str] = []
    for name in [service] if service is not None else sorted(offered):
        lines.append(f"{name}:")
        for action_name, action in sorted(offered[name].items()):
            mode = strictest(settings.approval_for("run", name), action.approval)
            lines.append(f"  {action_name}: {action.description} (approval: {mode})")
            lines.append(f"    argv: {action.argv}")
            if action.preview_argv is not None:
                lines.append(f"    preview_argv: {action.preview_argv}")
            lines.extend(
                f"    {p}: {spec.described()}" + (f" -- {spec.description}" if spec.description else "")
                for p, spec in sorted(action.parameters.items())
            )
    out("\n".join(lines))
    return 0
