"""A small MCP server written with the official SDK (its `MCPServer`, once FastMCP), for the
tests of helikon.mcp.

    python tests/mcp_server.py           # serves over stdio
    python tests/mcp_server.py --http    # streamable HTTP on a free loopback port; prints
                                         # "PORT <n>" on stdout once it listens

`build()` gives the same server for the in-process form.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel


class Weather(BaseModel):
    city: str
    temp: float


def build() -> MCPServer:
    app = MCPServer("weather-station", log_level="CRITICAL")
    answers(app)
    troubles(app)
    return app


def answers(app: MCPServer) -> None:
    """Tools that answer, with and without hints and structured content."""

    @app.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def weather(city: str) -> Weather:
        """The weather in a city."""
        return Weather(city=city, temp=21.5)

    @app.tool(structured_output=False)
    def notes(topic: str) -> str:
        """Plain text, no structured content."""
        return f"notes on {topic}"

    @app.tool()
    def wipe(path: str) -> str:
        """Delete a file (no hints: MCP's defaults say it may be destructive)."""
        return f"wiped {path}"

    @app.tool(annotations=ToolAnnotations(destructive_hint=False))
    def archive(path: str) -> str:
        """Archive a file; additive only."""
        return f"archived {path}"


def troubles(app: MCPServer) -> None:
    """Tools that fail, take long, answer at length, die, or have a name models refuse."""

    @app.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        raise ValueError(reason)

    @app.tool()
    async def slow(seconds: float) -> str:
        """Takes its time."""
        await asyncio.sleep(seconds)
        return "slept"

    @app.tool()
    def huge(size: int) -> str:
        """A long answer."""
        return "x" * size

    @app.tool()
    def die() -> str:
        """The server process exits in the middle of the call."""
        sys.stdout.flush()
        os._exit(3)

    @app.tool()
    def traceparent(ctx: Context) -> str:
        """The W3C traceparent the call carried in its _meta ("" without one)."""
        meta = ctx.request_context.meta
        found = meta.get("traceparent") if isinstance(meta, dict) else None
        return found if isinstance(found, str) else ""

    @app.tool(name="files.read")
    def files_read(path: str) -> str:
        """A name with a dot, which the model APIs refuse."""
        return path


def serve_http() -> None:
    import uvicorn

    app = build().streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue from now on, before uvicorn starts accepting them
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if "--http" in sys.argv:
        serve_http()
    else:
        build().run()
