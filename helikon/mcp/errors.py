"""What can go wrong with an MCP server, as helikon reports it.

`MCPServerError` is raised to your code: a server that cannot connect, is not connected, or
cannot list its tools (a run reports the last as `ToolsUnavailable`). `MCPToolError` never
reaches you: a tool call that fails on the server's side (an `isError` result, a protocol
error, a result that is not a valid MCP result or is too large) raises it inside the tool,
and the model reads it as the call's error result. A connection that dies during a call is
a `FatalToolError`, which fails the run.
"""

from __future__ import annotations

from helikon.core.errors import HelikonError


class MCPServerError(HelikonError):
    """An MCP server could not be connected, is not connected, or could not list its tools;
    `server` is its name."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(f"MCP server {server!r}: {message}")
        self.server = server


class MCPToolError(Exception):
    """A tool call the server failed: the model reads the message as the error result."""
