"""`Tool` and `@tool`: a Python function the model can call, with its schema and its rules.

A tool validates the model's argument JSON against a pydantic model built from the function's
signature (or, for `Tool.from_schema`, against the JSON schema it was given), so bad input
becomes an error result the model can fix rather than a crash (SEMANTICS.md, "Bad tool
input is the model's to fix"). Sync functions run off the event
loop, each call in a daemon thread of its own that nothing waits for once the call is over
(see `Tool`'s `timeout`). Only `FatalToolError` and cancellation leave `invoke`.

Cancellation means a cancel of the task running the call (the run was cancelled or timed
out, or a sibling's `FatalToolError` stopped the batch): the task then has a cancel request
pending (`Task.cancelling()`). A `CancelledError` the tool raises while nobody cancelled it
(an upstream future it awaited was cancelled, or it raised one itself) is the tool's failure,
an error result like any other exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import re
import threading
from collections.abc import Callable
from typing import Any, Protocol, get_args, overload

import pydantic_core

from helikon.core.context import Permission, strictest
from helikon.core.errors import FatalToolError
from helikon.core.items import ToolCall, ToolResult
from helikon.core.quoting import quoted
from helikon.core.tool_spec import ToolSpec
from helikon.tools.context import ToolContext
from helikon.tools.docstrings import parse_docstring
from helikon.tools.json_schema import schema_arguments
from helikon.tools.schema import InvalidArguments, arguments_of

ApprovalRule = bool | Callable[[dict[str, Any]], bool]
"""`True` always asks; a callable asks when it returns True for the call's parsed arguments."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PERMISSIONS = frozenset(get_args(Permission))


class _ArgumentsParser(Protocol):
    """How a tool reads its arguments: from a signature (`schema.Arguments`) or from a
    given JSON schema (`json_schema.SchemaArguments`)."""

    def parse(self, arguments: str) -> dict[str, Any]: ...
    def bind(
        self, values: dict[str, Any], context: ToolContext[Any]
    ) -> tuple[list[Any], dict[str, Any]]: ...
    def json_schema(self) -> dict[str, Any]: ...


class _Expired(Exception):
    """The tool's own timeout expired (told apart from a TimeoutError the tool raised)."""


class Tool:
    """A function the model can call.

    Args:
        fn: a plain or async function; its type hints give the argument schema, its
            docstring the description (first paragraph) and parameter descriptions (`Args:`).
        name: the name the model calls it by; the function's name when not given.
        description: overrides the docstring's first paragraph.
        needs_approval: `True` routes every call through approval; a callable of the parsed
            arguments (by parameter name) routes the calls for which it returns True.
        idempotent: calling it twice with the same `ToolContext.idempotency_key` has the effect
            of calling it once (it deduplicates by the key): a durable run re-runs such a call
            when a crash left its outcome unknown, as it does a `read_only` one.
        read_only: the tool has no side effects (a run policy may allow it while asking for
            side-effecting tools).
        permission: the tool's static permission: "allow", "deny" or "ask".
        timeout: seconds a call may take before it becomes an error result; None for no limit.
            A sync tool runs in a daemon thread of its own, which cannot be stopped: past the
            timeout (or the run's deadline, or a cancel) it runs on, its result discarded,
            and nothing waits for it, not the run, not `asyncio.run`'s shutdown, not the
            interpreter's exit (which ends it where it is).

    Raises:
        ValueError: a name the model APIs refuse, an unknown permission, a timeout <= 0.
        TypeError: a signature that cannot be described (`*args`, unresolvable annotations).
    """

    __slots__ = (
        "_arguments",
        "_fn",
        "_idempotent",
        "_is_async",
        "_needs_approval",
        "_permission",
        "_read_only",
        "_spec",
        "_timeout",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        needs_approval: ApprovalRule = False,
        read_only: bool = False,
        permission: Permission = "allow",
        timeout: float | None = None,
        idempotent: bool = False,
    ) -> None:
        name = name if name is not None else getattr(fn, "__name__", "")
        _check_options(name, permission, timeout)
        doc = parse_docstring(fn.__doc__)
        arguments = arguments_of(fn, name, doc.params)
        described = description if description is not None else doc.description
        self._setup(fn, ToolSpec(name, described, arguments.json_schema()), arguments)
        self._needs_approval = needs_approval
        self._read_only = read_only
        self._idempotent = idempotent
        self._permission: Permission = permission
        self._timeout = timeout

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        schema: dict[str, Any],
        call: Callable[[dict[str, Any]], Any],
        *,
        needs_approval: ApprovalRule = False,
        read_only: bool = False,
        permission: Permission = "allow",
        timeout: float | None = None,
    ) -> Tool:
        """A tool described by a JSON schema rather than a signature (an MCP server's tools).

        The model is offered `schema`; each call's arguments are checked against it (with
        the `jsonschema` package, which the `mcp` extra brings), and arguments that are not
        a JSON object or break the schema are an error result the model sees. `call`
        receives the checked arguments as one dict; it may be sync or async, and what it
        returns is the result, as for any tool.

        Args:
            name: the name the model calls it by.
            description: what the model is told the tool does.
            schema: a JSON schema of an object; a schema without `type` is taken as one.
            call: called with the arguments dict.
            needs_approval: as for `Tool`; a callable sees the arguments dict.
            read_only: as for `Tool`.
            permission: as for `Tool`.
            timeout: as for `Tool`.

        Raises:
            ValueError: a name the model APIs refuse, an unknown permission, a timeout <= 0,
                or a schema that is not valid JSON Schema of an object.
            ModuleNotFoundError: the `jsonschema` package is not installed.
        """
        _check_options(name, permission, timeout)
        arguments = schema_arguments(name, schema)
        made = cls.__new__(cls)
        made._setup(call, ToolSpec(name, description, arguments.json_schema()), arguments)
        made._needs_approval = needs_approval
        made._read_only = read_only
        made._idempotent = False
        made._permission = permission
        made._timeout = timeout
        return made

    def _setup(self, fn: Callable[..., Any], spec: ToolSpec, arguments: _ArgumentsParser) -> None:
        self._arguments: _ArgumentsParser = arguments
        self._spec = spec
        self._fn = fn
        self._is_async = inspect.iscoroutinefunction(fn)

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def description(self) -> str:
        return self._spec.description

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it: name, description, JSON schema of the arguments."""
        return self._spec

    @property
    def fn(self) -> Callable[..., Any]:
        """The function the tool wraps, unchanged (handy for calling it directly in tests)."""
        return self._fn

    @property
    def needs_approval(self) -> ApprovalRule:
        return self._needs_approval

    @property
    def read_only(self) -> bool:
        return self._read_only

    @property
    def idempotent(self) -> bool:
        return self._idempotent

    @property
    def rerunnable(self) -> bool:
        """Safe to run again when a crash left a call's outcome unknown."""
        return self._read_only or self._idempotent

    @property
    def permission(self) -> Permission:
        """The static permission the tool was declared with (see `permission_for`)."""
        return self._permission

    @property
    def timeout(self) -> float | None:
        return self._timeout

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def permission_for(self, call: ToolCall) -> Permission:
        """The call's permission: the static one, tightened to "ask" when approval is needed.

        A `needs_approval` callable sees the call's parsed arguments. When they do not parse,
        or the callable raises, the answer is "ask": a call is never allowed by an error.
        """
        rule = self._needs_approval
        if self._permission == "deny" or rule is False:
            return self._permission
        if rule is True:
            return strictest(self._permission, "ask")
        try:
            asks = bool(rule(self._arguments.parse(call.arguments)))
        except Exception:
            return "ask"
        return strictest(self._permission, "ask") if asks else self._permission

    def invalid_arguments(self, call: ToolCall) -> ToolResult | None:
        """The error result `invoke` gives `call` when its arguments do not fit the tool's
        schema (`error: invalid arguments for tool ...`, one line per problem), without
        running the tool; None when they fit. A runtime that runs a tool otherwise (the
        Temporal workflow's agents as tools) checks a call with it."""
        try:
            self._arguments.parse(call.arguments)
        except InvalidArguments as exc:
            return self._refused(call, exc)
        return None

    def _refused(self, call: ToolCall, exc: InvalidArguments) -> ToolResult:
        lines = "\n".join(f"- {line}" for line in exc.lines)
        return _error(call, f"error: invalid arguments for tool {self.name!r}:\n{lines}")

    async def invoke(self, call: ToolCall, context: ToolContext[Any]) -> ToolResult:
        """Run the call and return its result; never raises for bad input or a failing tool.

        Raises:
            FatalToolError: the tool raised it; the run should fail. Its `tool` and `call_id`
                are filled in when the tool left them empty, and a note names the call.
            asyncio.CancelledError: the call was cancelled (its task has a cancel request
                pending); it is never swallowed. A `CancelledError` the tool raised without
                being cancelled is an error result.
        """
        try:
            values = self._arguments.parse(call.arguments)
        except InvalidArguments as exc:
            return self._refused(call, exc)
        args, kwargs = self._arguments.bind(values, context)
        try:
            return ToolResult(call.call_id, output_text(await self._run(args, kwargs)))
        except FatalToolError as exc:
            exc.tool = exc.tool or self.name
            exc.call_id = exc.call_id or call.call_id
            exc.add_note(f"raised by tool {self.name!r} (call {call.call_id!r})")
            raise
        except _Expired:
            message = f"error: tool {self.name!r} timed out after {self._timeout:g} seconds"
            return _error(call, message)
        except asyncio.CancelledError as exc:
            if _cancel_requested():
                raise
            return _error(call, f"error: {type(exc).__name__}: {exc}")
        except Exception as exc:
            return _error(call, f"error: {type(exc).__name__}: {exc}")

    async def _run(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if self._timeout is None:
            return await self._call(args, kwargs)
        scope = asyncio.timeout(self._timeout)
        try:
            async with scope:
                return await self._call(args, kwargs)
        except TimeoutError:
            if scope.expired():
                raise _Expired from None
            raise

    async def _call(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if self._is_async:
            return await self._fn(*args, **kwargs)
        result = await _in_own_thread(self._fn, args, kwargs, f"helikon-tool-{self.name}")
        if inspect.isawaitable(result):  # a sync wrapper around a coroutine function
            result = await result
        return result


async def _in_own_thread(
    fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], name: str
) -> Any:
    """Call `fn` in a daemon thread of its own, with the caller's context, and await it.

    Not `asyncio.to_thread`: the loop's default executor is waited for when the loop shuts
    down (`asyncio.run` does so), and its threads at interpreter exit, so a tool blocking past
    the run's deadline or its own timeout would hold the program up that long. When the
    caller stops waiting (cancelled, timed out) the thread runs on, nobody joins it, and its
    result is discarded.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def resolve(result: Any, error: BaseException | None) -> None:
        if done.done():  # the caller stopped waiting
            return
        if error is None:
            done.set_result(result)
        else:
            done.set_exception(error)

    def work() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(fn, *args, **kwargs)
        except StopIteration as exc:  # a future refuses it, as a coroutine would
            error = RuntimeError(f"StopIteration: {exc}")
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
            loop.call_soon_threadsafe(resolve, result, error)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await done


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: ApprovalRule = False,
    read_only: bool = False,
    permission: Permission = "allow",
    timeout: float | None = None,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: ApprovalRule = False,
    read_only: bool = False,
    permission: Permission = "allow",
    timeout: float | None = None,
    idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a plain or async function into a `Tool`; bare (`@tool`) or with options.

    The options are `Tool`'s; see there.
    """

    def wrap(function: Callable[..., Any]) -> Tool:
        return Tool(
            function,
            name=name,
            description=description,
            needs_approval=needs_approval,
            read_only=read_only,
            permission=permission,
            timeout=timeout,
            idempotent=idempotent,
        )

    return wrap if fn is None else wrap(fn)


def output_text(output: Any) -> str:
    """A tool's return value as the model reads it: str as is, None as "", the rest as JSON."""
    if isinstance(output, str):
        return output
    if output is None:
        return ""
    return pydantic_core.to_json(output, fallback=str).decode()


def _cancel_requested() -> bool:
    """True when the task running the call was cancelled, so a CancelledError is a real cancel.

    Outside a task (no way to tell) it counts as a cancel: cancellation is never swallowed.
    """
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _error(call: ToolCall, content: str) -> ToolResult:
    return ToolResult(call.call_id, content, is_error=True, status="errored")


def _check_options(name: str, permission: str, timeout: float | None) -> None:
    if not _NAME.match(name):
        raise ValueError(f"tool name {quoted(name)} must be 1-64 letters, digits, '_' or '-'")
    if permission not in _PERMISSIONS:
        raise ValueError(f"tool {name!r}: permission must be allow, deny or ask: {permission!r}")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"tool {name!r}: timeout must be positive, not {timeout!r}")
