"""`RunConfig` and `RunContext`: how a run is limited, and what it carries for your code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from helikon.core.items import ModelSettings
from helikon.tools.policy import ToolPolicy

D = TypeVar("D")


@dataclass(frozen=True)
class RunConfig:
    """Limits and settings of a run (defaults as SEMANTICS.md states them).

    Args:
        max_turns: turns allowed: model calls in CallingModel and in custom model-calling phases.
        parallel_tool_call_limit: tool calls of one turn run at once; None is unbounded.
        max_agent_depth: how deep handoffs and agents-as-tools may nest.
        timeout: seconds for the whole run, counted from when its stream starts; past it the
            effect in flight is stopped and the run fails with `TimedOut`. Every entry
            point honours it: `agent.run`, `agent.resume` (counted afresh from the resumed
            stream's start), `Runner.run_streamed` / `run` / `run_sync`, `helikon run`. A
            `Run` you build and stream yourself has a deadline only when you give it one
            (`RunResultStreaming(run, timeout=...)`).
        token_budget: total tokens the run (sub-agents included) may spend; None: no limit.
        compaction_threshold: context tokens at which the loop asks for a summary.
        model_settings: sampling settings passed to the model.
        tool_policy: the run's permission policy, combined with each tool's own.
        snapshot_key: the key snapshots are signed and checked with (HMAC-SHA256); None
            takes $HELIKON_SNAPSHOT_KEY, else a random key of this process (so a snapshot
            resumes in the process that took it). Never shown in a repr.
        redact: applied to every text a run store, a session or a trace writes (message
            and result contents, tool arguments, deltas); the default writes all. The run
            itself, its stream and its tools see the texts as they are. A run resumed from
            a store continues with what was written, and a call whose stored arguments were
            redacted is not run again.
        lease_seconds: how long a run's lease in a store lasts without renewal (it renews
            every third of that); a crashed owner's run can be resumed after it.
        tracer_provider: the OpenTelemetry `TracerProvider` the run's spans go to (the
            `otel` extra; see docs/howto/observability.md); None takes the global one, and
            with no SDK configured there, a run has no spans at all.
        otel_content: record message contents, tool arguments and tool results on the
            spans (through `redact`); off by default, since they may hold what users said.
    """

    max_turns: int = 16
    parallel_tool_call_limit: int | None = None
    max_agent_depth: int = 8
    timeout: float | None = None
    token_budget: int | None = None
    compaction_threshold: int | None = None
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    tool_policy: ToolPolicy = field(default_factory=ToolPolicy)
    snapshot_key: bytes | str | None = field(default=None, repr=False)
    redact: Callable[[str], str] | None = None
    lease_seconds: float = 30.0
    tracer_provider: Any = field(default=None, repr=False, compare=False)
    otel_content: bool = False

    def __post_init__(self) -> None:
        _at_least("max_turns", self.max_turns, 1)
        _at_least("parallel_tool_call_limit", self.parallel_tool_call_limit, 1)
        _at_least("max_agent_depth", self.max_agent_depth, 0)
        _at_least("token_budget", self.token_budget, 1)
        _at_least("compaction_threshold", self.compaction_threshold, 1)
        if type(self.lease_seconds) not in (int, float) or not 0 < self.lease_seconds < 1e9:
            raise ValueError(
                f"RunConfig.lease_seconds must be positive, got {self.lease_seconds!r}"
            )
        if self.timeout is not None and (
            type(self.timeout) not in (int, float) or not 0 < self.timeout < float("inf")
        ):
            raise ValueError(f"RunConfig.timeout must be positive seconds, got {self.timeout!r}")

    def with_max_turns(self, max_turns: int) -> RunConfig:
        return replace(self, max_turns=max_turns)

    def with_timeout(self, seconds: float | None) -> RunConfig:
        return replace(self, timeout=seconds)

    def with_parallel_tool_call_limit(self, limit: int | None) -> RunConfig:
        return replace(self, parallel_tool_call_limit=limit)

    def with_max_agent_depth(self, depth: int) -> RunConfig:
        return replace(self, max_agent_depth=depth)

    def with_token_budget(self, tokens: int | None) -> RunConfig:
        return replace(self, token_budget=tokens)

    def with_compaction_threshold(self, tokens: int | None) -> RunConfig:
        return replace(self, compaction_threshold=tokens)

    def with_tool_policy(self, policy: ToolPolicy) -> RunConfig:
        return replace(self, tool_policy=policy)

    def with_snapshot_key(self, key: bytes | str | None) -> RunConfig:
        return replace(self, snapshot_key=key)


def _at_least(name: str, value: int | None, least: int) -> None:
    if value is not None and (type(value) is not int or value < least):  # True is no count
        raise ValueError(f"RunConfig.{name} must be an integer >= {least}, got {value!r}")


@dataclass(frozen=True)
class RunContext(Generic[D]):
    """What a run carries for your tools, guardrails and approval handlers: `deps`.

    `RunContext.ephemeral(deps)` is a run kept in memory only; durable stores attach here.
    """

    deps: D

    @classmethod
    def ephemeral(cls, deps: Any = None) -> RunContext[Any]:
        return RunContext(deps)
