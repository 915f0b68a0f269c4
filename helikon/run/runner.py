"""`Runner`: run an agent to its end, streamed, awaited or from sync code; one engine.

Every entry point honours the whole `RunConfig`, `timeout` included: `Runner.run_streamed`
is `agent.run`, and the others wrap it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helikon.core.items import Item
from helikon.run.agent import Agent
from helikon.run.config import RunConfig, RunContext
from helikon.run.results import RunResult, RunResultStreaming
from helikon.trace import TraceSink


class Runner:
    """Runs agents: `run_streamed` (the stream), `run` (awaited), `run_sync` (sync code).

    Each applies the run's `RunConfig` exactly as `agent.run` does, `timeout` included.
    """

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
        return agent.run(input, context=context, config=config, run_id=run_id, trace=trace)

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
