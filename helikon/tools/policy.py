"""`ToolPolicy`: a run-level permission policy combined with each tool's own rules.

The loop reads permissions from `TransitionCtx`: `tools` (name -> static permission) and an
optional pure `call_policy` for permissions that depend on a call's arguments. A policy
computes both from the run's tools; every combination is `strictest`, so neither the run
nor the tool can loosen what the other restricts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from helikon.core.context import Permission, strictest
from helikon.core.items import ToolCall
from helikon.tools.tool import Tool

CallPolicy = Callable[[ToolCall], Permission | None]


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """A run's permission policy.

    Args:
        default: the permission of a tool the policy does not name.
        ask_for_side_effects: ask before any tool not marked `read_only`.
        deny: names of tools the run may not call.
        ask: names of tools whose calls need approval.

    Names the run has no tool for are ignored, so one policy can serve every agent of a run.
    """

    default: Permission = "allow"
    ask_for_side_effects: bool = False
    deny: frozenset[str] = frozenset()
    ask: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        # Accept any iterable of names (a list, a set) while keeping the value immutable.
        object.__setattr__(self, "deny", frozenset(self.deny))
        object.__setattr__(self, "ask", frozenset(self.ask))

    def run_permission(self, tool: Tool) -> Permission:
        """What the run alone says about `tool`, before the tool's own rules."""
        if tool.name in self.deny:
            return "deny"
        said = "ask" if tool.name in self.ask else self.default
        if self.ask_for_side_effects and not tool.read_only:
            return strictest(said, "ask")
        return said

    def permissions(self, tools: Iterable[Tool]) -> Mapping[str, Permission]:
        """Each tool's static permission for `TransitionCtx.tools`.

        The run's word, the tool's declared permission and a `needs_approval=True`, combined
        by `strictest`. A `needs_approval` callable is left to `call_policy`.
        """
        table: dict[str, Permission] = {}
        for each in tools_by_name(tools).values():
            static = strictest(self.run_permission(each), each.permission)
            table[each.name] = strictest(static, "ask") if each.needs_approval is True else static
        return MappingProxyType(table)

    def call_policy(self, tools: Iterable[Tool]) -> CallPolicy | None:
        """A `TransitionCtx.call_policy` for the tools whose approval depends on arguments.

        None when no tool has a `needs_approval` callable, which keeps the loop's fast path.
        """
        dynamic = {each.name: each for each in tools if callable(each.needs_approval)}
        if not dynamic:
            return None

        def policy(call: ToolCall) -> Permission | None:
            found = dynamic.get(call.name)
            return None if found is None else found.permission_for(call)

        return policy


def tools_by_name(tools: Iterable[Tool]) -> dict[str, Tool]:
    """The tools keyed by name, for `execute_batch`.

    Raises:
        ValueError: two tools share a name (the model could not tell them apart).
    """
    named: dict[str, Tool] = {}
    for each in tools:
        if each.name in named:
            raise ValueError(f"two tools are named {each.name!r}")
        named[each.name] = each
    return named
