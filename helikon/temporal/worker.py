"""A Temporal worker for helikon agents: the workflow, its activities, the sandbox.

The workflow runs in Temporal's sandbox, which re-imports workflow code for every run
unless a module is passed through. helikon's modules and python-statemachine are passed
through explicitly (`PASSTHROUGH`): importing helikon inside the default sandbox fails
(python-statemachine resolves a path when it is imported), and a lazy import at run time
would fail every workflow task. The workflow module itself is not passed through, so the
sandbox still checks what the workflow's own code does.

Tool sources: a worker holds the tool sources (MCP servers) of its agents. It enters each
that is an async context manager (`helikon.mcp.MCPServer` is) when it starts and leaves it
when it stops, so the servers are connected for the worker's life: the listing activity and
the tool activity use them, and workflow code never does IO.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from helikon.durable.store import RunStore
from helikon.run.spec import AgentSpec
from helikon.temporal.activities import HelikonActivities
from helikon.temporal.options import TemporalOptions
from helikon.temporal.payloads import claim_check
from helikon.temporal.registry import AgentRegistry, register, unregister
from helikon.temporal.workflow import HelikonWorkflow

PASSTHROUGH: tuple[str, ...] = (
    "helikon._version",
    "helikon.core",
    "helikon.durable",
    "helikon.models",
    "helikon.run",
    "helikon.tools",
    "helikon.trace",
    "helikon.temporal.activities",
    "helikon.temporal.client",
    "helikon.temporal.messages",
    "helikon.temporal.options",
    "helikon.temporal.registry",
    "helikon.temporal.worker",
    "helikon.temporal.writes",
    "statemachine",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_extensions",
    # A run's tools listed from its sources are built from their JSON schemas, checked
    # with jsonschema (imported when the first such tool is built, in a workflow task).
    "jsonschema",
    "jsonschema_specifications",
    "re2",
    "referencing",
    "rpds",
    "attrs",
    "attr",
)
"""The modules the workflow sandbox passes through (every helikon module but the workflow's
own: workflow, effects and calls, and the libraries they import lazily in workflow code)."""


def sandbox_runner() -> SandboxedWorkflowRunner:
    """The sandboxed workflow runner, with helikon passed through."""
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def helikon_worker(
    client: Client,
    task_queue: str,
    agents: Iterable[AgentSpec],
    store: RunStore,
    *,
    deps: Any = None,
    options: TemporalOptions | None = None,
    sticky_queue_timeout: float = 10.0,
    **worker_options: Any,
) -> HelikonWorker:
    """A worker running `agents` on `task_queue`, writing their runs to `store`.

    Use it as `async with helikon_worker(...) as worker:` (or `await worker.run()`). Every
    worker of a task queue must serve the same agents on the same charts with the same
    `options`. `sticky_queue_timeout` is how long a workflow waits for this worker before
    another takes it (lower it where workers die often, as the tests do).

    The agents' tool sources (`mcp_servers`) are connected by the worker, for its life:
    give them unconnected (``Agent(..., mcp_servers=[MCPServer(stdio=[...])])``) and enter
    the worker; each run lists them as an activity when it starts.

    Payloads of `CLAIM_THRESHOLD` bytes or more travel by reference through `store`
    (helikon.temporal.payloads): the worker's client is given that claim check.

    Raises:
        ValueError: agents that share a name (see AgentRegistry).
        RedactionUnsupported: an agent, or one it reaches, sets `RunConfig.redact`, which
            the Temporal runtime does not apply (see helikon.temporal.registry).
    """
    registry = AgentRegistry(agents, options)
    return HelikonWorker(
        client,
        task_queue,
        registry,
        HelikonActivities(registry, store, deps),
        sticky_queue_timeout=sticky_queue_timeout,
        **worker_options,
    )


class HelikonWorker:
    """A Temporal `Worker` with the helikon workflow and activities, the registry it serves
    registered for its task queue while it runs, and its agents' tool sources connected
    for as long (each that is an async context manager is entered before the worker polls
    and left after it stopped). Its client gets the claim check of the activities' store
    (`claim_check`)."""

    def __init__(
        self,
        client: Client,
        task_queue: str,
        registry: AgentRegistry,
        activities: HelikonActivities,
        *,
        sticky_queue_timeout: float = 10.0,
        **worker_options: Any,
    ) -> None:
        self.task_queue = task_queue
        self.registry = registry
        self.activities = activities
        self._sources: AsyncExitStack | None = None
        self.worker = Worker(
            claim_check(client, activities.store),
            task_queue=task_queue,
            workflows=[HelikonWorkflow],
            activities=list(activities.all()),
            workflow_runner=sandbox_runner(),
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_queue_timeout),
            **worker_options,
        )

    async def __aenter__(self) -> HelikonWorker:
        self._sources = await self._connected()
        register(self.task_queue, self.registry)
        try:
            await self.worker.__aenter__()
        except BaseException:
            unregister(self.task_queue, self.registry)
            await self._sources.aclose()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.worker.__aexit__(*exc)
        finally:
            unregister(self.task_queue, self.registry)
            if self._sources is not None:
                await self._sources.aclose()

    async def run(self) -> None:
        """Run until cancelled (or `shutdown()`)."""
        async with await self._connected():
            register(self.task_queue, self.registry)
            try:
                await self.worker.run()
            finally:
                unregister(self.task_queue, self.registry)

    async def _connected(self) -> AsyncExitStack:
        """The agents' tool sources entered (connected), on a stack that leaves them."""
        stack = AsyncExitStack()
        try:
            for source in self.registry.sources:
                if isinstance(source, AbstractAsyncContextManager):
                    await stack.enter_async_context(source)
        except BaseException:
            with contextlib.suppress(Exception):
                await stack.aclose()
            raise
        return stack

    async def shutdown(self) -> None:
        await self.worker.shutdown()


def workflows() -> Sequence[type]:
    """The workflow classes a `Replayer` needs."""
    return (HelikonWorkflow,)
