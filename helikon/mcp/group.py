"""`MCPServers`: several MCP servers connected in parallel, closed together.

Each server connects in its own connection task (`helikon.mcp.connection`), so connecting
them concurrently is safe, and each has `connect_timeout` seconds. Then either every server
is needed (`strict=True`: one failure closes the others again and is raised), or the
servers that failed are dropped (the default): `active` holds the ones that connected, to
give an agent, and `failed` says why the others did not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from types import TracebackType

from helikon.mcp.server import MCPServer

logger = logging.getLogger("helikon.mcp")


class MCPServers:
    """Several `MCPServer`s as one async context manager.

    ``async with MCPServers([a, b]) as servers: Agent(..., mcp_servers=servers.active)``

    Args:
        servers: the servers, in the order `active` keeps.
        connect_timeout: seconds each server has to connect (default: each server's own).
        strict: every server must connect: on a failure the others are closed again and
            the first failure (in the servers' order) is raised, the rest added as notes.
            Otherwise a server that fails is dropped from `active` and kept in `failed`.
    """

    def __init__(
        self,
        servers: Iterable[MCPServer],
        *,
        connect_timeout: float | None = None,
        strict: bool = False,
    ) -> None:
        self.servers = tuple(servers)
        self.connect_timeout = connect_timeout
        self.strict = strict
        self.active: list[MCPServer] = []
        self.failed: dict[MCPServer, Exception] = {}

    async def __aenter__(self) -> MCPServers:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def connect(self) -> list[MCPServer]:
        """Connect every server at once; return the ones that connected (`active`).

        Raises:
            MCPServerError: with `strict`, the first server that failed.
        """
        outcomes = await asyncio.gather(
            *(server.connect(self.connect_timeout) for server in self.servers),
            return_exceptions=True,
        )
        self.active, self.failed = [], {}
        for server, outcome in zip(self.servers, outcomes, strict=True):
            if isinstance(outcome, asyncio.CancelledError):
                await self.close()
                raise outcome
            if isinstance(outcome, Exception):
                self.failed[server] = outcome
                logger.warning("MCP server %r dropped: %s", server.name, outcome)
            else:
                self.active.append(server)
        if self.strict and self.failed:
            await self.close()
            first, *others = self.failed.values()
            for other in others:
                first.add_note(f"also: {other}")
            raise first
        return list(self.active)

    async def close(self) -> None:
        """Close every server at once (each within its `close_timeout`)."""
        await asyncio.gather(*(server.close() for server in self.servers))
        self.active = []
