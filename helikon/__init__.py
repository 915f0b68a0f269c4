"""helikon: LLM agents whose control loop is a declarative statechart.

This module offers what an agent author uses: agents and runs, tools, models, the items
and events of a conversation, the errors a run ends with, and the chart's front door
(`compile_chart`, `extend`, `transition`). `__all__` is that surface; tests keep it sorted,
at most 90 names, and holding every name README.md and the docs import from `helikon`.

Everything else lives in its subpackage: the loop's whole vocabulary (every phase, input,
action, error value and the table) in `helikon.core`, runs in `helikon.run`, models in
`helikon.models`, tools in `helikon.tools`, run stores in `helikon.durable`, traces in
`helikon.trace`, the debugger in `helikon.debug`, Temporal in `helikon.temporal`. Neither
the debugger nor the SQLite store is imported by `import helikon`: `SqliteRunStore` and
`OpenAIModel` are imported when first asked for. A name that used to be here and moved
(`helikon._moved`) still imports from here, with a DeprecationWarning naming its new home.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helikon._moved import moved as _moved
from helikon._version import __version__ as __version__
from helikon.core.approvals import (
    ApprovalDecision,
    ApprovalRequest,
    arguments_hash,
)
from helikon.core.chart.compile import (
    compile_chart,
)
from helikon.core.chart.compose import (
    extend,
    to,
)
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.chart.dsl import (
    AGENT_LOOP,
    AgentLoopChart,
    LoopChart,
)
from helikon.core.chart.spec import (
    ChartSpec,
)
from helikon.core.context import (
    TransitionCtx,
)
from helikon.core.errors import (
    AgentError,
    BudgetExceeded,
    Cancelled,
    ChartDefinitionError,
    FatalToolError,
    GuardrailTripped,
    HelikonError,
    MaxTurnsExceeded,
    ModelError,
    RunError,
    TimedOut,
    ToolFailed,
)
from helikon.core.events import (
    AgentEvent,
    AgentUpdated,
    ApprovalRequested,
    GuardrailTriggered,
    HandoffItem,
    MessageOutput,
    PermissionDenied,
    ReasoningDelta,
    RepairStarted,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunSuspended,
    StructuredOutputFailed,
    TokenDelta,
    ToolCallDelta,
    ToolCallItem,
    ToolOutputItem,
    TurnStarted,
)
from helikon.core.items import (
    AssistantMessage,
    FinalOutput,
    Item,
    ModelSettings,
    SystemMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from helikon.core.state import (
    CallingModel,
    Failed,
    ModelResponse,
    Start,
    Terminate,
    ToolResults,
    TransitionOutcome,
)
from helikon.core.transition import (
    initial_state,
    transition,
)
from helikon.durable.store import (
    open_store,
)
from helikon.models.base import (
    Model,
)
from helikon.models.replay import (
    ReplayModel,
)
from helikon.models.scripted import (
    ScriptedModel,
    ScriptedTurn,
)
from helikon.run.agent import (
    Agent,
)
from helikon.run.chart_effects import (
    EffectContext,
    effect,
)
from helikon.run.config import (
    RunConfig,
    RunContext,
)
from helikon.run.conversation import (
    Conversation,
)
from helikon.run.driver import (
    Run,
)
from helikon.run.guardrails import (
    GuardrailResult,
    InputGuardrail,
    OutputGuardrail,
)
from helikon.run.results import (
    RunResult,
    RunResultStreaming,
)
from helikon.run.runner import (
    Runner,
    run_sync,
)
from helikon.run.snapshot import (
    RunSnapshot,
)
from helikon.run.spec import (
    HandoffTo,
)
from helikon.tools.context import (
    ToolContext,
)
from helikon.tools.policy import (
    ToolPolicy,
)
from helikon.tools.tool import (
    Tool,
    tool,
)

if TYPE_CHECKING:
    from helikon.durable.sqlite import SqliteRunStore
    from helikon.models.openai import OpenAIModel

# Imported when first asked for: OpenAIModel needs the `openai` extra, and a program that
# keeps no runs does not load the SQLite store.
_LAZY = {
    "OpenAIModel": "helikon.models.openai",
    "SqliteRunStore": "helikon.durable.sqlite",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    return _moved(name)


def __dir__() -> list[str]:
    # The lazy names too (a REPL completes them), not the moved ones.
    return sorted({*globals(), *__all__})


__all__ = [
    "AGENT_LOOP",
    "DEFAULT_TABLE",
    "Agent",
    "AgentError",
    "AgentEvent",
    "AgentLoopChart",
    "AgentUpdated",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalRequested",
    "AssistantMessage",
    "BudgetExceeded",
    "CallingModel",
    "Cancelled",
    "ChartDefinitionError",
    "ChartSpec",
    "Conversation",
    "EffectContext",
    "Failed",
    "FatalToolError",
    "FinalOutput",
    "GuardrailResult",
    "GuardrailTriggered",
    "GuardrailTripped",
    "HandoffItem",
    "HandoffTo",
    "HelikonError",
    "InputGuardrail",
    "Item",
    "LoopChart",
    "MaxTurnsExceeded",
    "MessageOutput",
    "Model",
    "ModelError",
    "ModelResponse",
    "ModelSettings",
    "OpenAIModel",
    "OutputGuardrail",
    "PermissionDenied",
    "ReasoningDelta",
    "RepairStarted",
    "ReplayModel",
    "Run",
    "RunCompleted",
    "RunConfig",
    "RunContext",
    "RunError",
    "RunFailed",
    "RunResult",
    "RunResultStreaming",
    "RunSnapshot",
    "RunStarted",
    "RunSuspended",
    "Runner",
    "ScriptedModel",
    "ScriptedTurn",
    "SqliteRunStore",
    "Start",
    "StructuredOutputFailed",
    "SystemMessage",
    "Terminate",
    "TimedOut",
    "TokenDelta",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallItem",
    "ToolContext",
    "ToolFailed",
    "ToolOutputItem",
    "ToolPolicy",
    "ToolResult",
    "ToolResults",
    "TransitionCtx",
    "TransitionOutcome",
    "TurnStarted",
    "Usage",
    "UserMessage",
    "arguments_hash",
    "compile_chart",
    "effect",
    "extend",
    "initial_state",
    "open_store",
    "run_sync",
    "to",
    "tool",
    "transition",
]
