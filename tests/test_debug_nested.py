"""Nested runs in the debugger: `Debugger.step_in` opens a handoff target's (or an agent
called as a tool's) recorded run on its own chart, breakpoints apply inside nested runs,
and the terminal prompt's `step in`, `step out` and `up`, through a pipe and under a real
terminal (tmux, skipped with the reason where it is not installed).

The run is the triage chart's: triage hands off to billing at its step 2, and billing's
four transitions (a tool call, then the refund) are the nested run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_debug_repl import REFUND, ROOT, _env, blocks, debug, record_triage

from helikon.debug.debugger import Debugger, DebuggerError
from helikon.trace import read_trace

TMUX = shutil.which("tmux")


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


@pytest.mark.skipif(
    TMUX is None, reason="the terminal test needs Debian's tmux (apt-get install tmux)"
)
def test_step_in_and_out_under_a_terminal(triage: Path, tmp_path: Path) -> None:
    assert TMUX is not None
    socket = str(tmp_path / "tmux.sock")
    command = f"{sys.executable} -m helikon debug --trace {triage}"
    tmux = [TMUX, "-S", socket, "-f", "/dev/null"]
    env = {**_env(), "TERM": "xterm-256color", "NO_COLOR": "1"}
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "160", "-y", "50", "-c", str(ROOT), command],
        check=True,
        env=env,
    )

    def screen() -> str:
        shown = subprocess.run(
            [*tmux, "capture-pane", "-p", "-J", "-S", "-200"], capture_output=True, text=True
        )
        return shown.stdout

    def until(text: str) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            shown = screen()
            if text in shown:
                return shown
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never appeared on the terminal:\n{screen()}")

    def type_line(line: str) -> None:
        subprocess.run([*tmux, "send-keys", "-l", line], check=True)
        subprocess.run([*tmux, "send-keys", "Enter"], check=True)

    try:
        until("(hdb) ")
        type_line("step")
        type_line("step")
        until("(`step in` opens it)")
        type_line("step in")
        until("4 steps as recorded")
        type_line("continue")
        shown = until("#4 CallingModel → Done")
        assert REFUND in shown
        type_line("up")
        until("up to run ")
        type_line("quit")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
