"""MCP tool servers as tools: `MCPServer` (one server), `MCPServers` (several, connected in
parallel).

A server is an async context manager you give an agent: ``Agent(..., mcp_servers=[server])``.
A run lists its tools once, before its first transition, and keeps them to its end; each
tool is a `helikon.Tool` built from the server's JSON schema, checked before it is called.
The server is treated as untrusted: its hints only ever ask for more approval, and a bad
listing, a bad result or a dead connection is an error result or a failed run, never a
traceback out of the run. Needs the `mcp` extra: ``pip install 'helikon[mcp]'``.
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401  (the SDK; this package is helikon.mcp)
except ModuleNotFoundError as exc:  # say which extra, not just which module
    if exc.name not in ("mcp", "mcp_types", "httpx2", "anyio"):
        raise
    raise ModuleNotFoundError(
        "helikon.mcp needs the mcp package: pip install 'helikon[mcp]'", name="mcp"
    ) from exc

from helikon.mcp.errors import MCPServerError, MCPToolError
from helikon.mcp.group import MCPServers
from helikon.mcp.server import MCPServer

__all__ = ["MCPServer", "MCPServerError", "MCPServers", "MCPToolError"]
