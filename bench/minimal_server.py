"""The baseline: the smallest useful MCPServer, one resource and one tool, served over stdio.

With ``--http PORT [--stateless]`` it serves Streamable HTTP on loopback instead, through uvicorn like the desk.
"""

import sys

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
    if "--http" in sys.argv:
        import uvicorn

        port = int(sys.argv[sys.argv.index("--http") + 1])
        asgi = server.streamable_http_app(stateless_http="--stateless" in sys.argv, host="127.0.0.1")
        uvicorn.run(asgi, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
    else:
        server.run()
