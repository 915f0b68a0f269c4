"""`Runner`: run an agent to its end, honouring `RunConfig.timeout`; sync helpers wrap it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helikon.core.items import Item
from helikon.run.agent import Agent
from helikon.run.config import RunConfig, RunContext
from helikon.run.driver import Run
from helikon.run.results import RunResult, RunResultStreaming, open_trace
from helikon.trace import TraceSink


class Runner:
    """Runs agents with the run's timeout applied (a bare `agent.run` has none)."""

    @staticmethod
    def run_streamed(
        agent: Agent,
        input: str | Sequence[Item],
        *,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        run_id: str | None = None,
        trace: TraceSink | str | Path | None = None,
    ) -> RunResultStreaming:
        """The run's event stream; past `config.timeout` the run fails with TimedOut.

        `trace` is a trace sink, or a path to write the run's JSONL trace to.
        """
        chosen = config or agent.config
        sink, owned = open_trace(trace)
        run = Run(agent, input=input, context=context, config=chosen, run_id=run_id, trace=sink)
        return RunResultStreaming(run, timeout=chosen.timeout, closing=owned)

    @staticmethod
    async def run(
        agent: Agent,
        input: str | Sequence[Item],
        *,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        run_id: str | None = None,
        trace: TraceSink | str | Path | None = None,
    ) -> RunResult:
        """Run to the end. Raises `RunError` when the run fails."""
        stream = Runner.run_streamed(
            agent, input, context=context, config=config, run_id=run_id, trace=trace
        )
        return await stream.collect()

    @staticmethod
    def run_sync(
        agent: Agent,
        input: str | Sequence[Item],
        *,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        run_id: str | None = None,
    ) -> RunResult:
        """`Runner.run` from synchronous code (not from inside a running event loop).

        The deadline holds here too: a sync tool still blocking its thread at the timeout
        runs on in that (daemon) thread, its result discarded, and this returns without
        waiting for it.
        """
        return asyncio.run(Runner.run(agent, input, context=context, config=config, run_id=run_id))


def run_sync(
    agent: Agent,
    input: str | Sequence[Item],
    *,
    context: RunContext[Any] | None = None,
    config: RunConfig | None = None,
) -> RunResult:
    """Run `agent` to its end from synchronous code; see `Runner.run`."""
    return Runner.run_sync(agent, input, context=context, config=config)
