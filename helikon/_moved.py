"""The names `helikon` offered before its surface was cut to what an agent author uses, each
with its new home. `from helikon import X` for one of them still works, through the module
`__getattr__` of helikon/__init__.py, and warns (DeprecationWarning) naming the new home;
docs/changelog.md lists the same names (a test keeps the two in step).
"""

from __future__ import annotations

import sys
import warnings
from importlib import import_module

# name -> the package it now lives in (its `__all__` offers it).
MOVED: dict[str, str] = {
    "AgentSpec": "helikon.run",
    "ApplyingHandoff": "helikon.core",
    "ApprovalDecisions": "helikon.core",
    "ApprovalHandlerFailed": "helikon.core",
    "ApprovalMismatch": "helikon.run",
    "ApprovalNotBound": "helikon.core",
    "AwaitApproval": "helikon.core",
    "CallModel": "helikon.core",
    "Cancel": "helikon.core",
    "ChartData": "helikon.core",
    "ChartDraft": "helikon.core",
    "Compacting": "helikon.core",
    "CompactionSummary": "helikon.core",
    "CustomPhase": "helikon.core",
    "Debugger": "helikon.debug",
    "DebuggerError": "helikon.debug",
    "DecisionSpent": "helikon.durable",
    "Done": "helikon.core",
    "Effect": "helikon.run",
    "EffectFailed": "helikon.core",
    "EffectPhase": "helikon.core",
    "EffectResult": "helikon.core",
    "EmptyModelResponse": "helikon.core",
    "ExecuteTools": "helikon.core",
    "ExecutingTools": "helikon.core",
    "Fail": "helikon.core",
    "Finalizing": "helikon.core",
    "GuardrailFailed": "helikon.core",
    "Handoff": "helikon.core",
    "HandoffResult": "helikon.core",
    "InvalidStructuredOutput": "helikon.core",
    "LeaseLost": "helikon.durable",
    "ListedTool": "helikon.core",
    "LoopState": "helikon.core",
    "Match": "helikon.core",
    "MaxAgentDepthExceeded": "helikon.core",
    "ModelCallFailed": "helikon.core",
    "ModelInput": "helikon.models",
    "ModelOutputTruncated": "helikon.core",
    "ModelRequest": "helikon.core",
    "NeedsApproval": "helikon.core",
    "NextAction": "helikon.core",
    "NotInChart": "helikon.core",
    "OutputSpec": "helikon.core",
    "Permission": "helikon.core",
    "Reasoning": "helikon.core",
    "RepairingOutput": "helikon.core",
    "Row": "helikon.core",
    "RowSpec": "helikon.core",
    "RunEffect": "helikon.core",
    "RunExists": "helikon.durable",
    "RunInfo": "helikon.durable",
    "RunLeased": "helikon.durable",
    "RunNotFound": "helikon.durable",
    "RunStore": "helikon.durable",
    "Session": "helikon.durable",
    "SnapshotMismatch": "helikon.run",
    "StoreCorrupt": "helikon.durable",
    "StoreError": "helikon.durable",
    "StoredRun": "helikon.durable",
    "TableNotRunnable": "helikon.core",
    "ToolSource": "helikon.tools",
    "ToolSpec": "helikon.core",
    "ToolsUnavailable": "helikon.core",
    "Trace": "helikon.trace",
    "TraceError": "helikon.trace",
    "TraceWriter": "helikon.trace",
    "TransitionInput": "helikon.core",
    "TransitionRecord": "helikon.trace",
    "TransitionTable": "helikon.core",
    "UnexpectedInput": "helikon.core",
    "match_row": "helikon.core",
    "pending_action": "helikon.core",
    "read_trace": "helikon.trace",
    "trip_output_guardrail": "helikon.core",
}


def moved(name: str) -> object:
    """The object `helikon.<name>` was, from its new home, with a DeprecationWarning.

    Raises:
        AttributeError: `name` is not a name helikon ever offered.
    """
    home = MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'helikon' has no attribute {name!r}")
    # `from helikon import X` asks twice: the import system first (`hasattr`, in
    # importlib's `_handle_fromlist`), then the importing line itself. Warn once, on the
    # second ask, so the warning names the importing line. Frames: this function, the
    # module `__getattr__`, its caller.
    if not sys._getframe(2).f_code.co_filename.startswith("<frozen importlib"):
        warnings.warn(
            f"helikon.{name} moved to {home}: import it as `from {home} import {name}`",
            DeprecationWarning,
            stacklevel=3,
        )
    return getattr(import_module(home), name)
