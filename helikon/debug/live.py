"""Live step-in: stepping a nested run while the parent's effect that runs it is in flight.

Theory of operation: the parent debugger applies its next transition and starts the effect
it asks for (a handoff, or a tool batch calling agents as tools) as a task, with a
`StepGate` as its run's stepper holding the chosen nested run. The nested run waits before
each transition; its debugger follows it: stepping releases one transition, waits until the
run is held again (or ends), and takes what the run recorded meanwhile as the record it
replays, so a followed step is shown exactly as a replayed one. The debugger's run is a
stand-in on the nested run's chart, moved only by those records; the nested run itself is
driven by the parent's effect alone. Sibling calls of the batch are not held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from helikon.core.state import ExecuteTools, Handoff
from helikon.core.transition import transition
from helikon.run.driver import Run
from helikon.run.stepping import StepGate
from helikon.run.subagent import agent_of
from helikon.trace import Trace


@dataclass(frozen=True)
class LiveNesting:
    """What every debugger under one live step-in shares: the gate, the task running the
    outermost run's effect, and that run's record so far (the effect in flight's lines
    included)."""

    gate: StepGate
    task: asyncio.Task[tuple[Any, ...]]
    record: Callable[[], Trace]

    def trace_of(self, run_id: str) -> Trace | None:
        """Nested run `run_id`'s record so far; None before its first line."""
        trace = self.record()
        return trace.nested(run_id) if run_id in trace.runs else None

    async def settle(self, *run_ids: str) -> None:
        """Wait until one of runs `run_ids` is held before a transition or has ended, or
        the effect in flight is done."""
        gate = self.gate

        def ready() -> bool:
            return any(gate.held(run) is not None or gate.has_ended(run) for run in run_ids)

        await gate.wait(ready, self.task)

    def following(self, run_id: str) -> bool:
        """Whether run `run_id` may still take transitions the record lacks."""
        return not (self.gate.has_ended(run_id) or self.task.done())


def runs_ahead(run: Run) -> list[str]:
    """The nested runs the effect of `run`'s next transition would start (a handoff
    target; the agents a tool batch calls as tools), as their run ids; the transition is
    computed (it is pure) and not applied."""
    if run.next_input is None or run.finished or run.suspended:
        return []
    action = transition(run.state, run.next_input, run.ctx).next_action
    seq = run.seq + 1
    if isinstance(action, Handoff):
        return [f"{run.run_id}/{seq}"]
    if isinstance(action, ExecuteTools):
        return [
            f"{run.run_id}/{seq}:{call.call_id}"
            for call in action.calls
            if (tool := run.tools.get(call.name)) is not None and agent_of(tool) is not None
        ]
    return []


def stand_in(child: Run) -> Run:
    """A run on `child`'s agent and chart, where `child` is held now: what its debugger
    steps, moved by `child`'s records only (it performs nothing, reports no spans)."""
    run = Run(
        child.agent,
        config=child.config,
        run_id=child.run_id,
        depth=child.depth,
        agents=child.agents,
    )
    run.observer = None
    run.continue_stream()
    run.take_recorded_tools(child.listed_tools)  # what it records, offered; never called
    run.position(
        state=child.state,
        conversation=child.conversation.items(),
        seq=child.seq,
        next_input=child.next_input,
    )
    return run
