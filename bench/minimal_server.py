"""The baseline: the smallest useful MCPServer, one resource and one tool, served over stdio."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("minimal")


@server.resource("note://index", mime_type="text/plain")
def index() -> str:
    return "INC-1042\nINC-1043"


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    server.run()
