"""A Temporal worker for helikon agents: the workflow, its activities, the sandbox.

The workflow runs in Temporal's sandbox, which re-imports workflow code for every run
unless a module is passed through. helikon's modules and python-statemachine are passed
through explicitly (`PASSTHROUGH`): importing helikon inside the default sandbox fails
(python-statemachine resolves a path when it is imported), and a lazy import at run time
would fail every workflow task. The workflow module itself is not passed through, so the
sandbox still checks what the workflow's own code does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from helikon.durable.store import RunStore
from helikon.run.spec import AgentSpec
from helikon.temporal.activities import HelikonActivities
from helikon.temporal.options import TemporalOptions
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
)
"""The modules the workflow sandbox passes through (every helikon module but the workflow)."""


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

    Raises:
        ValueError: agents that share a name, or have tool sources (see AgentRegistry).
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
    """A Temporal `Worker` with the helikon workflow and activities, and the registry it
    serves registered for its task queue while it runs."""

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
        self.worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[HelikonWorkflow],
            activities=list(activities.all()),
            workflow_runner=sandbox_runner(),
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_queue_timeout),
            **worker_options,
        )

    async def __aenter__(self) -> HelikonWorker:
        register(self.task_queue, self.registry)
        try:
            await self.worker.__aenter__()
        except BaseException:
            unregister(self.task_queue, self.registry)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.worker.__aexit__(*exc)
        finally:
            unregister(self.task_queue, self.registry)

    async def run(self) -> None:
        """Run until cancelled (or `shutdown()`)."""
        register(self.task_queue, self.registry)
        try:
            await self.worker.run()
        finally:
            unregister(self.task_queue, self.registry)

    async def shutdown(self) -> None:
        await self.worker.shutdown()


def workflows() -> Sequence[type]:
    """The workflow classes a `Replayer` needs."""
    return (HelikonWorkflow,)
