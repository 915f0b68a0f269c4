"""The step rules, written once for every runtime: what a run does with the action a transition
asks for, and what a stop does to it.

Theory of operation: `transition` is pure and returns a `NextAction`; a runtime performs it.
Two runtimes do: `Run` (helikon.run.driver, in process) and `HelikonWorkflow`
(helikon.temporal, each effect an activity or a child workflow). They differ in how they call
the model, run a batch of tools, run a chart's effect, wait for approval decisions, run a
nested agent, check guardrails, keep what happened and wait stoppably; that is the `RunPort`
each implements. Everything else is a rule of the loop, and lives here:

- `perform` is the only dispatch on `NextAction`: one port effect per action, whose result
  is the next input (returned, or yielded last as `Next`), handed to the runtime.
- Input guardrails run once. A chart that checks them as rows (`ChartSpec.checks_input`)
  asks at its start (`CheckGuardrails(None)`, from the CheckingInput phase): their verdict
  is the next input. On any other chart they run before the run's first model call; one
  that trips emits `GuardrailTriggered` and fails the run without a model call.
- The output guardrails check a run's answer when its chart asks (`CheckGuardrails`, from
  the CheckingOutput phase): their verdict is the next input. A chart without that phase
  (the default chart's older version, some custom charts) keeps the old rule, the outcome
  rewritten after `transition`: helikon.run.legacy, and only there.
- A handoff deeper than `max_agent_depth` is refused (`MaxAgentDepthExceeded`) before any
  child runs, as is an agent run as a tool (`too_deep`); a nested run gets only the token
  budget its parent has left (`child_budget`); a handoff's result is its target's end
  (`handoff_result`). A tool batch starts at most `parallel_tool_call_limit` calls at once
  (`first_calls`: those a run store records as started with the step). Only an approval
  waits for decisions from outside the run (`awaits_decisions`: where a run may suspend).
- A stop (`Cancel`, `Fail(TimedOut)`) cuts the effect in flight short: the runtime's
  stoppable wait raises `Stopped`, and the stop becomes the input, keeping what the effect
  finished (`landed`). A stop requested while the effect completed wins the same way
  (`stop_wins`).

The port is internal (not exported from `helikon`): it is the seam between the rules and the
two runtimes this package ships, not an extension point; docs/reference/layout.md says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from helikon.core.errors import (
    Cancelled,
    GuardrailFailed,
    GuardrailTripped,
    MaxAgentDepthExceeded,
)
from helikon.core.events import AgentEvent, GuardrailTriggered
from helikon.core.items import ZERO_USAGE, FinalOutput, ToolCall, Usage
from helikon.core.state import (
    AwaitApproval,
    CallModel,
    Cancel,
    CheckGuardrails,
    EffectResult,
    ExecuteTools,
    Fail,
    GuardrailVerdict,
    Handoff,
    HandoffResult,
    NextAction,
    RunEffect,
    ToolResults,
    TransitionOutcome,
)
from helikon.core.transition import Match
from helikon.run.config import RunConfig
from helikon.run.spec import AgentSpec, HandoffTo

__all__ = [
    "Next",
    "RunPort",
    "Stopped",
    "awaits_decisions",
    "child_budget",
    "first_calls",
    "handoff_result",
    "landed",
    "perform",
    "stop_wins",
    "too_deep",
]


class Stopped(BaseException):
    """Internal: the effect in flight was stopped by a cancel or the deadline.

    A `BaseException`, so that a user's `except Exception` (in a tool, an approval handler)
    cannot swallow the stop."""


class Next:
    """The input an effect produced: the last thing a streaming effect yields. (A plain
    class: one is made per effect, on the hot path, and a frozen dataclass's `__init__` costs
    several times more.)"""

    __slots__ = ("input",)

    def __init__(self, input: Any) -> None:
        self.input = input

    def __repr__(self) -> str:
        return f"Next({self.input!r})"


GuardrailError = GuardrailTripped | GuardrailFailed


class RunPort(Protocol):
    """What a runtime gives the loop: the run it drives and the effects it performs.

    Every effect awaits through the runtime's stoppable wait (`stoppable`), which raises
    `Stopped` once a stop is requested (`stopping` is then the stop's input). Effects that
    stream (`call_model`, `await_decisions`, `hand_off`) yield their events as they happen,
    each passed through `emit`, and end with `Next(input)`, unless the run suspends (no
    input: the run waits for decisions from outside). The others return their input. The
    loop hands the input, by its rules, to `take_input`.
    """

    @property
    def agent(self) -> AgentSpec: ...

    @property
    def config(self) -> RunConfig: ...

    @property
    def depth(self) -> int: ...

    @property
    def handoffs(self) -> Mapping[str, HandoffTo]: ...

    @property
    def stopping(self) -> Cancel | Fail | None:
        """The stop requested (cancel, deadline), None while none is."""
        ...

    input_guarded: bool
    """Whether the input guardrails ran (or the run is past its first model call)."""

    @property
    def checks_input(self) -> bool:
        """Whether the run's chart checks its input as rows (`CheckingInput`): then no model
        call checks it again, though a run resumed before its first one is not marked so."""
        ...

    def transition(self, inp: Any) -> tuple[Match | None, TransitionOutcome]:
        """`transition` of the run's state on `inp`, with the row it matched when kept."""
        ...

    def stoppable(self, awaitable: Awaitable[Any]) -> Awaitable[Any]:
        """Await `awaitable` so that a stop cuts it short (`Stopped`)."""
        ...

    def emit(self, event: AgentEvent) -> AgentEvent:
        """An event an effect produced: kept (trace, store) and returned, to be streamed."""
        ...

    def take_input(self, inp: Any) -> None:
        """The input the action produced (a stop's, when one won): the next one to apply."""
        ...

    async def check_input(self) -> GuardrailError | None:
        """The input guardrails' verdict on the conversation so far."""
        ...

    async def check_output(self, output: FinalOutput) -> GuardrailError | None:
        """The output guardrails' verdict on a completing step's output."""
        ...

    def call_model(self, action: CallModel) -> AsyncIterator[AgentEvent | Next]:
        """One model call: its deltas, then the response (or failure) as `Next`."""
        ...

    async def run_tools(self, action: ExecuteTools) -> Any:
        """A batch of tool calls: `ToolResults`, or the `Fail` a fatal call ends it with."""
        ...

    async def run_effect(self, action: RunEffect) -> EffectResult | Fail:
        """A chart's effect phase: its result, or the `Fail` it ends with."""
        ...

    def await_decisions(self, action: AwaitApproval) -> AsyncIterator[AgentEvent | Next]:
        """The decisions on the pending calls, as `Next`; none when the run suspends."""
        ...

    def hand_off(self, target: AgentSpec) -> AsyncIterator[AgentEvent | Next]:
        """Run `target` nested in this run; its `HandoffResult` as `Next`."""
        ...


async def perform(port: RunPort, action: NextAction) -> AsyncIterator[AgentEvent]:
    """Perform `action` through `port`, streaming its events; the input it produced goes to
    `port.take_input` (none when the run suspended). The only dispatch on `NextAction`."""
    inp: Any = None
    try:
        stream = _streaming(port, action)
        if stream is None:
            effect = _returning(port, action)
            if effect is not None:
                inp = await effect
        else:
            async for item in stream:
                if isinstance(item, Next):
                    inp = item.input
                else:
                    yield item
    except Stopped:
        inp = port.stopping
    if inp is not None:
        stop = port.stopping
        port.take_input(inp if stop is None else stop_wins(stop, inp))


def _streaming(port: RunPort, action: NextAction) -> AsyncIterator[AgentEvent | Next] | None:
    """The effect of an action that streams events, None for one that does not. Each is
    the port's own iterator where no rule comes first, so no layer is added per event."""
    if isinstance(action, CallModel):
        return port.call_model(action) if port.input_guarded else _first_call(port, action)
    if isinstance(action, AwaitApproval):
        return port.await_decisions(action)
    if isinstance(action, Handoff):
        target = next(h.target for h in port.handoffs.values() if h.agent_name == action.target)
        refused = too_deep(port.depth, port.config, target.name)
        if refused is not None:
            return _given(HandoffResult(None, refused))
        return port.hand_off(target)
    return None


def _returning(port: RunPort, action: NextAction) -> Awaitable[Any] | None:
    """The effect of an action that streams nothing, which returns its input; None for an
    action the loop does not know."""
    if isinstance(action, ExecuteTools):
        return port.run_tools(action)
    if isinstance(action, RunEffect):
        return port.run_effect(action)
    if isinstance(action, CheckGuardrails):
        return _verdict(port, action)
    return None


async def _verdict(port: RunPort, action: CheckGuardrails) -> GuardrailVerdict:
    """The guardrails' verdict the chart asks for, as an input: the output guardrails' on
    the answer it holds, or (no answer: CheckingInput) the input guardrails' on the
    conversation so far, which marks them run (no first model call checks them again)."""
    if action.output is not None:
        return GuardrailVerdict(await port.check_output(action.output))
    port.input_guarded = True
    return GuardrailVerdict(await port.check_input())


async def _first_call(port: RunPort, action: CallModel) -> AsyncIterator[AgentEvent | Next]:
    """The run's first model call: its input guardrails first, once, on a chart that does
    not check them as rows; one that trips or fails ends the run instead, without a model
    call."""
    port.input_guarded = True
    tripped = None if port.checks_input else await port.check_input()
    if isinstance(tripped, GuardrailTripped):
        yield port.emit(GuardrailTriggered(tripped.guardrail, "input", tripped.message))
    if tripped is not None:
        yield Next(Fail(tripped))
        return
    async for item in port.call_model(action):
        yield item


async def _given(inp: Any) -> AsyncIterator[AgentEvent | Next]:
    yield Next(inp)


def stop_wins(stop: Cancel | Fail | None, inp: Any) -> Any:
    """`inp`, or the stop requested while the effect that produced it completed: the stop
    wins, keeping what the effect finished."""
    if stop is None or isinstance(inp, (Cancel, Fail)):
        return inp
    return landed(stop, inp)


def landed(stop: Cancel | Fail, observed: Any) -> Cancel | Fail:
    """`stop` as the input in place of the `observed` outcome of an effect it cut short:
    a finished tool batch keeps its results, and whatever the effect spent (a model call,
    sub-agents, a handoff target) still counts."""
    spent = getattr(observed, "usage", ZERO_USAGE)
    if isinstance(observed, ToolResults):
        return replace(stop, results=observed.results, usage=stop.usage + spent)
    return replace(stop, usage=stop.usage + spent)


def awaits_decisions(action: NextAction) -> bool:
    """Whether `action` waits for approval decisions (a run may suspend at it)."""
    return isinstance(action, AwaitApproval)


def first_calls(action: NextAction, limit: int | None) -> tuple[ToolCall, ...]:
    """The tool calls `action` starts at once: a batch's first `limit` (all without one);
    none for another action. A run store records them as started with the step."""
    return action.calls[:limit] if isinstance(action, ExecuteTools) else ()


def too_deep(depth: int, config: RunConfig, agent: str) -> MaxAgentDepthExceeded | None:
    """Why a run at `depth` may not nest a run of `agent` (a handoff, an agent as a tool):
    one level deeper would pass `max_agent_depth`; None when it may."""
    limit = config.max_agent_depth
    return MaxAgentDepthExceeded(limit, agent) if depth + 1 > limit else None


def child_budget(config: RunConfig, usage: Usage) -> int | None:
    """The token budget of a run nested in one with `config` that spent `usage`: what it has
    left (at least 1), so nesting never resets the budget; None without one."""
    if config.token_budget is None:
        return None
    return max(config.token_budget - usage.total_tokens, 1)


def handoff_result(state: Any, target: str) -> HandoffResult:
    """A handoff's result from the state its target ended in. A target that waits for
    approval (it has no handler) ends the handoff cancelled: a handoff cannot suspend."""
    if state.phase == "Done":
        return HandoffResult(state.output, None, state.output.usage)
    if state.phase == "Failed":
        return HandoffResult(None, state.error, state.usage)
    reason = (
        f"handoff target {target!r} waited for approval; a handoff cannot suspend: "
        "give the target an on_approval handler"
    )
    return HandoffResult(None, Cancelled(reason), state.usage)
