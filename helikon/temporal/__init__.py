"""Durable and distributed runs on Temporal (the `temporal` extra): the same `transition`
as a workflow, model and tool calls as activities, the conversation in the run store.

See docs/howto/temporal.md. `helikon_worker(...)` serves agents; `start_run(...)` starts a
run; `events(store, run_id)` streams it from the store.
"""

from __future__ import annotations

from helikon.temporal.client import chart_of, current, decide, events, outcome, start_run
from helikon.temporal.messages import RunOutcome, RunRequest, Status
from helikon.temporal.options import TemporalOptions
from helikon.temporal.payloads import CLAIM_THRESHOLD, claim_check
from helikon.temporal.registry import AgentRegistry, RedactionUnsupported, UnknownAgent
from helikon.temporal.worker import HelikonWorker, helikon_worker, sandbox_runner
from helikon.temporal.workflow import HelikonWorkflow

__all__ = [
    "CLAIM_THRESHOLD",
    "AgentRegistry",
    "HelikonWorker",
    "HelikonWorkflow",
    "RedactionUnsupported",
    "RunOutcome",
    "RunRequest",
    "Status",
    "TemporalOptions",
    "UnknownAgent",
    "chart_of",
    "claim_check",
    "current",
    "decide",
    "events",
    "helikon_worker",
    "outcome",
    "sandbox_runner",
    "start_run",
]
