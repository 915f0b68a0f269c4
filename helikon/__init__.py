"""helikon: LLM agents whose control loop is a declarative statechart.

Every public name is re-exported here; `__all__` is the public surface (a test keeps the
two in step).
"""

from __future__ import annotations

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
    ChartDraft,
    RowSpec,
    extend,
    to,
)
from helikon.core.chart.default import (
    DEFAULT_TABLE,
)
from helikon.core.chart.dsl import (
    AGENT_LOOP,
    AgentLoopChart,
    LoopChart,
)
from helikon.core.chart.spec import (
    ChartSpec,
)
from helikon.core.context import (
    OutputSpec,
    Permission,
    TransitionCtx,
)
from helikon.core.errors import (
    AgentError,
    ApprovalHandlerFailed,
    ApprovalNotBound,
    BudgetExceeded,
    Cancelled,
    ChartDefinitionError,
    EffectFailed,
    EmptyModelResponse,
    FatalToolError,
    GuardrailFailed,
    GuardrailTripped,
    HelikonError,
    InvalidStructuredOutput,
    MaxAgentDepthExceeded,
    MaxTurnsExceeded,
    ModelCallFailed,
    ModelError,
    ModelOutputTruncated,
    NotInChart,
    RunError,
    TimedOut,
    ToolFailed,
    ToolsUnavailable,
    UnexpectedInput,
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
    CompactionSummary,
    FinalOutput,
    Item,
    ModelSettings,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from helikon.core.state import (
    ApplyingHandoff,
    ApprovalDecisions,
    AwaitApproval,
    CallingModel,
    CallModel,
    Cancel,
    Compacting,
    CustomPhase,
    Done,
    EffectPhase,
    EffectResult,
    ExecuteTools,
    ExecutingTools,
    Fail,
    Failed,
    Finalizing,
    Handoff,
    HandoffResult,
    LoopState,
    ModelRequest,
    ModelResponse,
    NeedsApproval,
    NextAction,
    RepairingOutput,
    RunEffect,
    Start,
    Terminate,
    ToolResults,
    TransitionInput,
    TransitionOutcome,
)
from helikon.core.table import (
    ChartData,
    Row,
    TableNotRunnable,
    TransitionTable,
)
from helikon.core.tool_spec import (
    ListedTool,
    ToolSpec,
)
from helikon.core.transition import (
    Match,
    initial_state,
    match_row,
    pending_action,
    transition,
    trip_output_guardrail,
)
from helikon.debug.debugger import (
    Debugger,
    DebuggerError,
)
from helikon.durable import (
    DecisionSpent,
    LeaseLost,
    RunExists,
    RunInfo,
    RunLeased,
    RunNotFound,
    RunStore,
    Session,
    SqliteRunStore,
    StoreCorrupt,
    StoredRun,
    StoreError,
    open_store,
)
from helikon.models.base import (
    Model,
    ModelInput,
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
    Effect,
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
    ApprovalMismatch,
    RunSnapshot,
    SnapshotMismatch,
)
from helikon.run.spec import (
    AgentSpec,
    HandoffTo,
)
from helikon.tools import (
    Tool,
    ToolContext,
    ToolPolicy,
    ToolSource,
    tool,
)
from helikon.trace import (
    Trace,
    TraceError,
    TraceWriter,
    TransitionRecord,
    read_trace,
)


def __getattr__(name: str) -> object:
    # OpenAIModel needs the `openai` extra; import it only when asked for.
    if name == "OpenAIModel":
        from helikon.models.openai import OpenAIModel

        return OpenAIModel
    raise AttributeError(f"module 'helikon' has no attribute {name!r}")


__all__ = [
    "AGENT_LOOP",
    "DEFAULT_TABLE",
    "Agent",
    "AgentError",
    "AgentEvent",
    "AgentLoopChart",
    "AgentSpec",
    "AgentUpdated",
    "ApplyingHandoff",
    "ApprovalDecision",
    "ApprovalDecisions",
    "ApprovalHandlerFailed",
    "ApprovalMismatch",
    "ApprovalNotBound",
    "ApprovalRequest",
    "ApprovalRequested",
    "AssistantMessage",
    "AwaitApproval",
    "BudgetExceeded",
    "CallModel",
    "CallingModel",
    "Cancel",
    "Cancelled",
    "ChartData",
    "ChartDefinitionError",
    "ChartDraft",
    "ChartSpec",
    "Compacting",
    "CompactionSummary",
    "Conversation",
    "CustomPhase",
    "Debugger",
    "DebuggerError",
    "DecisionSpent",
    "Done",
    "Effect",
    "EffectContext",
    "EffectFailed",
    "EffectPhase",
    "EffectResult",
    "EmptyModelResponse",
    "ExecuteTools",
    "ExecutingTools",
    "Fail",
    "Failed",
    "FatalToolError",
    "FinalOutput",
    "Finalizing",
    "GuardrailFailed",
    "GuardrailResult",
    "GuardrailTriggered",
    "GuardrailTripped",
    "Handoff",
    "HandoffItem",
    "HandoffResult",
    "HandoffTo",
    "HelikonError",
    "InputGuardrail",
    "InvalidStructuredOutput",
    "Item",
    "LeaseLost",
    "ListedTool",
    "LoopChart",
    "LoopState",
    "Match",
    "MaxAgentDepthExceeded",
    "MaxTurnsExceeded",
    "MessageOutput",
    "Model",
    "ModelCallFailed",
    "ModelError",
    "ModelInput",
    "ModelOutputTruncated",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "NeedsApproval",
    "NextAction",
    "NotInChart",
    "OpenAIModel",
    "OutputGuardrail",
    "OutputSpec",
    "Permission",
    "PermissionDenied",
    "Reasoning",
    "ReasoningDelta",
    "RepairStarted",
    "RepairingOutput",
    "ReplayModel",
    "Row",
    "RowSpec",
    "Run",
    "RunCompleted",
    "RunConfig",
    "RunContext",
    "RunEffect",
    "RunError",
    "RunExists",
    "RunFailed",
    "RunInfo",
    "RunLeased",
    "RunNotFound",
    "RunResult",
    "RunResultStreaming",
    "RunSnapshot",
    "RunStarted",
    "RunStore",
    "RunSuspended",
    "Runner",
    "ScriptedModel",
    "ScriptedTurn",
    "Session",
    "SnapshotMismatch",
    "SqliteRunStore",
    "Start",
    "StoreCorrupt",
    "StoreError",
    "StoredRun",
    "StructuredOutputFailed",
    "SystemMessage",
    "TableNotRunnable",
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
    "ToolSource",
    "ToolSpec",
    "ToolsUnavailable",
    "Trace",
    "TraceError",
    "TraceWriter",
    "TransitionCtx",
    "TransitionInput",
    "TransitionOutcome",
    "TransitionRecord",
    "TransitionTable",
    "TurnStarted",
    "UnexpectedInput",
    "Usage",
    "UserMessage",
    "arguments_hash",
    "compile_chart",
    "effect",
    "extend",
    "initial_state",
    "match_row",
    "open_store",
    "pending_action",
    "read_trace",
    "run_sync",
    "to",
    "tool",
    "transition",
    "trip_output_guardrail",
]
