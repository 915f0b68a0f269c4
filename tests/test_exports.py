"""helikon's public surface: `helikon.__all__` and the names SEMANTICS.md and DESIGN.md promise.

Like httpx's tests/test_exported_members.py: `__all__` is sorted, says exactly what
helikon/__init__.py defines, and every name in it imports. The top level holds at most 90
names, among them every name README.md and the docs import from `helikon`; the names that
moved to subpackages still import from `helikon`, with a warning naming their new home, and
the changelog lists them; `import helikon` loads neither the debugger nor the SQLite store.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import helikon
import helikon.core
from helikon._moved import MOVED

INIT = Path(helikon.__file__).resolve()
ROOT = INIT.parents[1]
TOP_LEVEL_LIMIT = 90  # httpx offers about 70
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")

# Every phase, input, action, event and error class SEMANTICS.md names, and the value unions.
SEMANTICS_NAMES = (
    # phases (LoopState)
    "LoopState", "CallingModel", "ExecutingTools", "NeedsApproval", "ApplyingHandoff",
    "Finalizing", "RepairingOutput", "CheckingOutput", "Compacting", "Done", "Failed",
    "FinalOutput",
    # inputs (TransitionInput) and actions (NextAction)
    "TransitionInput", "Start", "ModelResponse", "ToolResults", "ApprovalDecisions",
    "HandoffResult", "GuardrailVerdict", "Cancel",
    "NextAction", "CallModel", "ExecuteTools", "AwaitApproval", "Handoff", "CheckGuardrails",
    "Terminate",
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
        if isinstance(node, ast.ImportFrom) and node.module not in ("__future__", "typing"):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and is_name(node.targets, "_LAZY"):
            names.update(lazy_names(node.value))
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def is_name(targets: list[ast.expr], name: str) -> bool:
    return any(isinstance(target, ast.Name) and target.id == name for target in targets)


def lazy_names(mapping: ast.expr) -> set[str]:
    """The keys of `_LAZY`, the names the module `__getattr__` imports when asked for."""
    assert isinstance(mapping, ast.Dict)
    return {key.value for key in mapping.keys if isinstance(key, ast.Constant)}


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
def test_every_name_semantics_uses_is_exported_by_the_core(name: str) -> None:
    """The contract's words are the core's: `helikon.core` offers each one (the top level
    offers those an agent author handles, such as the events)."""
    assert name in helikon.core.__all__
    assert getattr(helikon.core, name) is not None


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


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(page: Path) -> list[str]:
    """The Python fenced blocks of a Markdown page."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if opened is None:
            index += 1
            continue
        fence, language = opened.groups()
        end = index + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        if language in ("python", "py"):
            found.append("\n".join(lines[index + 1 : end]))
        index = end + 1
    return found


def names_used_from_helikon(code: str) -> set[str]:
    """`from helikon import X` and `helikon.X` in a piece of Python."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module == "helikon" and node.level == 0:
            names.update(alias.name for alias in node.names)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "helikon"
        ):
            names.add(node.attr)
    return names


def documented_names() -> dict[str, str]:
    """Every name README.md, the docs' examples and the example charts take from `helikon`,
    with a page that does."""
    found: dict[str, str] = {}
    sources = [(page, block) for page in doc_pages() for block in python_blocks(page)]
    sources += [(path, path.read_text()) for path in sorted((ROOT / "charts").glob("*.py"))]
    for path, code in sources:
        for name in names_used_from_helikon(code):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_the_top_level_is_small() -> None:
    assert len(helikon.__all__) <= TOP_LEVEL_LIMIT, len(helikon.__all__)


def test_every_name_the_docs_import_from_helikon_is_top_level() -> None:
    documented = documented_names()
    assert len(documented) >= 45  # the scan finds the pages' imports (49 when written)
    missing = {name: page for name, page in documented.items() if name not in helikon.__all__}
    assert not missing, f"imported from helikon by the docs but not offered: {missing}"


def test_the_scan_sees_an_import_and_an_attribute() -> None:
    code = "from helikon import Agent, tool as t\nimport helikon\nhelikon.run_sync(x)\n"
    assert names_used_from_helikon(code) == {"Agent", "tool", "run_sync"}


def test_moved_names_are_not_top_level() -> None:
    assert not set(MOVED) & set(helikon.__all__)


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_lives_in_its_new_home(name: str) -> None:
    home = importlib.import_module(MOVED[name])
    assert name in home.__all__


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_still_imports_from_helikon_with_a_warning(name: str) -> None:
    home = MOVED[name]
    with pytest.warns(DeprecationWarning) as caught:
        namespace: dict[str, object] = {}
        exec(f"from helikon import {name}", namespace)
    assert namespace[name] is getattr(importlib.import_module(home), name)
    assert [str(w.message) for w in caught] == [
        f"helikon.{name} moved to {home}: import it as `from {home} import {name}`"
    ]


def test_the_warning_points_at_the_importing_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        helikon.Debugger  # noqa: B018
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]


def test_dir_lists_the_lazy_names_and_not_the_moved_ones() -> None:
    listed = dir(helikon)
    assert {"SqliteRunStore", "OpenAIModel", "Agent"} <= set(listed)
    assert not set(MOVED) & set(listed)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'helikon' has no attribute 'Nope'"):
        helikon.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_the_changelog_lists_every_moved_name_and_its_new_home() -> None:
    changelog = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \| `([\w.]+)` \|", changelog, flags=re.MULTILINE))
    assert rows == set(MOVED.items())
    assert "changelog.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_importing_helikon_loads_neither_the_debugger_nor_the_sqlite_store() -> None:
    heavy = ("helikon.debug", "helikon.durable.sqlite", "sqlite3", "helikon.studio")
    code = f"import sys, helikon; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    # Asked for, they load.
    code = "import sys, helikon; helikon.SqliteRunStore; print('sqlite3' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr


SUBPACKAGES = (
    "core", "run", "models", "tools", "durable", "trace", "debug", "studio", "mcp",
    "temporal", "export", "charttest", "otel", "testing", "docsite",
)  # fmt: skip


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_each_subpackage_offers_a_sorted_all_whose_names_import(package: str) -> None:
    """A moved name's new home is a subpackage's `__all__`: it is kept like the top level's."""
    try:
        module = importlib.import_module(f"helikon.{package}")
    except ImportError as exc:  # an extra that is not installed
        pytest.skip(str(exc))
    exported = module.__all__
    assert exported == sorted(exported, key=isort_key)
    assert len(exported) == len(set(exported))
    for name in exported:
        try:
            assert getattr(module, name) is not None
        except ImportError:  # a name served lazily that needs an extra (PostgresRunStore)
            continue
