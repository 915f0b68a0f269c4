"""`MCPServer`: one MCP server (a subprocess over stdio, a URL, or an in-process server) as a
source of tools for an agent's runs.

Theory of operation: `connect()` opens a `Connection` (the SDK's client, held by a task of
its own). The first run that starts lists the server's tools, page by page through the
cursor, and the server keeps that listing: every run takes the listing as it is when the
run starts and keeps those tools to its end; `refresh()` lists again for the runs after.
Each listed tool is a `Tool.from_schema` whose call sends `tools/call` on the connection,
checks its structured content against the tool's output schema (`helikon.mcp.output`) and
turns the answer into text (`helikon.mcp.results`). Failures are sorted by whose they
are: the model's (bad arguments: an error result, before anything is sent), the tool's or
the server's (an `isError` result, a protocol error, an invalid or oversized result, a
call over `timeout`: an error result), or the connection's (it died: `FatalToolError`,
which fails the run).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._otel import inject_trace_context
from pydantic import ValidationError

from helikon._version import __version__
from helikon.core.errors import FatalToolError
from helikon.core.quoting import quoted
from helikon.mcp.connection import Connection
from helikon.mcp.errors import MCPServerError, MCPToolError
from helikon.mcp.listing import ApprovalChoice, ListingRules, ToolFilter, tools_of
from helikon.mcp.output import OutputCheck, output_check
from helikon.mcp.results import result_text
from helikon.tools import Tool

# A listing that has not ended after this many pages is a server that pages forever.
MAX_PAGES = 100
_DEAD = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class MCPServer:
    """An MCP server whose tools an agent may call: ``Agent(..., mcp_servers=[server])``.

    Give exactly one of `stdio`, `url` or `server`, then connect it around the runs that use
    it (``async with server: ...``, or `connect()` and `close()`), in the event loop the runs
    run in.

    Args:
        stdio: the command that starts the server as a subprocess, as a list
            (``["python", "server.py"]``); it speaks MCP over its stdin and stdout.
        url: a streamable-HTTP endpoint (``"http://127.0.0.1:8000/mcp"``).
        server: an in-process server (the SDK's `mcp.server.mcpserver.MCPServer` or
            low-level `Server`), e.g. in tests.
        name: names the server in errors and logs (default: the command, the URL, or the
            in-process server's name). Never taken from what the server says.
        env: extra environment variables for a stdio server.
        cwd: the working directory of a stdio server.
        headers: HTTP headers sent with every request to a `url` (authorization).
        tool_filter: the names (on the server) of the tools to offer, or a predicate on
            each listed `mcp.types.Tool`; all of them when None.
        prefix: put before every tool's name, e.g. ``"gh_"``; needed when two servers of
            one agent offer a tool of the same name (a run refuses that otherwise).
        needs_approval: True or False for all the server's tools, or a predicate on each
            listed tool. None (the default): a tool needs approval unless its
            `destructiveHint` is false (or, with `trust_hints`, its `readOnlyHint` true).
        trust_hints: believe the server's `readOnlyHint`: such a tool is `read_only` and
            needs no approval. Off by default: hints from an untrusted server are ignored
            where they would loosen anything.
        timeout: seconds a tool call, and a whole listing, may take; past it the call is
            an error result (the listing fails). None for no limit.
        connect_timeout: seconds `connect()` may take.
        close_timeout: seconds `close()` waits before it abandons the connection.
        max_result_chars: a result longer than this is an error result instead (what a
            model can read is limited); None for no limit.

    Raises:
        ValueError: not exactly one of `stdio`, `url`, `server`; an empty or non-list
            command; a URL that is not http(s); a negative timeout.
        TypeError: a `tool_filter` that is a single string.
    """

    def __init__(
        self,
        *,
        stdio: Sequence[str] | None = None,
        url: str | None = None,
        server: Any = None,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        headers: Mapping[str, str] | None = None,
        tool_filter: ToolFilter | None = None,
        prefix: str = "",
        needs_approval: ApprovalChoice | None = None,
        trust_hints: bool = False,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
        close_timeout: float | None = 10.0,
        max_result_chars: int | None = 100_000,
    ) -> None:
        _check_target(stdio, url, server)
        _check_limits(timeout, connect_timeout, close_timeout, max_result_chars)
        if isinstance(tool_filter, str):
            raise TypeError("tool_filter takes names as a list (or a predicate), not one str")
        self._open_client = _client_factory(stdio, url, server, env, cwd, headers)
        self._name = name or _label(stdio, url, server)
        self._rules = ListingRules(
            self._name, tool_filter, prefix, needs_approval, trust_hints, timeout
        )
        self.connect_timeout = connect_timeout
        self.close_timeout = close_timeout
        self.max_result_chars = max_result_chars
        self._connection = Connection(self._open_client, self._name)
        self._in_process = server is not None
        self._lock: asyncio.Lock | None = None
        self._listed: tuple[Tool, ...] | None = None
        self._listing: tuple[types.Tool, ...] = ()
        self._skipped: dict[str, str] = {}
        self._lost: str | None = None  # how the open connection was seen to close, if it was

    def __repr__(self) -> str:
        return f"MCPServer({self._name!r})"

    # ------------------------------------------------------------ what it is

    @property
    def name(self) -> str:
        return self._name

    @property
    def connected(self) -> bool:
        """Connected, and the connection not seen to close since (a call that found it
        closed makes this False until the next `connect()`)."""
        return self._connection.client is not None and self._lost is None

    @property
    def listed(self) -> tuple[Tool, ...] | None:
        """The tools of the latest listing (what runs starting now get); None before it."""
        return self._listed

    @property
    def listing(self) -> tuple[types.Tool, ...]:
        """The latest listing as the server sent it, every tool, for the record."""
        return self._listing

    @property
    def skipped(self) -> Mapping[str, str]:
        """Tools of the latest listing left out, by name on the server, with the reason."""
        return dict(self._skipped)

    # ------------------------------------------------------------ connecting

    async def __aenter__(self) -> MCPServer:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def connect(self, timeout: float | None = None) -> None:
        """Start the server (or reach it) and do the MCP handshake.

        Args:
            timeout: seconds it may take (default: `connect_timeout`).

        Raises:
            MCPServerError: it could not connect in time, or at all (the SDK's error is
                the cause).
        """
        limit = self.connect_timeout if timeout is None else timeout
        if self._lost is not None:  # the old connection is dead: start afresh
            await self._connection.stop(self.close_timeout)
            self._lost = None
        try:
            await self._connection.start(limit)
        except TimeoutError:
            raise MCPServerError(self._name, f"did not connect within {limit:g} seconds") from None
        except Exception as exc:
            raise MCPServerError(self._name, f"could not connect: {_described(exc)}") from exc

    async def close(self) -> None:
        """Close the connection (a stdio server's process ends); a listing is kept."""
        await self._connection.stop(self.close_timeout)

    # ------------------------------------------------------------ listing

    async def list_tools(self) -> tuple[Tool, ...]:
        """The server's tools: listed the first time, then that listing until `refresh()`.

        Raises:
            MCPServerError: not connected, or the listing failed (the reason says why).
        """
        if self._listed is not None:
            return self._listed
        async with self._listing_lock():
            if self._listed is None:
                await self._list()
        assert self._listed is not None
        return self._listed

    async def refresh(self) -> tuple[Tool, ...]:
        """List the tools again, for the runs that start after this (runs already going
        keep theirs).

        Raises:
            MCPServerError: not connected, or the listing failed (the old one is kept).
        """
        async with self._listing_lock():
            await self._list()
        assert self._listed is not None
        return self._listed

    def _listing_lock(self) -> asyncio.Lock:
        if self._lock is None:  # made in the running loop, not in __init__
            self._lock = asyncio.Lock()
        return self._lock

    async def _list(self) -> None:
        client = self._client()
        try:
            async with asyncio.timeout(self._rules.timeout):
                listing = await _every_page(client, self._name)
        except TimeoutError:
            limit = self._rules.timeout
            raise MCPServerError(self._name, f"listing its tools took over {limit:g} s") from None
        except MCPServerError:
            raise
        except ValidationError as exc:
            message = f"listing its tools failed: the server's answer {_not_valid(exc)}"
            raise MCPServerError(self._name, message) from None
        except Exception as exc:
            message = f"listing its tools failed: {_described(exc)}"
            raise MCPServerError(self._name, message) from exc
        tools, skipped = tools_of(listing, self._rules, self._caller)
        self._listing, self._listed, self._skipped = listing, tools, skipped

    def _client(self) -> Client:
        client: Client | None = self._connection.client
        ended = self._connection.ended
        if client is not None and self._lost is None:
            return client
        why = ""
        if self._lost is not None:
            why = f" (its connection closed {self._lost})"
        elif ended is not None:
            why = f" (its connection ended: {_described(ended)})"
        raise MCPServerError(self._name, f"is not connected{why}")

    # ------------------------------------------------------------ calling

    def _caller(self, listed: types.Tool) -> Callable[[dict[str, Any]], Any]:
        check = output_check(listed)  # ValueError: the tool is left out of the listing

        async def call(arguments: dict[str, Any]) -> str:
            return await self._call(listed.name, arguments, check)

        return call

    async def _call(self, name: str, arguments: dict[str, Any], check: OutputCheck) -> str:
        try:
            client = self._client()
        except MCPServerError as exc:
            raise FatalToolError(str(exc)) from None
        _check_sendable(arguments)
        try:
            meta = _trace_context() if self._in_process else None
            result = await _send_call(client, name, arguments, meta)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                raise FatalToolError(self._died(name)) from exc
            message = f"the server refused the call: {exc.message} (code {exc.code})"
            raise MCPToolError(message) from None
        except _DEAD as exc:
            raise FatalToolError(self._died(name)) from exc
        except ValidationError as exc:
            raise MCPToolError(f"the server's answer {_not_valid(exc)}") from None
        check(result)
        return result_text(result, self.max_result_chars)

    def _died(self, name: str) -> str:
        self._lost = f"during a call of {name!r}"
        return f"MCP server {self._name!r} closed the connection during a call of {name!r}"


async def _send_call(
    client: Client, name: str, arguments: dict[str, Any], meta: Any
) -> types.CallToolResult:
    """`tools/call`, by the SDK's public `send_request`, not its `call_tool`: that checks
    structured content against the output schema with Python's `re` on the event loop, where
    a hostile pattern holds every run (`helikon.mcp.output` checks it instead). What else
    `call_tool` does is not needed here: helikon gives the SDK no sampling or elicitation
    callbacks to answer a server's input requests with, nor result-claiming extensions; a
    `HEADER_MISMATCH` (the tool changed since it was listed) is the call's error result."""
    params = types.CallToolRequestParams(name=name, arguments=arguments, _meta=meta)
    request = types.CallToolRequest(params=params)
    return await client.session.send_request(request, types.CallToolResult)


async def _every_page(client: Client, name: str) -> tuple[types.Tool, ...]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tuple(tools)
        if cursor in seen:
            message = f"its tool list pages in a circle (cursor {quoted(cursor)} came back)"
            raise MCPServerError(name, message)
        seen.add(cursor)
    raise MCPServerError(name, f"its tool list did not end within {MAX_PAGES} pages")


def _check_sendable(arguments: dict[str, Any]) -> None:
    """JSON-RPC carries UTF-8: text with a lone surrogate (`"\\ud800"`, valid in JSON) would
    break the transport, so such arguments are the model's to fix."""
    try:
        json.dumps(arguments, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise MCPToolError(
            "the arguments hold a lone surrogate (an unpaired \\ud800-\\udfff escape), "
            "which cannot be sent to an MCP server"
        ) from None


def _not_valid(exc: ValidationError) -> str:
    """`is not valid MCP (...)`: the first few problems, each where it is and what."""
    problems = exc.errors(include_url=False)
    shown = "; ".join(
        f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
        for problem in problems[:3]
    )
    more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    return f"is not valid MCP ({shown}{more})"


def _described(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _described(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _trace_context() -> Any:
    """The current trace context as `_meta` entries (`traceparent`, `tracestate`), or None.

    Over stdio and HTTP the SDK puts them on every request itself; its in-process transport
    does not, so a call to an in-process server is given them here, by the SDK's own helper.
    """
    meta: dict[str, Any] = {}
    inject_trace_context(meta)
    return meta or None


def _check_target(stdio: Sequence[str] | None, url: str | None, server: Any) -> None:
    given = [x for x in (stdio, url, server) if x is not None]
    if len(given) != 1:
        raise ValueError("MCPServer takes exactly one of stdio=[...], url=... or server=...")
    if stdio is not None and (
        isinstance(stdio, str) or not stdio or not all(isinstance(x, str) for x in stdio)
    ):
        raise ValueError("stdio takes the command as a non-empty list: ['python', 'server.py']")
    if url is not None and not url.startswith(("http://", "https://")):
        raise ValueError(f"url must be an http:// or https:// URL, not {url!r}")


def _check_limits(*limits: float | None) -> None:
    for limit in limits:
        if limit is not None and not limit > 0:
            raise ValueError(f"MCPServer timeouts and limits must be positive, not {limit!r}")


def _label(stdio: Sequence[str] | None, url: str | None, server: Any) -> str:
    if stdio is not None:
        return " ".join([Path(stdio[0]).name, *stdio[1:]])
    if url is not None:
        return url
    return str(getattr(server, "name", None) or "in-process")


def _client_factory(
    stdio: Sequence[str] | None,
    url: str | None,
    server: Any,
    env: Mapping[str, str] | None,
    cwd: str | Path | None,
    headers: Mapping[str, str] | None,
) -> Callable[[], AbstractAsyncContextManager[Client]]:
    """A fresh SDK client per connection (a client can be entered once)."""
    me = types.Implementation(name="helikon", version=__version__)

    def open_client() -> Client:
        target: Any = server
        if stdio is not None:
            target = StdioServerParameters(
                command=stdio[0], args=list(stdio[1:]), env=dict(env or {}) or None, cwd=cwd
            )
        elif url is not None:
            target = _http(url, headers) if headers else url
        # The SDK's response cache is off: the server's listing is kept here, on purpose.
        return Client(target, cache=None, client_info=me)

    return open_client


@asynccontextmanager
async def _http(url: str, headers: Mapping[str, str]) -> AsyncIterator[Any]:
    """The streamable-HTTP transport with `headers` on every request."""
    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults
    async with (
        httpx2.AsyncClient(headers=dict(headers), timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams
