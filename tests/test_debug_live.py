"""Live step-in: `Debugger.step_in_live` steps a nested run while the parent's effect runs
it, held before each transition by a `StepGate` (`helikon.run.stepping`), and the driver's
hook itself: a held run records what an unheld one does.

The runs are the triage chart's (triage hands off to billing, whose four transitions are the
nested run) and tests/desk_chart.py's (the desk's one batch calls the researcher, an agent
as a tool, beside the plain weather tool; the researcher calls the checker as a tool).
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_debug_repl import Terminal, _env, blocks, debug, send
from tmux_support import needs_tmux, terminal

from helikon import Agent, RunCompleted, RunFailed, ToolCall, tool
from helikon.cli.loading import load_module
from helikon.core.approvals import ApprovalDecision
from helikon.debug.debugger import Debugger, DebuggerError
from helikon.debug.repl import DebugShell
from helikon.models.scripted import ScriptedModel
from helikon.run.driver import Run
from helikon.run.stepping import StepGate
from helikon.trace import TraceWriter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import desk_chart  # noqa: E402  (a chart file, imported from tests/)

TRIAGE_FILE = ROOT / "charts" / "triage.py"
DESK_FILE = ROOT / "tests" / "desk_chart.py"
TRIAGE = load_module(str(TRIAGE_FILE))
REFUND = "Invoice INV-1042 was paid twice; I have refunded 49.00 EUR to your card."


def triage() -> Debugger:
    agent = TRIAGE.agent(ScriptedModel(list(TRIAGE.script())))
    return Debugger.live(agent, TRIAGE.EXAMPLE_INPUT, run_id="r")


def desk(forecast: Any = desk_chart.weather) -> Debugger:
    agent = desk_chart.desk(ScriptedModel(list(desk_chart.script())), forecast)
    return Debugger.live(agent, desk_chart.EXAMPLE_INPUT, run_id="r")


def saved(debugger: Debugger) -> list[Any]:
    out = io.StringIO()
    debugger.save_trace(out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def held_seq(debugger: Debugger) -> int | None:
    """The seq of the followed run as it is held now (None when it is not held)."""
    assert debugger._live is not None
    held = debugger._live.gate.held(debugger.run.run_id)
    return None if held is None else held.seq


async def test_a_handoff_target_is_held_before_each_transition_released_one_by_one() -> None:
    debugger = triage()
    await debugger.step()
    assert debugger.runs_ahead() == ["r/2"]
    billing = await debugger.step_in_live()
    assert (billing.run.run_id, billing.run.agent.name, billing.position) == ("r/2", "billing", 0)
    assert debugger.in_flight and debugger.position == 1  # the handoff's step is in flight
    assert held_seq(billing) == 0 and not billing.finished
    assert billing.peek() is not None  # the row it will take, before it took it
    phases = []
    for seq in (1, 2, 3):
        step = await billing.step()
        assert step is not None and step.seq == seq
        assert held_seq(billing) == seq  # held again, before its next transition
        phases.append(step.state_after.phase)
    assert phases == ["CallingModel", "ExecutingTools", "CallingModel"]
    last = await billing.step()
    assert last is not None and last.state_after.phase == "Done" and billing.finished
    assert billing.conversation[-1].content == REFUND
    assert await billing.step() is None
    landed = await debugger.step()  # step out: the handoff's effect completes
    assert landed is not None and landed.state_after.phase == "ApplyingHandoff"
    assert not debugger.in_flight and debugger.nested_runs() == ["r/2"]
    stop = await debugger.continue_()
    assert (stop.reason, debugger.state.phase) == ("end", "Done")
    terminal = [e for s in debugger.history for e in s.events if e.type == "run_completed"]
    assert len(terminal) == 1


async def test_a_stepped_run_records_the_trace_an_unstepped_one_does() -> None:
    plain = triage()
    await plain.continue_()
    stepped = triage()
    await stepped.step()
    billing = await stepped.step_in_live()
    await billing.step()
    back = await billing.step()
    assert back is not None
    billing.back()  # stepping the followed run again replays what it recorded
    await billing.continue_()
    await stepped.continue_()
    assert saved(stepped) == saved(plain)


async def test_the_driver_hook_holds_a_nested_run_and_changes_nothing_it_records(
    tmp_path: Path,
) -> None:
    agent = TRIAGE.agent(ScriptedModel(list(TRIAGE.script())))
    free_path = tmp_path / "free.jsonl"
    with TraceWriter(free_path) as writer:
        free = Run(agent, input=TRIAGE.EXAMPLE_INPUT, run_id="r", trace=writer)
        free_events = [event async for event in free.stream()]

    agent = TRIAGE.agent(ScriptedModel(list(TRIAGE.script())))
    gated_path = tmp_path / "gated.jsonl"
    writer = TraceWriter(gated_path)
    gated = Run(agent, input=TRIAGE.EXAMPLE_INPUT, run_id="r", trace=writer)
    gate = StepGate()
    gate.hold("r/2")
    gated.stepper = gate

    async def drive() -> list[Any]:
        return [event async for event in gated.stream()]

    task = asyncio.create_task(drive())
    held = []
    while True:
        await gate.wait(lambda: gate.held("r/2") is not None or gate.has_ended("r/2"), task)
        child = gate.held("r/2")
        if child is None:
            break
        held.append(child.seq)
        gate.release("r/2")
    gated_events = await task
    writer.close()
    assert held == [0, 1, 2, 3]  # before each of billing's four transitions
    assert gate.has_ended("r/2")
    assert gated_path.read_text() == free_path.read_text()
    assert [e.type for e in gated_events] == [e.type for e in free_events]
    assert [type(e) for e in gated_events].count(RunCompleted) == 1


async def test_a_sibling_tool_runs_to_its_end_while_the_agent_tool_is_held() -> None:
    child_held = asyncio.Event()
    sibling_done = asyncio.Event()

    @tool(name="weather", read_only=True)
    async def forecast(city: str) -> str:
        """Today's weather.

        Args:
            city: the city.
        """
        await child_held.wait()  # it finishes only once the researcher is held
        sibling_done.set()
        return f"sunny in {city}"

    debugger = desk(forecast)
    await debugger.step()
    (child,) = debugger.runs_ahead()
    assert child == "r/2:call_research"
    researcher = await debugger.step_in_live(child)
    assert held_seq(researcher) == 0
    child_held.set()
    await asyncio.wait_for(sibling_done.wait(), 30)  # a guard against a hang, not a timing
    assert held_seq(researcher) == 0  # still held before its first transition
    assert researcher._live is not None and not researcher._live.task.done()
    stop = await researcher.continue_()
    assert (stop.reason, researcher.state.phase) == ("end", "Done")
    landed = await debugger.step()
    assert landed is not None
    results = {r.call_id: r.content for r in debugger.next_input.results}
    assert results["call_weather"] == "sunny in Lyon"
    stop = await debugger.continue_()
    assert debugger.state.output.text == desk_chart.ANSWER


async def test_nested_runs_nest_a_child_of_a_child_is_stepped_into() -> None:
    debugger = desk()
    await debugger.step()
    researcher = await debugger.step_in_live()
    await researcher.step()
    assert researcher.runs_ahead() == ["r/2:call_research/2:call_check"]
    checker = await researcher.step_in_live()
    assert (checker.run.agent.name, held_seq(checker)) == ("checker", 0)
    assert researcher.in_flight and held_seq(researcher) is None  # in its tool batch
    with pytest.raises(DebuggerError, match="step out first"):
        researcher.rewind(0)
    stop = await checker.continue_()
    assert (stop.reason, checker.state.output.text) == ("end", "Confirmed: 1834.")
    landed = await researcher.step()  # step out of the checker
    assert landed is not None and landed.state_after.phase == "ExecutingTools"
    assert held_seq(researcher) == 2 and researcher.nested_runs() == [
        "r/2:call_research/2:call_check"
    ]
    await researcher.continue_()
    assert researcher.state.output.text == "The bridge opened in 1834."
    await debugger.step()
    await debugger.continue_()
    assert debugger.state.output.text == desk_chart.ANSWER


async def test_step_out_lets_the_held_runs_go_to_their_end() -> None:
    debugger = desk()
    await debugger.step()
    researcher = await debugger.step_in_live()
    await researcher.step()
    await researcher.step_in_live()  # the checker, held; then straight out of both
    landed = await debugger.step()
    assert landed is not None and not debugger.in_flight
    assert debugger.nested_runs() == ["r/2:call_research"]
    await debugger.continue_()
    assert debugger.state.output.text == desk_chart.ANSWER


async def test_breakpoints_apply_inside_a_run_followed_live() -> None:
    debugger = triage()
    debugger.break_on("phase", "ExecutingTools")  # triage never enters it; billing does
    await debugger.step()
    billing = await debugger.step_in_live()
    assert [b.describe() for b in billing.breakpoints] == ["#1 phase ExecutingTools"]
    stop = await billing.continue_()
    assert (stop.reason, billing.position, billing.state.phase) == (
        "breakpoint",
        2,
        "ExecutingTools",
    )
    assert held_seq(billing) == 2


def _only_task() -> set[asyncio.Task[Any]]:
    return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}


@pytest.mark.parametrize("make", [triage, desk], ids=["handoff", "agent-as-tool"])
async def test_abandoning_a_held_run_cancels_it_cleanly(make: Any) -> None:
    debugger = make()
    await debugger.step()
    nested = await debugger.step_in_live()
    await nested.step()
    await debugger.abandon()
    assert not debugger.in_flight and _only_task() == set()
    # A handoff target and an agent called as a tool both apply the cancellation as their
    # input and end Failed(Cancelled). Nothing more follows.
    stop = await nested.continue_()
    assert (stop.reason, nested.finished, nested.state.phase) == ("end", True, "Failed")
    assert nested.state.error.kind == "cancelled"
    assert nested.position == 2
    await debugger.continue_()
    assert debugger.state.phase == "Failed" and debugger.state.error.kind == "cancelled"
    terminal = [
        e for s in debugger.history for e in s.events if isinstance(e, (RunCompleted, RunFailed))
    ]
    assert len(terminal) == 1


async def test_what_live_step_in_refuses() -> None:
    debugger = triage()
    assert debugger.runs_ahead() == []  # the first step calls the model only
    with pytest.raises(DebuggerError, match="no nested run starts at step 1"):
        await debugger.step_in_live()
    await debugger.step()
    with pytest.raises(DebuggerError, match="no nested run 'elsewhere' ahead; ahead: r/2"):
        await debugger.step_in_live("elsewhere")
    billing = await debugger.step_in_live()
    with pytest.raises(DebuggerError, match="followed as its parent's effect runs it"):
        billing.fork(None)
    assert debugger.runs_ahead() == []  # in flight
    await debugger.step()
    debugger.back()
    assert debugger.runs_ahead() == []  # recorded now: `step in` replays it after the step


# ---------------------------------------------------------------- the terminal debugger


def test_step_into_a_handoff_target_live_through_a_pipe() -> None:
    done = debug(
        str(TRIAGE_FILE),
        "--offline",
        commands="step\nstep in\nstep\nrow\nhistory\nstep out\ncontinue\n",
    )
    assert done.returncode == 0 and done.stderr == ""
    steps = blocks(done.stdout)
    run = steps[1][1].split("next step starts nested run ")[1].split("/2 ")[0]
    assert steps[1][1].endswith(
        f"next step starts nested run {run}/2 (`step in` steps into it live)"
    )
    assert steps[2] == (
        "step in",
        f"in nested run {run}/2 (billing, live, held before each transition; `step out` lets "
        f"it run to its end and returns to {run})\nat step 0; next input: start\n"
        "  user: I was charged twice for invoice INV-1042.\n"
        "  call call_handoff: transfer_to_billing({})\n"
        "  result call_handoff executed: transferred to billing",
    )
    assert steps[3][1].startswith("#1 CallingModel → CallingModel  on start")
    assert "call call_invoice: invoice" in steps[3][1]
    assert (
        "next (peek) row 10: CallingModel --model_response [has_tool_calls]--> Executing"
        in (steps[4][1])
    )
    assert steps[5][1].endswith("\nat step 1")  # no recorded length: it grows as it runs
    out = steps[6][1]
    assert out.startswith(f"up to run {run}\n#2 CallingModel → ApplyingHandoff")
    assert REFUND in out and f"nested: {run}/2 (`step in` opens it)" in out
    assert "#3 ApplyingHandoff → Done" in steps[7][1]


def test_step_into_an_agent_tool_and_its_own_agent_tool_through_a_pipe() -> None:
    done = debug(
        str(DESK_FILE),
        "--offline",
        commands="step\nstep in\nstep\nstep in\ncontinue\nstep out\ncontinue\nup\ncontinue\n",
    )
    assert done.returncode == 0 and done.stderr == ""
    steps = blocks(done.stdout)
    assert "(researcher, live, held before each transition;" in steps[2][1]
    assert "/2:call_research/2:call_check (`step in` steps into it live)" in steps[3][1]
    assert "(checker, live, held before each transition;" in steps[4][1]
    assert "✓ the run completed: Confirmed: 1834." in steps[5][1]
    assert "#2 CallingModel → ExecutingTools" in steps[6][1]  # the researcher's step lands
    assert "✓ the run completed: The bridge opened in 1834." in steps[7][1]
    assert "#2 CallingModel → ExecutingTools" in steps[8][1]  # up: the desk's step lands
    assert f"✓ the run completed: {desk_chart.ANSWER}" in steps[9][1]


def test_quitting_with_a_run_held_cancels_it_cleanly() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "helikon", "debug", str(DESK_FILE), "--offline"],
        input="step\nstep in\nstep\nstep in\nstep\nquit\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == ""
    assert "(checker, live, held before each transition;" in done.stdout


def test_the_prompt_names_the_nested_run_and_leaving_cancels_it() -> None:
    debugger = triage()
    with DebugShell(debugger, stdin=Terminal(), stdout=io.StringIO()) as shell:
        assert shell.prompt == "(hdb) "
        send(shell, "step", "step in")
        assert shell.prompt == "(hdb r/2) "
        assert "#1 CallingModel → CallingModel" in send(shell, "step")
    assert not debugger.in_flight and debugger.state.phase == "ApplyingHandoff"
    assert debugger.next_input.kind == "cancel"


@needs_tmux
def test_step_in_live_under_a_terminal(tmp_path: Path) -> None:
    command = f"{sys.executable} -m helikon debug {TRIAGE_FILE} --offline"
    with terminal(command, tmp_path, ROOT, _env(), width=200) as shell:
        shell.until("(hdb) ")
        shell.type_line("step")
        shell.until("(`step in` steps into it live)")
        shell.type_line("step in")
        shell.until("/2) ")  # the prompt names the nested run
        shell.type_line("step")
        shell.until("call call_invoice: invoice")
        shell.type_line("step out")
        shown = shell.until("#2 CallingModel → ApplyingHandoff")
        assert REFUND in shown
        shell.type_line("quit")


def test_in_the_shell_a_sibling_call_runs_on_between_commands() -> None:
    go, finished = threading.Event(), threading.Event()

    @tool(name="weather", read_only=True)
    async def forecast(city: str) -> str:
        """Today's weather.

        Args:
            city: the city.
        """
        await asyncio.to_thread(go.wait)
        finished.set()
        return f"sunny in {city}"

    debugger = desk(forecast)
    with DebugShell(debugger, stdin=io.StringIO(), stdout=io.StringIO()) as shell:
        send(shell, "step", "step in")
        researcher = shell.debugger
        assert held_seq(researcher) == 0
        go.set()  # between two commands: the sibling finishes by itself
        assert finished.wait(30)  # a guard against a hang, not a timing
        assert held_seq(researcher) == 0  # the researcher is still held
        out = send(shell, "continue", "step out")
        assert "✓ the run completed: The bridge opened in 1834." in out
    assert {r.call_id: r.content for r in debugger.next_input.results}["call_weather"] == (
        "sunny in Lyon"
    )


async def test_a_followed_run_that_suspends_is_answered_by_the_outer_run_not_here() -> None:
    @tool(needs_approval=True)
    def refund(amount: float) -> str:
        """Refund.

        Args:
            amount: how much.
        """
        return "refunded"

    model = ScriptedModel(
        [
            [ToolCall("call_handoff", "transfer_to_billing", "{}")],
            [ToolCall("call_refund", "refund", '{"amount": 49}')],
        ]
    )
    billing = Agent(name="billing", model=model, instructions="Refund.", tools=[refund])
    front = Agent(name="front", model=model, instructions="Hand off.", handoffs=[billing])
    debugger = Debugger.live(front, "refund me", run_id="r")
    await debugger.step()
    followed = await debugger.step_in_live()
    stop = await followed.continue_()
    assert (stop.reason, followed.run.suspended) == ("suspended", True)
    (request,) = followed.pending()
    with pytest.raises(DebuggerError, match="answered by the run it is nested in"):
        followed.decide([ApprovalDecision(request.call.call_id, request.arguments_hash, True)])
    assert await followed.step() is None
    landed = await debugger.step()
    assert landed is not None and debugger.next_input.error.kind == "cancelled"
