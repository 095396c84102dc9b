"""A tiny MCP server with resources, over stdio: the fixture of tests/mcp.rs for
`?<mcp resources SERVER>!` and `?<mcp read SERVER URI>!` (docs/mcp.md). Built on the official
MCP Python SDK (`pip install mcp`: `MCPServer` in 2.x, `FastMCP` before)."""

try:
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp < 2
    from mcp.server.fastmcp import FastMCP as Server

server = Server("resource-fixture")

# The first bytes of a PNG file and a little more: 25 bytes of binary.
DOT = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108")


@server.resource("note://hello", description="A greeting", mime_type="text/plain")
def hello() -> str:
    return "你好, resources! 第二行 / second line"


@server.resource("img://dot.png", description="Binary: a PNG's first bytes", mime_type="image/png")
def dot() -> bytes:
    return DOT


@server.resource("note://{name}", description="A note by name", mime_type="text/plain")
def note(name: str) -> str:
    return f"note {name}"


if __name__ == "__main__":
    server.run()
