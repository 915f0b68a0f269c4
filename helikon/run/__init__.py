"""Running agents: `Agent`, `Run` (one `transition` and the action it asks for, performed, per
step), the event stream and its results, snapshots and the runner.

The names an agent author uses are offered by `helikon` too; the rest of the run's public
names (`AgentSpec`, the registered `Effect`, the snapshot's refusals) live here.
"""

from __future__ import annotations

from helikon.run.agent import Agent
from helikon.run.chart_effects import Effect, EffectContext, effect
from helikon.run.config import RunConfig, RunContext
from helikon.run.conversation import Conversation
from helikon.run.driver import Run
from helikon.run.guardrails import GuardrailResult, InputGuardrail, OutputGuardrail
from helikon.run.results import RunResult, RunResultStreaming
from helikon.run.runner import Runner, run_sync
from helikon.run.snapshot import ApprovalMismatch, RunSnapshot, SnapshotMismatch
from helikon.run.spec import AgentSpec, HandoffTo

__all__ = [
    "Agent",
    "AgentSpec",
    "ApprovalMismatch",
    "Conversation",
    "Effect",
    "EffectContext",
    "GuardrailResult",
    "HandoffTo",
    "InputGuardrail",
    "OutputGuardrail",
    "Run",
    "RunConfig",
    "RunContext",
    "RunResult",
    "RunResultStreaming",
    "RunSnapshot",
    "Runner",
    "SnapshotMismatch",
    "effect",
    "run_sync",
]
