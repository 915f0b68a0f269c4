"""`TemporalOptions`: how long activities may take and how often they are tried.

They are the worker's: every worker of a task queue must use the same ones (the workflow
reads them when it schedules an activity, and a replay must schedule the same).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TemporalOptions:
    """Activity timeouts (seconds) and retries.

    Args:
        model_timeout: one model call (start to close); it is retried on worker or store
            failures (a model's own error is the run's input, as in a local run).
        tool_timeout: one tool call (start to close).
        tool_heartbeat: a running tool's activity heartbeats every second; one silent for
            this long is taken as lost (its worker died) and retried elsewhere, if its tool
            may run again.
        store_timeout: the activities that only read or write the run store.
        list_timeout: listing an agent's tool sources as a run starts (start to close);
            the listing is retried up to `rerun_attempts` times (it changes nothing), and
            a run whose listing still fails fails with `ToolsUnavailable`.
        rerun_attempts: attempts for a `read_only` or `idempotent` tool call; any other
            call gets one attempt, and a lost one becomes an "interrupted" error result.
        continue_after_events: continue-as-new once the history is this long, besides when
            Temporal suggests it (None: only then).
    """

    model_timeout: float = 300.0
    tool_timeout: float = 600.0
    tool_heartbeat: float = 10.0
    store_timeout: float = 30.0
    list_timeout: float = 60.0
    rerun_attempts: int = 5
    continue_after_events: int | None = None
