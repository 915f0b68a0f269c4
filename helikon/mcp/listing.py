"""An MCP server's tool listing as helikon `Tool`s: which tools, under which names, asking
for approval when.

The rules, and why:

- A tool keeps the server's name, unless the server has a `prefix` (then `prefix + name`).
  A name the model APIs refuse (1-64 letters, digits, `_`, `-`), a name listed twice, and an
  input or output schema that is not JSON Schema of an object or cannot be checked in linear
  time (`helikon.tools.schema_keywords`, `helikon.mcp.output`) leave the tool out: it is named in
  `MCPServer.skipped` with the reason and logged (logger `helikon.mcp`, WARNING), and the
  rest of the listing is kept.
- Hints only ever tighten. A tool whose `destructiveHint` is true or absent (MCP's default
  is true) needs approval, unless the user decides (`needs_approval=`). `readOnlyHint` is
  believed only with `trust_hints=True`: an untrusted server must not be able to make its
  tools pass a policy that allows read-only tools (`ToolPolicy(ask_for_side_effects=True)`),
  nor make them safe to run again.
- A predicate that raises fails closed: a filter leaves the tool out, an approval rule asks.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from mcp import types

from helikon.core.quoting import quoted
from helikon.tools import Tool

logger = logging.getLogger("helikon.mcp")

ToolFilter = Collection[str] | Callable[[types.Tool], bool]
"""Names of the server's tools to keep, or a predicate on each listed tool."""

ApprovalChoice = bool | Callable[[types.Tool], bool]
"""Whether each of the server's tools needs approval: for all, or by a predicate."""

Caller = Callable[[types.Tool], Callable[[dict[str, Any]], Awaitable[str]]]
"""Given a listed tool, the function that calls it.

Raises:
    ValueError: the tool cannot be called safely (its output schema): it is left out.
"""


@dataclass(frozen=True, slots=True)
class ListingRules:
    """What an `MCPServer` makes of its listing (its options of the same names)."""

    server: str
    tool_filter: ToolFilter | None = None
    prefix: str = ""
    needs_approval: ApprovalChoice | None = None
    trust_hints: bool = False
    timeout: float | None = None


def tools_of(
    listing: Sequence[types.Tool], rules: ListingRules, caller: Caller
) -> tuple[tuple[Tool, ...], dict[str, str]]:
    """The tools to offer, and the tools left out (by name on the server) with the reason."""
    counts = Counter(each.name for each in listing)
    tools: list[Tool] = []
    skipped: dict[str, str] = {}
    for each in listing:
        if not _kept(each, rules):
            continue
        if counts[each.name] > 1:
            skipped[each.name] = "the server lists it more than once"
            continue
        try:
            tools.append(_tool(each, rules, caller))
        except ValueError as exc:
            skipped[each.name] = str(exc)
    for name, reason in skipped.items():
        logger.warning("MCP server %r: tool %s left out: %s", rules.server, quoted(name), reason)
    return tuple(tools), skipped


def needs_approval(listed: types.Tool, rules: ListingRules) -> bool:
    """The user's choice when given, else the hints, which can only ask for approval."""
    choice = rules.needs_approval
    if isinstance(choice, bool):
        return choice
    if choice is not None:
        try:
            return bool(choice(listed))
        except Exception:
            return True
    hints = listed.annotations
    if rules.trust_hints and hints is not None and hints.read_only_hint is True:
        return False
    return hints is None or hints.destructive_hint is not False


def read_only(listed: types.Tool, rules: ListingRules) -> bool:
    """Believed only from a trusted server."""
    hints = listed.annotations
    return rules.trust_hints and hints is not None and hints.read_only_hint is True


def _kept(listed: types.Tool, rules: ListingRules) -> bool:
    keep = rules.tool_filter
    if keep is None:
        return True
    if callable(keep):
        try:
            return bool(keep(listed))
        except Exception as exc:
            logger.warning(
                "MCP server %r: tool %s left out: the tool filter raised %s: %s",
                rules.server,
                quoted(listed.name),
                type(exc).__name__,
                exc,
            )
            return False
    return listed.name in keep


def _tool(listed: types.Tool, rules: ListingRules, caller: Caller) -> Tool:
    return Tool.from_schema(
        rules.prefix + listed.name,
        listed.description or listed.title or "",
        listed.input_schema,
        caller(listed),
        needs_approval=needs_approval(listed, rules),
        read_only=read_only(listed, rules),
        timeout=rules.timeout,
    )
