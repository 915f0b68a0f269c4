"""The pure core does no IO, reads no clock, draws no randomness and mutates nothing.

The pure core is helikon.core.items, events, errors, approvals, state, context, codec, transition,
values (the `@value` decorator they all use) and every module of helikon.core.chart.
"""

from __future__ import annotations

import ast
import copy
import datetime
import json
import os
import pkgutil
import random
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import helikon
from helikon import (
    DEFAULT_TABLE,
    ApprovalDecision,
    ApprovalRequest,
    AssistantMessage,
    FinalOutput,
    GuardrailTripped,
    ModelResponse,
    Start,
    ToolCall,
    ToolResult,
    ToolResults,
    TransitionCtx,
    Usage,
    UserMessage,
    initial_state,
    transition,
)
from helikon.core import ApprovalDecisions, Cancel, HandoffResult, OutputSpec
from helikon.core.codec import dumps
from helikon.core.state import Fail

PACKAGE = Path(helikon.__file__).resolve().parent
FORBIDDEN = ("asyncio", "openai", "httpx", "sqlite3", "graphviz", "jinja2", "socket", "subprocess")
CLOCK_AND_RANDOMNESS = ("time", "random", "datetime", "uuid", "secrets")


def core_modules() -> list[str]:
    """The pure core's modules: helikon.core and everything under it, found on disk (so new
    modules are covered)."""
    found = pkgutil.walk_packages([str(PACKAGE / "core")], prefix="helikon.core.")
    return ["helikon.core", *sorted(module.name for module in found)]


def module_file(name: str) -> Path:
    path = PACKAGE.joinpath(*name.split(".")[1:])
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


# ---------------------------------------------------------------- imports


def imports_of(name: str) -> Iterator[tuple[str, int]]:
    """Every module an `import` statement of module `name` names, anywhere in the file (also
    inside functions and `if TYPE_CHECKING:`), absolute, with its line."""
    tree = ast.parse(module_file(name).read_text(), filename=str(module_file(name)))
    package = name if module_file(name).name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [base])])
            yield base, node.lineno
            for alias in node.names:  # `from helikon import x` may name a submodule
                yield f"{base}.{alias.name}", node.lineno


def test_core_modules_use_no_clock_and_no_randomness_statically() -> None:
    problems = [
        f"{name}:{line} imports {imported}"
        for name in core_modules()
        for imported, line in imports_of(name)
        if imported.split(".")[0] in CLOCK_AND_RANDOMNESS
    ]
    assert not problems, "\n".join(problems)


PROBE = r"""
import builtins, importlib, json, sys, types

package, core, forbidden = sys.argv[1], json.loads(sys.argv[2]), set(json.loads(sys.argv[3]))
baseline = set(sys.modules)
import pydantic, statemachine  # what the core's two dependencies pull in themselves
deps = sorted(m for m in set(sys.modules) - baseline if m.split(".")[0] in forbidden)

# helikon/__init__.py re-exports the whole package; load the core modules without it.
stub = types.ModuleType("helikon")
stub.__path__ = [package]
sys.modules["helikon"] = stub

seen = []
real_import = builtins.__import__

def spy(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if importer.split(".")[0] == "helikon" and level == 0 and name.split(".")[0] in forbidden:
        seen.append([importer, name])
    return real_import(name, globals, locals, fromlist, level)

builtins.__import__ = spy
for name in core:
    importlib.import_module(name)
from helikon.core.chart.default import DEFAULT_TABLE  # and one step
from helikon.core.context import TransitionCtx
from helikon.core.state import CallingModel, Start
from helikon.core.transition import transition
transition(CallingModel(), Start(), TransitionCtx(table=DEFAULT_TABLE))
builtins.__import__ = real_import

print(json.dumps({
    "seen": seen,
    "deps": deps,
    "after": sorted(m for m in sys.modules if m.split(".")[0] in forbidden),
    "helikon": sorted(m for m in sys.modules if m.split(".")[0] == "helikon"),
}))
"""


def test_core_modules_import_nothing_that_does_io_at_run_time() -> None:
    """In a fresh interpreter, import the core modules and run one transition.

    Checking only that `sys.modules` lacks asyncio, socket and subprocess cannot work:
    python-statemachine itself imports asyncio (statemachine/callbacks.py, utils.py,
    invoke.py), and asyncio imports socket and subprocess. So the probe (1) wraps
    `builtins.__import__` to record every import of a forbidden module made by a helikon
    module (a cached module is still caught, since every `import` statement goes through
    it), (2) checks that nothing forbidden is loaded beyond what pydantic and
    python-statemachine load on their own, and (3) loads the core without helikon/__init__.py
    (a stub package), so only core modules are loaded and any other helikon module the core
    pulls in shows up.
    """
    core = core_modules()
    args = [str(PACKAGE), json.dumps(core), json.dumps(FORBIDDEN)]
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["seen"] == []
    assert report["after"] == report["deps"]
    assert {"sqlite3", "httpx", "openai", "graphviz", "jinja2"}.isdisjoint(report["after"])
    assert set(report["helikon"]) <= {"helikon", *core}


def test_the_probe_sees_an_io_import() -> None:
    """The probe can fail: a core module that imports sqlite3 is reported."""
    probe = PROBE.replace(
        "builtins.__import__ = spy\n",
        "builtins.__import__ = spy\nexec('import sqlite3', {'__name__': 'helikon.fake'})\n",
    )
    args = [str(PACKAGE), json.dumps(core_modules()), json.dumps(FORBIDDEN)]
    result = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60
    )
    report = json.loads(result.stdout)
    assert ["helikon.fake", "sqlite3"] in report["seen"]
    assert "sqlite3" in report["after"] and "sqlite3" not in report["deps"]


# ---------------------------------------------------------------- scripted runs


class Verdict(BaseModel):
    score: int
    label: str


SEARCH = ToolCall("c1", "search", '{"q": "rent"}')
WIPE = ToolCall("c2", "wipe", "{}")
RM = ToolCall("c3", "rm", "{}")
HANDOFF = ToolCall("h", "transfer_to_b", "{}")
USED = Usage(10, 5, 15, 1)


def scripts() -> dict[str, tuple[TransitionCtx, list[tuple[Any, str]]]]:
    """Runs through most rows of the default chart: (context, [(input, phase after)])."""
    full = TransitionCtx(
        table=DEFAULT_TABLE,
        max_turns=4,
        token_budget=10_000,
        compaction_threshold=50,
        tools={"search": "allow", "wipe": "ask", "rm": "deny"},
        output=OutputSpec.of(Verdict),
    )
    wrong_hash = ApprovalDecision("c2", "0" * 64, True)
    return {
        "approvals, compaction, repair": (
            full,
            [
                (Start((UserMessage("How am I doing?"),)), "CallingModel"),
                (ModelResponse((AssistantMessage("checking"), SEARCH, WIPE, RM)), "NeedsApproval"),
                (ApprovalDecisions((wrong_hash,)), "NeedsApproval"),
                (ApprovalDecisions((ApprovalRequest.for_call(WIPE).approve(),)), "ExecutingTools"),
                (ToolResults((ToolResult("c1", "x" * 400), ToolResult("c2", "ok"))), "Compacting"),
                (ModelResponse((AssistantMessage("summary"),), USED), "CallingModel"),
                (ModelResponse((AssistantMessage("fine"),), USED), "Finalizing"),
                (ModelResponse((AssistantMessage("not json"),), USED), "RepairingOutput"),
                (ModelResponse((AssistantMessage('{"score": 1, "label": "a"}'),)), "Done"),
                (Cancel("late"), "Done"),
            ],
        ),
        "handoff": (
            TransitionCtx(
                table=DEFAULT_TABLE, tools={"search": "allow"}, handoffs={"transfer_to_b": "b"}
            ),
            [
                (Start((UserMessage("help"),)), "CallingModel"),
                (ModelResponse((SEARCH, HANDOFF), USED), "ApplyingHandoff"),
                (HandoffResult(FinalOutput("done by b"), None, USED), "Done"),
            ],
        ),
        "max turns, then stray inputs": (
            TransitionCtx(table=DEFAULT_TABLE, max_turns=1, token_budget=1_000),
            [
                (Start(), "CallingModel"),
                (ModelResponse((SEARCH,), USED), "ExecutingTools"),
                (ToolResults((ToolResult("c1", "ok"),)), "Failed"),
                (Start(), "Failed"),
            ],
        ),
        "cancel mid-batch": (
            TransitionCtx(table=DEFAULT_TABLE, tools={"wipe": "ask"}),
            [
                (Start(), "CallingModel"),
                (ModelResponse((SEARCH, WIPE), USED), "NeedsApproval"),
                (Cancel("stop"), "Failed"),
            ],
        ),
        "truncated": (
            TransitionCtx(table=DEFAULT_TABLE),
            [
                (Start(), "CallingModel"),
                (ModelResponse((AssistantMessage("half"),), USED, "length"), "Failed"),
            ],
        ),
        "a failure from the driver": (
            TransitionCtx(table=DEFAULT_TABLE),
            [(Start(), "CallingModel"), (Fail(GuardrailTripped("pii", "input")), "Failed")],
        ),
        "a stray input": (
            TransitionCtx(table=DEFAULT_TABLE),
            [(Start(), "CallingModel"), (ToolResults(()), "Failed")],
        ),
    }


def run_script(ctx: TransitionCtx, steps: list[tuple[Any, str]]) -> list[Any]:
    """Run a script, checking every step leaves its arguments as they were."""
    state, outcomes = initial_state(ctx), []
    facts = (dict(ctx.tools), dict(ctx.handoffs), dict(ctx.prompts), ctx.output)
    for inp, phase in steps:
        state_copy, inp_copy = copy.deepcopy(state), copy.deepcopy(inp)
        state_json, inp_json = dumps(state), dumps(inp)
        outcome = transition(state, inp, ctx)
        assert state == state_copy and inp == inp_copy
        assert dumps(state) == state_json and dumps(inp) == inp_json
        assert outcome.next_state.phase == phase, (inp, outcome.next_state)
        outcomes.append(outcome)
        state = outcome.next_state
    assert (dict(ctx.tools), dict(ctx.handoffs), dict(ctx.prompts), ctx.output) == facts
    return outcomes


@pytest.mark.parametrize("name", sorted(scripts()))
def test_transition_does_not_mutate_its_arguments(name: str) -> None:
    ctx, steps = scripts()[name]
    run_script(ctx, steps)


def refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("transition read a clock or drew randomness")


class ClocklessDatetime(datetime.datetime):
    now = classmethod(refuse)  # type: ignore[assignment]
    utcnow = classmethod(refuse)  # type: ignore[assignment]
    today = classmethod(refuse)  # type: ignore[assignment]


CLOCKS: list[tuple[Any, str]] = [
    *((time, name) for name in ("time", "time_ns", "monotonic", "monotonic_ns",
                                "perf_counter", "perf_counter_ns", "process_time")),
    *((random, name) for name in ("random", "getrandbits", "randint", "randrange",
                                  "choice", "choices", "shuffle", "sample", "uniform")),
    (os, "urandom"), (uuid, "uuid1"), (uuid, "uuid4"),
    (secrets, "token_bytes"), (secrets, "token_hex"), (secrets, "randbits"),
]  # fmt: skip


@pytest.mark.parametrize("name", sorted(scripts()))
def test_transition_reads_no_clock_and_draws_no_randomness(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, steps = scripts()[name]
    expected = [dumps(outcome) for outcome in run_script(ctx, steps)]
    with monkeypatch.context() as patched:
        for module, attribute in CLOCKS:
            patched.setattr(module, attribute, refuse)
        patched.setattr(datetime, "datetime", ClocklessDatetime)
        outcomes = run_script(ctx, steps)
    assert [dumps(outcome) for outcome in outcomes] == expected


def test_the_clock_patch_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", refuse)
    with pytest.raises(AssertionError, match="clock"):
        time.time()
