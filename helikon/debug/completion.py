"""Tab completion for the debugger's prompt: command names, breakpoint kinds and values
(phases, guards, event types, tools), breakpoint ids and the calls a fork can edit.

`BREAK_KINDS`, the breakpoint kinds a user names by word, is the one list the prompt's
`break` command and the studio's breakpoint request (`helikon.studio.checks`) accept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helikon.core.transition import next_action_of
from helikon.debug.debugger import BreakKind, Debugger
from helikon.debug.view import event_types
from helikon.run.spec import AgentSpec

ALIASES = {
    "s": "step",
    "n": "next",
    "c": "continue",
    "b": "break",
    "d": "delete",
    "conv": "conversation",
    "h": "history",
    "q": "quit",
    "exit": "quit",
}
COMMANDS = (
    "step",
    "next",
    "continue",
    "break",
    "delete",
    "state",
    "conversation",
    "row",
    "events",
    "history",
    "up",
    "back",
    "rewind",
    "fork",
    "unfork",
    "save",
    "help",
    "quit",
)
BREAK_KINDS: tuple[BreakKind, ...] = ("phase", "event", "tool", "guard")
"""The kinds a breakpoint set by name takes (a "predicate" is a function: set in code only)."""


class ShellCompletion:
    """The `complete_*` methods `cmd.Cmd` looks up, over the shell's `debugger`."""

    debugger: Debugger

    def complete_break(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        words = line[:begidx].split()
        options: Sequence[str] = ()
        if len(words) == 1:
            options = BREAK_KINDS
        elif len(words) == 2:
            options = self._break_values(words[1])
        return [option for option in options if option.startswith(text)]

    def _break_values(self, kind: str) -> Sequence[str]:
        table = self.debugger.run.ctx.table
        if kind == "phase":
            return [phase.name for phase in table.phases]
        if kind == "guard":
            return list(table.guard_docs)
        if kind == "event":
            return event_types()
        return sorted(tool_names(self.debugger.run.agent)) if kind == "tool" else ()

    def complete_delete(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        ids = [str(breakpoint.id) for breakpoint in self.debugger.breakpoints]
        return [i for i in ids if i.startswith(text)]

    def complete_events(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return ["all"] if "all".startswith(text) else []

    def complete_fork(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        words = line[:begidx].split()
        options: list[str] = []
        if len(words) == 1:
            options = ["text", "tool", "effect", "approve", "reject"]
        elif words[1] in ("tool", "approve", "reject") and not self.debugger.run.finished:
            action = next_action_of(self.debugger.state, self.debugger.run.ctx)
            calls = getattr(action, "calls", None)
            if calls is None:
                calls = [request.call for request in getattr(action, "pending", ())]
            options = [call.call_id for call in calls]
        return [option for option in options if option.startswith(text)]

    complete_b = complete_break
    complete_d = complete_delete

    def completenames(self, text: str, *ignored: Any) -> list[str]:
        return [name for name in (*COMMANDS, *ALIASES) if name.startswith(text)]


def tool_names(agent: AgentSpec, seen: set[int] | None = None) -> set[str]:
    """The tools `agent` and the agents it hands off to can call, handoff tools included."""
    seen = set() if seen is None else seen
    seen.add(id(agent))
    names = {tool.name for tool in agent.tools}
    for target in agent.handoff_targets():
        names.add(target.name)
        if not isinstance(target.agent, str) and id(target.agent) not in seen:
            names |= tool_names(target.agent, seen)  # a target by name is another's, met there
    return names
