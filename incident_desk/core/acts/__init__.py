"""What an act is without MCP: the approval form and verdicts, outcomes, links, restart actions."""
