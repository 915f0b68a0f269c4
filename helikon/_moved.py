"""Old names that still work, and warn: the names `helikon` offered before its surface was cut
to what an agent author uses, each with its new home (`MOVED`), and names renamed to the
glossary's words (`RENAMED`, docs/concepts/glossary.md), each with its new name.

`from helikon import X` for a moved name, or `from <package> import old` for a renamed one,
still works, through the module `__getattr__` of the package that offered it, and warns
(DeprecationWarning) naming where the object is now; docs/changelog.md lists the same names
(tests keep the two in step).
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
    "read_trace": "helikon.trace",
    "trip_output_guardrail": "helikon.core",
}

# old dotted name -> new dotted name: renamed to the glossary's words ("pending" is only an
# approval's; the action a state asks for is its next action).
RENAMED: dict[str, str] = {
    "helikon.core.pending_action": "helikon.core.next_action_of",
    "helikon.core.transition.pending_action": "helikon.core.transition.next_action_of",
    "helikon.pending_action": "helikon.core.next_action_of",
}


def moved(name: str, package: str = "helikon") -> object:
    """The object `<package>.<name>` was, from its new home and under its new name, with a
    DeprecationWarning naming them.

    Raises:
        AttributeError: `name` is not a name `package` ever offered.
    """
    new = RENAMED.get(f"{package}.{name}")
    if new is not None:
        home, now = new.rsplit(".", 1)
        message = f"{package}.{name} was renamed {new}: import it as `from {home} import {now}`"
    elif package == "helikon" and name in MOVED:
        home, now = MOVED[name], name
        message = f"helikon.{name} moved to {home}: import it as `from {home} import {name}`"
    else:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    # `from helikon import X` asks twice: the import system first (`hasattr`, in
    # importlib's `_handle_fromlist`), then the importing line itself. Warn once, on the
    # second ask, so the warning names the importing line. Frames: this function, the
    # module `__getattr__`, its caller.
    if not sys._getframe(2).f_code.co_filename.startswith("<frozen importlib"):
        warnings.warn(message, DeprecationWarning, stacklevel=3)
    return getattr(import_module(home), now)
