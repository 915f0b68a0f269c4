"""Nested runs in the debugger: `Debugger.step_in` opens a handoff target's (or an agent
called as a tool's) recorded run on its own chart, breakpoints apply inside nested runs,
and the terminal prompt's `step in`, `step out` and `up`, through a pipe and under a real
terminal (tmux, skipped with the reason where it is not installed).

The run is the triage chart's: triage hands off to billing at its step 2, and billing's
four transitions (a tool call, then the refund) are the nested run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_debug_repl import REFUND, ROOT, _env, blocks, debug, record_triage
from tmux_support import needs_tmux, terminal

from helikon.debug.debugger import Debugger, DebuggerError
from helikon.trace import read_trace


@pytest.fixture
def triage(tmp_path: Path) -> Path:
    path = tmp_path / "triage.jsonl"
    record_triage(path)
    return path


async def test_step_in_replays_the_handoff_targets_transitions(triage: Path) -> None:
    debugger = Debugger.replay(read_trace(triage))
    await debugger.step()
    assert debugger.nested_runs() == []
    with pytest.raises(DebuggerError, match="no nested run began after step 1"):
        debugger.step_in()
    await debugger.step()
    (child,) = debugger.nested_runs()
    assert child == debugger.run.run_id + "/2"
    with pytest.raises(DebuggerError, match="no nested run 'elsewhere' here"):
        debugger.step_in("elsewhere")
    billing = debugger.step_in()
    assert (billing.run.run_id, billing.run.agent.name, len(billing.expected)) == (
        child,
        "billing",
        4,
    )
    stop = await billing.continue_()
    assert stop.reason == "end" and billing.state.phase == "Done"
    assert [(s.state_before.phase, s.state_after.phase) for s in billing.history] == [
        ("CallingModel", "CallingModel"),
        ("CallingModel", "ExecutingTools"),
        ("ExecutingTools", "CallingModel"),
        ("CallingModel", "Done"),
    ]
    assert billing.conversation[-1].content == REFUND  # billing's own answer, step by step
    assert debugger.position == 2  # the outer run is where it was


async def test_breakpoints_apply_inside_nested_runs(triage: Path) -> None:
    debugger = Debugger.replay(read_trace(triage))
    debugger.break_on("phase", "ExecutingTools")  # triage never enters it; billing does
    stop = await debugger.continue_()
    assert (stop.reason, stop.nested, debugger.position) == (
        "breakpoint",
        debugger.run.run_id + "/2",
        2,
    )
    billing = debugger.step_in()
    assert [b.describe() for b in billing.breakpoints] == ["#1 phase ExecutingTools"]
    inner = await billing.continue_()
    assert (inner.reason, billing.position, billing.state.phase) == (
        "breakpoint",
        2,
        "ExecutingTools",
    )


def test_step_in_and_out_through_a_pipe(triage: Path) -> None:
    done = debug(
        "--trace",
        str(triage),
        commands="step\nstep in\nstep\nstep in\ncontinue\nstep out\nstep in\nup\nup\ncontinue\n",
    )
    assert done.returncode == 0, done.stderr
    steps = blocks(done.stdout)
    assert steps[1][0] == "step" and "nested:" not in steps[1][1]
    assert steps[2] == (
        "step in",
        "error: no nested run began after step 1: step in after a handoff or a call of an "
        "agent as a tool",
    )
    assert "nested: " in steps[3][1] and "(`step in` opens it)" in steps[3][1]
    assert steps[4][0] == "step in" and "(billing, 4 steps as recorded;" in steps[4][1]
    assert steps[5][0] == "continue" and "#4 CallingModel → Done" in steps[5][1]
    assert REFUND in steps[5][1]
    assert steps[6][0] == "step out" and steps[6][1].startswith("up to run ")
    assert steps[8][0] == "up" and steps[8][1].startswith("up to run ")
    assert steps[9] == ("up", "error: this is the outermost run: `step in` opens a nested one")
    assert "#3 ApplyingHandoff → Done" in steps[10][1]


@needs_tmux
def test_step_in_and_out_under_a_terminal(triage: Path, tmp_path: Path) -> None:
    command = f"{sys.executable} -m helikon debug --trace {triage}"
    with terminal(command, tmp_path, ROOT, _env(), width=160) as shell:
        shell.until("(hdb) ")
        shell.type_line("step")
        shell.type_line("step")
        shell.until("(`step in` opens it)")
        shell.type_line("step in")
        shell.until("4 steps as recorded")
        shell.type_line("continue")
        shown = shell.until("#4 CallingModel → Done")
        assert REFUND in shown
        shell.type_line("up")
        shell.until("up to run ")
        shell.type_line("quit")
