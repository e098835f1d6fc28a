"""Thin MCP feature modules: each registers its part of the surface on the server and delegates to the core."""
