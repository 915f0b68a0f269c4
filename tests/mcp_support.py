"""Real MCP servers for the tests of helikon.mcp: tests/mcp_server.py (the official SDK's
server) over stdio as a subprocess, over streamable HTTP on a loopback port, or in process;
tests/mcp_hostile_server.py (hand-written JSON-RPC) over stdio."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from helikon.mcp import MCPServer

HERE = Path(__file__).resolve().parent
SERVER = str(HERE / "mcp_server.py")
HOSTILE = str(HERE / "mcp_hostile_server.py")
TRANSPORTS = ("stdio", "http", "in-process")


@contextmanager
def http_server() -> Iterator[str]:
    """tests/mcp_server.py over streamable HTTP on a free loopback port; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, SERVER, "--http"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), f"the HTTP server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def weather_station(transport: str, url: str, **options: Any) -> MCPServer:
    """tests/mcp_server.py over `transport` (not connected yet)."""
    if transport == "stdio":
        return MCPServer(stdio=[sys.executable, SERVER], **options)
    if transport == "http":
        return MCPServer(url=url, **options)
    from mcp_server import build

    return MCPServer(server=build(), **options)


def hostile(mode: str = "pages", **options: Any) -> MCPServer:
    """tests/mcp_hostile_server.py in `mode`, over stdio (not connected yet)."""
    return MCPServer(stdio=[sys.executable, HOSTILE, mode], **options)
