"""`Agent`: a model, instructions, tools, handoffs and an output type, run by the loop chart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from helikon.core.approvals import ApprovalDecision
from helikon.core.items import Item
from helikon.durable.store import RunStore
from helikon.durable.views import Session
from helikon.run.config import RunConfig, RunContext
from helikon.run.driver import Run
from helikon.run.results import RunResultStreaming, open_trace
from helikon.run.snapshot import RunSnapshot
from helikon.run.spec import AgentSpec
from helikon.run.subagent import agent_tool
from helikon.tools import Tool
from helikon.trace import TraceSink


@dataclass(frozen=True, eq=False)
class Agent(AgentSpec):
    """An agent: what it is told, what it can call, whom it can hand off to, what it returns.

    Args:
        name: the agent's name, shown in events and used for handoff tool names.
        model: anything with `stream(ModelInput)`, e.g. `OpenAIModel.chat(...)`,
            `ScriptedModel([...])`; or a model string, resolved once, here:
            ``"gpt-5-mini"`` or ``"openai:chat/gpt-5-mini"`` is
            `OpenAIModel.chat("gpt-5-mini")`, ``"openai:responses/gpt-5-mini"`` is
            `OpenAIModel.responses("gpt-5-mini")` (`helikon.models.names` has the whole
            scheme). Its server and key come from OPENAI_BASE_URL and OPENAI_API_KEY, read
            on the first call; `await agent.model.aclose()` closes its HTTP clients.
        instructions: the system instructions.
        tools: `Tool`s (from `@tool`), including agents as tools (`other.as_tool()`).
        handoffs: agents (or `HandoffTo`s, or agent names) this agent may transfer control
            to; a name resolves when a run starts, among the agents reachable from it.
        output_type: a type (e.g. a pydantic model) the final answer must validate as.
        config: the default `RunConfig` for runs of this agent.
        chart: a compiled loop chart; helikon's default loop when None.
        input_guardrails: checks on the user's input, before the first model call.
        output_guardrails: checks on the final output, before the run completes.
        on_approval: decides calls that need approval in process; without it the run
            suspends with `RunSuspended` and resumes with `agent.resume(...)`.
        description: one line about the agent, offered to agents that hand off to it.
        mcp_servers: tool sources, such as connected `helikon.mcp.MCPServer`s: a run lists
            their tools once, before its first transition, and keeps them to its end (a
            source that cannot list them fails the run with `ToolsUnavailable`).
        effects: the `Effect`s (from `@effect`) the chart's effect phases run, by name.

    Raises:
        ValueError: a model string that names no model (an unknown provider or wire
            format, or no name); an effect the chart runs that `effects` lacks, or two
            effects of one name.
        ModuleNotFoundError: a model string, without the `openai` extra installed.
    """

    def run(
        self,
        input: str | Sequence[Item],
        *,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        run_id: str | None = None,
        trace: TraceSink | str | Path | None = None,
        store: RunStore | None = None,
        session: Session | None = None,
    ) -> RunResultStreaming:
        """Start a run; iterate the result for its events, or `await result.collect()`.

        Args:
            input: the user's message, or items.
            context: carries `deps` to tools, guardrails and approval handlers.
            config: limits for this run (default: the agent's `config`), its `timeout`
                included: past it the run fails with `TimedOut`, as with `Runner`.
            run_id: the run's id (default: a fresh random one); with `store`, a new run's.
            trace: a trace sink, or a path to write the run's JSONL trace to.
            store: a run store (`SqliteRunStore`, `open_store(url)`): every step is
                committed before its action is performed, so the run resumes after a crash
                (`agent.resume(run_id, store=store)`). Without it the run is ephemeral.
            session: conversation memory (`store.session(id)`): the run starts from the
                session's items and adds its own when it ends.

        Raises:
            ValueError: the agent cannot start (e.g. two tools share a name).
        """
        sink, owned = open_trace(trace)
        run = Run(
            self,
            input=input,
            context=context,
            config=config,
            run_id=run_id,
            trace=sink,
            store=store,
            session=session,
        )
        return RunResultStreaming(run, timeout=run.config.timeout, closing=owned)

    @overload
    def resume(
        self,
        snapshot: RunSnapshot,
        decisions: Sequence[ApprovalDecision] = (),
        *,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        trust_unsigned: bool = False,
    ) -> RunResultStreaming: ...
    @overload
    def resume(
        self,
        snapshot: str,
        decisions: Sequence[ApprovalDecision] = (),
        *,
        store: RunStore,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        force: bool = False,
        trace: TraceSink | str | Path | None = None,
    ) -> RunResultStreaming: ...

    def resume(
        self,
        snapshot: RunSnapshot | str,
        decisions: Sequence[ApprovalDecision] = (),
        *,
        store: RunStore | None = None,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        trust_unsigned: bool = False,
        force: bool = False,
        trace: TraceSink | str | Path | None = None,
    ) -> RunResultStreaming:
        """Continue a run: from a `RunSnapshot`, or from a run store by run id.

        From a snapshot, e.g. one suspended for approval: decide on the requests the
        suspension gave (`result.pending`, `RunSuspended.pending`: `request.approve()` /
        `.reject()`), which bind to this run and this suspension; a snapshot is resumed
        once in a process, and its signature is checked with `config.snapshot_key`.

        From a store (`agent.resume("inv-1042", store=store)`): the run continues at its
        last committed step, in any process; tool calls that finished are not run again,
        and a call in flight at a crash is run again only if its tool is `read_only` or
        `idempotent` (else the model gets an "interrupted" result). Decisions are spent
        once across processes (`store.pending(run_id)` gives the requests to decide).

        Args:
            trust_unsigned: resume a snapshot without a signature (one you built or stored
                yourself); a snapshot whose signature does not match is always refused.
            force: take the run's lease now, when its owner is known to be dead (else a
                live lease is refused with `RunLeased` until it expires).

        Raises:
            TypeError: a run id without `store`.
            ApprovalMismatch: a decision is for a call that is not pending, for other
                arguments, for another run or suspension, or two decisions name one call.
            SnapshotMismatch: another agent, chart, tool set or format; unsigned or
                mis-signed; a state the policy could not produce; a run that ended; a
                snapshot resumed before.
            RunNotFound, StoreCorrupt: (from a store) no such run, or rows that do not check.
        """
        if isinstance(snapshot, str):
            if store is None:
                raise TypeError(
                    f"agent.resume({snapshot!r}) names a stored run: give the store it is in "
                    "(store=...), or pass a RunSnapshot"
                )
            sink, owned = open_trace(trace)
            stored = store.get(snapshot)
            run = Run.from_stored(
                self,
                store,
                stored,
                decisions,
                force=force,
                context=context,
                config=config,
                trace=sink,
            )
            return RunResultStreaming(run, timeout=run.config.timeout, closing=owned)
        run = Run.from_snapshot(
            self,
            snapshot,
            decisions,
            context=context,
            config=config,
            trust_unsigned=trust_unsigned,
        )
        return RunResultStreaming(run, timeout=run.config.timeout)

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool another agent can call with an `input` text."""
        return agent_tool(self, name, description)
