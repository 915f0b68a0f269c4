"""`helikon.debug.repl`: the terminal debugger, driven as a subprocess through a pipe and
in process through `cmd.Cmd.onecmd`."""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helikon.cli import main
from helikon.cli.debug import add_parser, command_debug
from helikon.cli.loading import load_module
from helikon.debug.debugger import Debugger
from helikon.debug.repl import DebugShell
from helikon.models.scripted import ScriptedModel
from helikon.run.config import RunContext
from helikon.testing import OpenAIServer, PlannedReply
from helikon.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent
BUDGET = ROOT / "charts" / "budget_assistant.py"
TRIAGE = ROOT / "charts" / "triage.py"
REFUND = "Invoice INV-1042 was paid twice; I have refunded 49.00 EUR to your card."
FINAL = "You spent 42.50 EUR on coffee, 12.50 EUR over your 30 EUR budget"


# ---------------------------------------------------------------- as a subprocess


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return {**env, "PYTHONIOENCODING": "utf-8"}


def debug(
    *args: str, commands: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "helikon", "debug", *args],
        input=commands,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**_env(), **(env or {})},
        timeout=120,
    )


def blocks(transcript: str) -> list[tuple[str, str]]:
    """The transcript as (command, its output) pairs; the banner is command ''."""
    found: list[tuple[str, list[str]]] = [("", [])]
    for line in transcript.splitlines():
        if line.startswith("(hdb) "):
            found.append((line.removeprefix("(hdb) "), []))
        else:
            found[-1][1].append(line)
    return [(command, "\n".join(lines)) for command, lines in found]


def record_triage(path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "helikon", "run", str(TRIAGE), "--offline", "--trace", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_a_live_session_through_a_pipe_reads_as_a_transcript() -> None:
    commands = [
        "break phase ExecutingTools",
        "continue",
        "state",
        "row",
        "conversation",
        "back 1",
        "step",
        "continue",
        "quit",
    ]
    done = debug(str(BUDGET), "--offline", commands="\n".join(commands) + "\n")
    assert done.returncode == 0
    assert done.stderr == ""
    assert "\x1b[" not in done.stdout  # piped: plain text
    got = blocks(done.stdout)
    assert [command for command, _ in got] == ["", *commands]
    banner, brk, cont, state, row, conv, back, step, cont2, _ = (out for _, out in got)

    assert "offline, the chart's scripted model" in banner
    assert "at step 0; next input: start\n  user: How am I doing on coffee this month?" in banner
    assert brk == "breakpoint #1 phase ExecutingTools"
    assert "#1 CallingModel → CallingModel  on start · row 4 start_turn" in cont
    assert "#2 CallingModel → ExecutingTools  on model_response · row 10 execute_tools" in cont
    assert '⚙ spending({"category": "coffee"})' in cont
    assert "■ stopped at breakpoint #1 phase ExecutingTools after step 2" in cont
    assert "at step 2; next input: tool_results" in cont
    assert state.splitlines()[0] == "ExecutingTools"
    assert '    call call_budget: budget({"category": "coffee"})' in state
    assert '"requests": 1' in state
    assert row.splitlines()[0].startswith("#2 took row 10: CallingModel --model_response")
    assert "  has_tool_calls      true" in row
    assert "  needs_approval      false" in row
    assert "next (peek) row 24: ExecutingTools --tool_results--> CallingModel" in row
    assert conv.splitlines() == [
        "0  user: How am I doing on coffee this month?",
        '1  call call_spent: spending({"category": "coffee"})',
        '2  call call_budget: budget({"category": "coffee"})',
    ]
    assert back.startswith("at step 1; next input: model_response [tool_calls]")
    again, at = step.splitlines()[0].split(" · at ")  # a subprocess: the system's clock
    assert again == "#2 CallingModel → ExecutingTools  on model_response · row 10 execute_tools"
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}, after \d+ ms", at), at
    assert "#3 ExecutingTools → CallingModel  on tool_results" in cont2
    assert "#4 CallingModel → Done  on model_response · row 13 complete" in cont2
    assert "✓ completed  2 model calls, 604 tokens" in cont2
    assert f"✓ the run completed: {FINAL}" in cont2


def test_a_replay_session_from_a_trace_helikon_run_recorded(tmp_path: Path) -> None:
    trace = tmp_path / "triage.jsonl"
    record_triage(trace)
    commands = ["history", "break tool invoice", "continue", "row", "c", "h", "step", "quit"]
    done = debug("--trace", str(trace), "--offline", commands="\n".join(commands) + "\n")
    assert done.returncode == 0, done.stderr
    banner, history, _, cont, row, cont2, history2, step, _ = (
        out for _, out in blocks(done.stdout)
    )

    assert f"replay of {trace} (3 steps, as recorded)" in banner
    assert "agent triage" in banner
    assert history == "0 of 3 recorded steps replayed"
    assert "#2 CallingModel → ApplyingHandoff  on model_response · row 8 apply_handoff" in cont
    assert "⇢ handoff triage → billing" in cont
    assert '⚙ invoice({"number": "INV-1042"})' in cont  # the handoff target's events
    assert "■ stopped at breakpoint #1 tool invoice after step 2" in cont
    assert "next input: handoff_result: output: Invoice INV-1042 was paid twice" in cont
    assert "  has_handoff         true" in row
    assert "#3 ApplyingHandoff → Done  on handoff_result" in cont2
    assert "✓ the run completed: Invoice INV-1042 was paid twice" in cont2
    assert history2.splitlines()[-1] == "3 of 3 recorded steps replayed"
    assert "diverged" not in done.stdout
    assert step == f"✓ the run completed: {REFUND}"


def test_a_saved_session_replays_with_the_chart_its_header_names(tmp_path: Path) -> None:
    saved = tmp_path / "saved.jsonl"
    live = debug(str(BUDGET), "--offline", commands=f"continue\nsave {saved}\n")
    assert f"saved 4 steps to {saved}" in live.stdout
    assert read_trace(saved).header.source == str(BUDGET)

    replay = debug("--trace", str(saved), "--offline", commands="continue\n")
    assert replay.returncode == 0, replay.stderr
    assert f"✓ the run completed: {FINAL}" in replay.stdout
    assert "diverged" not in replay.stdout


FORK_GOES_LIVE = (
    'break tool budget\ncontinue\nfork tool call_budget "{\\"left\\": 1}"\ncontinue\nquit\n'
)
NO_MODEL = (
    "helikon debug calls a real model: set OPENAI_API_KEY (or OPENAI_BASE_URL for an "
    "OpenAI-compatible server), or give --offline for the chart's scripted model"
)


def test_a_replays_fork_that_goes_live_calls_the_model_the_command_line_names(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "saved.jsonl"
    debug(str(BUDGET), "--offline", commands=f"continue\nsave {saved}\n")
    replay = ("--trace", str(saved), "--chart", str(BUDGET))

    # No model set up: the replay opens (it calls none); the fork's model call says so.
    unset = debug(*replay, commands=FORK_GOES_LIVE)
    assert unset.returncode == 0, unset.stderr
    assert f"✗ the run failed: ModelCallFailed(reason='unavailable', message=\"{NO_MODEL}\"" in (
        unset.stdout
    )
    assert "no turn" not in unset.stdout

    # --offline: the chart's script answers, after the turns the run has used.
    offline = debug(*replay, "--offline", commands=FORK_GOES_LIVE)
    assert "(4 steps)  (scripted model, --offline)" in offline.stdout.splitlines()[0]
    assert f"✓ the run completed: {FINAL}" in offline.stdout

    # A real model: the fork calls the server the environment names.
    with OpenAIServer([PlannedReply(text="From the wire.")]) as server:
        real = debug(*replay, commands=FORK_GOES_LIVE, env={"OPENAI_BASE_URL": server.base_url})
    assert "✓ the run completed: From the wire." in real.stdout, real.stderr
    assert len(server.requests) == 1


def test_eof_without_quit_ends_the_session_with_status_0() -> None:
    done = debug(str(BUDGET), "--offline", commands="step")
    assert done.returncode == 0
    assert blocks(done.stdout)[-1][0] == "step"
    assert "#1 CallingModel → CallingModel" in done.stdout


def test_a_mistaken_command_is_one_error_line_and_the_session_goes_on() -> None:
    done = debug(str(BUDGET), "--offline", commands="break phase Nowhere\nbreak\nstep\n")
    assert done.returncode == 0
    _, unknown, listing, step = blocks(done.stdout)
    assert unknown[1].splitlines() == [
        "error: no phase 'Nowhere' in this chart; phases: CallingModel, CheckingInput, "
        "ExecutingTools, NeedsApproval, ApplyingHandoff, Finalizing, RepairingOutput, "
        "CheckingOutput, Compacting, Done, Failed"
    ]
    assert listing[1] == "no breakpoints"
    assert step[1].startswith("#1 CallingModel → CallingModel")


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "helikon: cannot read trace {trace}: No such file or directory"),
        ("corrupt", "helikon: {trace}:2: not a valid trace line: "),
        ("other agent", "helikon: the trace was recorded on agent 'triage' with chart "),
        ("no chart", "helikon: name a chart to debug (helikon debug CHART) or a trace"),
    ],
)
def test_unusable_arguments_fail_with_one_line_and_status_2(
    tmp_path: Path, case: str, expected: str
) -> None:
    recorded = tmp_path / "recorded.jsonl"
    trace = tmp_path / "trace.jsonl"
    args = ["--trace", str(trace)]
    if case != "missing":
        record_triage(recorded)
    if case == "corrupt":
        trace.write_text(recorded.read_text().splitlines()[0] + "\n{not json\n")
    elif case == "other agent":
        trace.write_text(recorded.read_text())
        args += ["--chart", str(BUDGET)]
    elif case == "no chart":
        args = ["--offline"]
    done = debug(*args, commands="quit\n")
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(expected.format(trace=trace))


def test_main_reports_errors_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["debug", "--trace", "/nonexistent/trace.jsonl"]) == 2
    assert capsys.readouterr().err == (
        "helikon: cannot read trace /nonexistent/trace.jsonl: No such file or directory\n"
    )


def test_add_parser_wires_the_debug_command() -> None:
    top = argparse.ArgumentParser(prog="helikon")
    add_parser(top.add_subparsers(dest="command", required=True))
    args = top.parse_args(["debug", "--trace", "t.jsonl", "--chart", "c.py"])
    assert (args.handler, args.trace, args.replay_chart, args.chart) == (
        command_debug,
        "t.jsonl",
        "c.py",
        None,
    )
    live = top.parse_args(["debug", "charts/triage.py", "--input", "hi", "--offline"])
    assert (live.chart, live.input, live.offline, live.trace) == (
        "charts/triage.py",
        "hi",
        True,
        None,
    )


# ---------------------------------------------------------------- in process


def budget_debugger(turns: list[Any] | None = None) -> tuple[Debugger, list[Any]]:
    module = load_module(str(BUDGET))
    script = list(module.script()) if turns is None else turns
    agent = module.agent(ScriptedModel(script))
    return Debugger.live(agent, module.EXAMPLE_INPUT, context=RunContext(module.deps())), script


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def shell() -> Iterator[DebugShell]:
    debugger, script = budget_debugger()
    with DebugShell(debugger, script=script, stdin=io.StringIO(), stdout=io.StringIO()) as it:
        yield it


def send(shell: DebugShell, *lines: str) -> str:
    """Run `lines` as the loop would (precmd, onecmd); the output they printed."""
    out = shell.stdout
    assert isinstance(out, io.StringIO)
    out.seek(0)
    out.truncate()
    for line in lines:
        shell.onecmd(shell.precmd(line))
    return out.getvalue()


def test_commands_read_from_a_pipe_are_echoed_and_comments_skipped(shell: DebugShell) -> None:
    assert shell.prompt == ""
    assert send(shell, "# a note", "s").splitlines()[:3] == [
        "(hdb) # a note",
        "(hdb) s",
        "#1 CallingModel → CallingModel  on start · row 4 start_turn · at 00:00:00.000",
    ]


def test_aliases_and_quit(shell: DebugShell) -> None:
    assert "breakpoint #1 guard has_tool_calls" in send(shell, "b guard has_tool_calls")
    assert "stopped at breakpoint #1 guard has_tool_calls after step 2" in send(shell, "c")
    assert "#2 CallingModel → ExecutingTools" in send(shell, "h")
    assert "0  user: How am I doing" in send(shell, "conv")
    assert "deleted breakpoint #1" in send(shell, "d 1")
    assert shell.onecmd(shell.precmd("q")) is True
    assert shell.onecmd("EOF") is True


def test_next_stops_when_a_turn_starts(shell: DebugShell) -> None:
    first = send(shell, "n")
    assert "■ a new turn started at step 1" in first
    second = send(shell, "next")
    assert "#3 ExecutingTools → CallingModel" in second
    assert "■ a new turn started at step 3" in second


def test_event_breakpoints_and_events_of_every_step(shell: DebugShell) -> None:
    assert "error: no event type 'nope'; types: run_started," in send(shell, "break event nope")
    send(shell, "break event run_completed")
    out = send(shell, "continue")
    assert "■ stopped at breakpoint #1 event run_completed after step 4" in out
    last = send(shell, "events")
    assert last.splitlines()[1].startswith("#4 CallingModel → Done")
    assert "✓ completed" in last
    every = send(shell, "events all")
    assert [line[:2] for line in every.splitlines() if line.startswith("#")] == [
        "#1",
        "#2",
        "#3",
        "#4",
    ]
    assert '… streaming: "You spent 42.50 EUR' in every


def test_row_before_any_step_peeks_the_first(shell: DebugShell) -> None:
    out = send(shell, "row").splitlines()
    assert out[1:3] == [
        "no step taken yet",
        "next (peek) row 4: CallingModel --start--> CallingModel (start_turn)",
    ]


def test_breakpoints_list_and_delete(shell: DebugShell) -> None:
    send(shell, "break phase Done", "break tool budget")
    assert send(shell, "break").splitlines()[1:] == ["#1 phase Done", "#2 tool budget"]
    assert "error: no breakpoint #7" in send(shell, "delete 7")
    assert "error: expected a number, got 'x'" in send(shell, "delete x")
    send(shell, "delete #1")
    assert send(shell, "break").splitlines()[1:] == ["#2 tool budget"]
    assert "error: usage: break phase NAME" in send(shell, "break predicate x")


def test_fork_with_a_tool_result_then_unfork(shell: DebugShell) -> None:
    send(shell, "break phase ExecutingTools", "continue")
    out = send(shell, 'fork tool call_budget "{\\"left\\": 100}"')
    assert "forked at step 2: run " in out
    assert "breakpoints carried over: #1 phase ExecutingTools\n" in out
    assert send(shell, "break").splitlines()[1:] == ["#1 phase ExecutingTools"]  # once
    assert '  result call_budget executed: {"left": 100}' in out
    assert f"✓ the run completed: {FINAL}" in send(shell, "continue")  # the script's 2nd turn
    assert '4  result call_budget executed: {"left": 100}' in send(shell, "conv")
    back = send(shell, "unfork")
    assert "back to run " in back
    assert "at step 2; next input: tool_results" in back
    assert '"left":-12.5' in back
    assert send(shell, "history").splitlines()[-1] == "at step 2"


def test_fork_with_a_text_answer_and_given_turns(shell: DebugShell) -> None:
    send(shell, "step")
    send(shell, 'fork text "Just fine."')
    assert "✓ the run completed: Just fine." in send(shell, "continue")
    send(shell, "unfork", "step")
    send(shell, 'fork tool call_spent "0 EUR" then "All good."')
    done = send(shell, "continue")
    assert "✓ the run completed: All good." in done
    assert "3  result call_spent executed: 0 EUR" in send(shell, "conv")


@pytest.mark.parametrize(
    ("steps", "command", "error"),
    [
        (0, 'fork text "hi"', "the first step applies the user's input"),
        (1, 'fork tool call_spent "x"', "at step 1 the run waits for a model answer (`fork text`)"),
        (
            2,
            'fork text "hi"',
            "at step 2 the run waits for tool results (`fork tool`), not a model answer",
        ),
        (2, 'fork tool call_nope "x"', "no pending call 'call_nope'; pending: call_spent"),
        (2, "fork tool call_spent", 'usage: fork text "ANSWER"'),
        (2, 'fork text "a" "b"', 'usage: fork text "ANSWER"'),
        (2, 'fork tool call_spent "x" then', 'usage: fork text "ANSWER"'),
        (4, 'fork text "hi"', "the run is over here"),
        (0, 'fork text "unclosed', "cannot read the arguments: No closing quotation"),
    ],
)
def test_fork_refuses_what_does_not_fit(
    shell: DebugShell, steps: int, command: str, error: str
) -> None:
    send(shell, *["step"] * steps)
    assert f"error: {error}" in send(shell, command)
    assert shell.origins == []


def test_back_rewind_and_step_at_the_end(shell: DebugShell) -> None:
    send(shell, "continue")
    assert f"✓ the run completed: {FINAL}" in send(shell, "step")
    assert "at step 2; next input: tool_results" in send(shell, "back 2")
    assert "at step 0; next input: start" in send(shell, "rewind 0")
    assert "error: cannot rewind to step 3: the run has taken 0" in send(shell, "rewind 3")
    assert "error: usage: rewind K" in send(shell, "rewind")
    assert "#1 CallingModel → CallingModel" in send(shell, "step")


def test_save_writes_a_trace(shell: DebugShell, tmp_path: Path) -> None:
    send(shell, "continue")
    assert f"saved 4 steps to {tmp_path / 't.jsonl'}" in send(shell, f"save {tmp_path / 't.jsonl'}")
    assert len(read_trace(tmp_path / "t.jsonl").transitions()) == 4
    missing = tmp_path / "no" / "t.jsonl"
    assert f"error: cannot write {missing}: No such file or directory" in send(
        shell, f"save {missing}"
    )


def test_help_and_usage_errors(shell: DebugShell) -> None:
    listing = send(shell, "help")
    for command in ("step", "next", "continue", "break", "delete", "state", "conversation"):
        assert f"{command}" in listing
    assert send(shell, "help s").splitlines()[1].startswith("s, step [live | in [RUN] | out]:")
    assert 'fork text "ANSWER" [then "TEXT" ...]' in send(shell, "help fork")
    assert "error: no command 'nope'" in send(shell, "help nope")
    assert "error: unknown command 'frobnicate'" in send(shell, "frobnicate")
    assert "error: state takes no argument" in send(shell, "state now")
    assert "error: step takes only `live`" in send(shell, "step twice")


def test_completion_offers_kinds_and_the_charts_names(shell: DebugShell) -> None:
    assert shell.complete_break("", "break ", 6, 6) == ["phase", "event", "tool", "guard"]
    assert shell.complete_break("Exec", "b phase Exec", 8, 12) == ["ExecutingTools"]
    assert shell.complete_break("", "break tool ", 11, 11) == ["budget", "spending"]
    assert shell.complete_break("has_t", "break guard has_t", 12, 17) == ["has_tool_calls"]
    assert shell.complete_break("run_c", "break event run_c", 12, 17) == ["run_completed"]
    assert shell.completenames("co") == ["continue", "conversation", "conv"]
    assert shell.complete_events("a", "events a", 7, 8) == ["all"]
    send(shell, "step", "step")
    assert shell.complete_fork("", "fork tool ", 10, 10) == ["call_spent", "call_budget"]
    assert shell.complete_fork("te", "fork te", 5, 7) == ["text"]


def test_colour_on_a_terminal_unless_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    debugger, _ = budget_debugger()
    with DebugShell(debugger, stdin=io.StringIO(), stdout=Terminal()) as coloured:
        assert "\x1b[1m#1\x1b[0m CallingModel" in send(coloured, "step")
    monkeypatch.setenv("NO_COLOR", "1")
    debugger, _ = budget_debugger()
    with DebugShell(debugger, stdin=io.StringIO(), stdout=Terminal()) as plain:
        assert "\x1b[" not in send(plain, "step")


def test_a_terminal_gets_a_prompt_and_no_echo() -> None:
    debugger, _ = budget_debugger()
    with DebugShell(debugger, stdin=Terminal(), stdout=io.StringIO()) as shell:
        assert (shell.prompt, shell.use_rawinput) == ("(hdb) ", True)
        assert not send(shell, "history").startswith("(hdb)")


def test_an_interrupted_step_is_undone() -> None:
    def interrupt(request: Any) -> str:
        raise KeyboardInterrupt  # ^C while the model is answering the first step

    debugger, _ = budget_debugger([interrupt, "Fine."])
    with DebugShell(debugger, stdin=io.StringIO(), stdout=io.StringIO()) as cut:
        assert "interrupted: back at step 0" in send(cut, "step")
        assert (cut.debugger.position, cut.debugger.run.seq) == (0, 0)
        assert cut.debugger.next_input.kind == "start"
        assert "✓ the run completed: Fine." in send(cut, "continue")


def test_run_reads_commands_until_eof() -> None:
    debugger, script = budget_debugger()
    commands = io.StringIO("step\nstate\n")
    out = io.StringIO()
    with DebugShell(debugger, script=script, title="test", stdin=commands, stdout=out) as shell:
        assert shell.run() == 0
    text = out.getvalue()
    assert text.startswith("helikon debug: test\n")
    assert "(hdb) step\n#1 CallingModel" in text
    assert "(hdb) state\nCallingModel" in text


def test_an_effects_result_forks_as_json() -> None:
    module = load_module(str(ROOT / "charts" / "retrieve_answer.py"))
    script = list(module.script())
    debugger = Debugger.live(module.agent(ScriptedModel(script)), module.EXAMPLE_INPUT)
    with DebugShell(debugger, script=script, stdin=io.StringIO(), stdout=io.StringIO()) as shell:
        send(shell, "step")
        assert "error: at step 1 the run waits for an effect's result (`fork effect`)" in send(
            shell, 'fork text "x"'
        )
        assert "error: an effect's result is a JSON value; got '{nope'" in send(
            shell, "fork effect {nope"
        )
        assert "got 'NaN'" in send(shell, "fork effect NaN")
        assert shell.complete_fork("e", "fork e", 5, 6) == ["effect"]
        forked = send(shell, 'fork effect "{\\"passages\\": [\\"none\\"]}"', "continue")
        assert "forked at step 1: run " in forked and "✓ completed" in forked
        assert 'Result of retrieve: {"passages": ["none"]}' in send(shell, "conv")
        assert '"passages": [{"text": "Expenses over 500' in send(
            shell, "unfork", "continue", "conv"
        )


def test_a_suspended_run_forks_with_approval_decisions() -> None:
    module = load_module(str(ROOT / "charts" / "approval_gated.py"))
    script = list(module.script())
    debugger = Debugger.live(module.agent(ScriptedModel(script)), module.EXAMPLE_INPUT)
    with DebugShell(debugger, script=script, stdin=io.StringIO(), stdout=io.StringIO()) as shell:
        assert "⏸ suspended: waiting for approval of transfer" in send(shell, "continue")
        assert "error: at step 4 the run waits for approval decisions" in send(
            shell, 'fork text "x"'
        )
        assert shell.complete_fork("", "fork approve ", 13, 13) == ["call_transfer"]
        assert "next input: approval_decisions: call_transfer approved" in send(
            shell, "fork approve"
        )
        assert "✓ completed" in send(shell, "continue")
        send(shell, "unfork")
        rejected = send(shell, 'fork reject call_transfer then "Not moved."', "continue")
        assert "next input: approval_decisions: call_transfer rejected" in rejected
        assert "✓ the run completed: Not moved." in rejected
        assert "error: no pending call 'nope'" in send(shell, "unfork", "fork approve nope")
