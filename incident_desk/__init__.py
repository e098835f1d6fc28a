"""incident-desk: an on-call incident desk for desktop AI clients, served over MCP."""

__version__ = "0.1.0"
