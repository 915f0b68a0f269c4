"""helikon's public surface: `helikon.__all__` and the names SEMANTICS.md and DESIGN.md promise.

Like httpx's tests/test_exported_members.py: `__all__` is sorted, says exactly what
helikon/__init__.py defines, and every name in it imports.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import helikon

INIT = Path(helikon.__file__).resolve()

# Every phase, input, action, event and error class SEMANTICS.md names, and the value unions.
SEMANTICS_NAMES = (
    # phases (LoopState)
    "LoopState", "CallingModel", "ExecutingTools", "NeedsApproval", "ApplyingHandoff",
    "Finalizing", "RepairingOutput", "Compacting", "Done", "Failed", "FinalOutput",
    # inputs (TransitionInput) and actions (NextAction)
    "TransitionInput", "Start", "ModelResponse", "ToolResults", "ApprovalDecisions",
    "HandoffResult", "Cancel",
    "NextAction", "CallModel", "ExecuteTools", "AwaitApproval", "Handoff", "Terminate",
    # errors
    "AgentError", "BudgetExceeded", "ModelOutputTruncated", "EmptyModelResponse",
    "MaxTurnsExceeded", "InvalidStructuredOutput", "Cancelled", "FatalToolError",
    "GuardrailTripped", "MaxAgentDepthExceeded",
    # events
    "RunStarted", "TurnStarted", "TokenDelta", "ToolCallDelta", "MessageOutput",
    "ToolCallItem", "ToolOutputItem", "ApprovalRequested", "PermissionDenied",
    "RepairStarted", "StructuredOutputFailed", "GuardrailTriggered", "RunCompleted",
    "RunFailed", "RunSuspended",
)  # fmt: skip

# The names DESIGN.md's "Public API" section and its list of shapes promise.
DESIGN_NAMES = (
    "Agent", "RunConfig", "RunContext", "RunResult", "RunResultStreaming", "Runner", "tool",
    "Tool", "ScriptedModel", "ScriptedTurn", "OpenAIModel", "transition", "AGENT_LOOP",
    "compile_chart", "UserMessage", "AssistantMessage", "SystemMessage", "ToolCall",
    "ToolResult", "Usage", "HandoffItem", "RunError", "ModelError",
)  # fmt: skip


def isort_key(name: str) -> tuple[int, list[object]]:
    """The order ruff's RUF022 keeps `__all__` in (its "isort-style" sort, which the
    project's ruff rules enforce): SCREAMING_SNAKE_CASE, then CamelCase, then the rest,
    each in natural order (digits compared as numbers)."""
    if len(name) > 1 and name.isupper():
        group = 0
    elif name.lstrip("_")[:1].isupper():
        group = 1
    else:
        group = 2
    natural = [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
    return group, natural


def defined_names() -> set[str]:
    """The public names helikon/__init__.py binds, and the ones its `__getattr__` serves."""
    tree = ast.parse(INIT.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if node.name == "__getattr__":
                names.update(lazy_names(node))
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def lazy_names(function: ast.AST) -> set[str]:
    """Names a module `__getattr__` compares its argument with (`name == "X"`, `in (...)`)."""
    found: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                for const in ast.walk(operand):
                    if isinstance(const, ast.Constant) and isinstance(const.value, str):
                        found.add(const.value)
    return found


def test_all_is_sorted() -> None:
    assert helikon.__all__ == sorted(helikon.__all__, key=isort_key)


def test_all_has_no_duplicates() -> None:
    assert len(helikon.__all__) == len(set(helikon.__all__))


def test_all_is_exactly_the_public_names_of_init() -> None:
    defined = defined_names()
    exported = set(helikon.__all__)
    assert not defined - exported, f"defined but not in __all__: {sorted(defined - exported)}"
    assert not exported - defined, f"in __all__ but not defined: {sorted(exported - defined)}"


@pytest.mark.parametrize("name", helikon.__all__)
def test_every_exported_name_imports(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from helikon import {name}", namespace)
    assert namespace[name] is getattr(helikon, name)


def test_star_import_gives_every_exported_name() -> None:
    namespace: dict[str, object] = {}
    exec("from helikon import *", namespace)
    assert set(helikon.__all__) <= set(namespace)


@pytest.mark.parametrize("name", sorted(set(SEMANTICS_NAMES)))
def test_every_name_semantics_uses_is_exported(name: str) -> None:
    assert name in helikon.__all__


@pytest.mark.parametrize("name", sorted(set(DESIGN_NAMES)))
def test_every_public_api_name_of_design_is_exported(name: str) -> None:
    """Names not written yet are skipped; once defined in the package, they must export."""
    if name not in helikon.__all__ and not defined_in_package(name):
        pytest.skip(f"{name} is not defined in helikon yet")
    assert name in helikon.__all__


def defined_in_package(name: str) -> bool:
    """True when some module of helikon defines `name` at its top level."""
    for path in INIT.parent.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name == name:
                    return True
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                return True
    return False


def test_importing_helikon_needs_no_optional_extra() -> None:
    """`openai` (extra "openai"), `graphviz` and `jinja2` (extra "render"), `mcp` and
    `jsonschema` (extra "mcp") are optional: a bare `import helikon` must not import them."""
    optional = ("openai", "graphviz", "jinja2", "mcp", "jsonschema")
    code = f"import sys, helikon; print(sorted(m for m in {optional!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_renamed_event_fields_keep_their_old_names_for_one_release() -> None:
    """The seed's field names, with the earlier names readable as properties."""
    from helikon import (
        ApprovalRequest,
        ApprovalRequested,
        FinalOutput,
        GuardrailTriggered,
        RunCompleted,
        StructuredOutputFailed,
        ToolCall,
        ToolCallDelta,
        Usage,
    )

    delta = ToolCallDelta("c1", '{"a"', "add")
    assert delta.args_delta == delta.arguments_delta == '{"a"'
    tripped = GuardrailTriggered("pii", "input", "a card number")
    assert (
        (tripped.kind, tripped.info)
        == (tripped.stage, tripped.message)
        == ("input", "a card number")
    )
    request = ApprovalRequest.for_call(ToolCall("c2", "pay", '{"amount": 5}'))
    asked = ApprovalRequested.of(request)
    assert (asked.call_id, asked.tool, asked.args) == ("c2", "pay", '{"amount": 5}')
    assert asked.request == request
    failed = StructuredOutputFailed(("total: missing",), "{}")
    assert (failed.errors, failed.raw) == (failed.schema_errors, failed.final_text)
    usage = Usage(1, 2, 3, 1)
    assert RunCompleted.of(FinalOutput("ok", None, usage)).usage == usage
