"""Terminal output is escaped: model text, tool output and what a trace file holds reach the
terminal with their control characters shown (`helikon.export.console.safe_text`), through
every printer (`helikon run`'s events, the approval prompt, `helikon debug`, `helikon trace`
on stdout), while helikon's own colour codes still work.

The hostile agent is `tests/hostile_chart.py`; the commands run as real subprocesses, the
approval prompt on a real pseudo-terminal.
"""

from __future__ import annotations

import io
import json
import os
import re
import select
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hostile_chart import C1_CSI, HOSTILE, PAYLOAD, SHOWN
from hypothesis import given
from hypothesis import strategies as st

from helikon.cli.loading import load_module
from helikon.core.errors import ToolFailed
from helikon.core.events import (
    AgentUpdated,
    ApprovalRequested,
    GuardrailTriggered,
    HandoffItem,
    MessageOutput,
    PermissionDenied,
    RepairStarted,
    RunFailed,
    RunStarted,
    TokenDelta,
    ToolCallDelta,
    ToolCallItem,
    ToolOutputItem,
)
from helikon.core.items import AssistantMessage, ToolCall, ToolResult
from helikon.debug.debugger import Debugger
from helikon.debug.repl import DebugShell
from helikon.export.console import EventPrinter, safe_text
from helikon.models.scripted import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_CHART = ROOT / "tests" / "hostile_chart.py"
TIMEOUT = 60.0

CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # every C0 and C1 control but \t, \n
OWN_COLOUR = re.compile(r"\x1b\[(?:0|[123]|3[1236])(?:;(?:[123]|3[1236]))*m")


def assert_escaped(text: str, *, colour: bool = False) -> None:
    """No control sequence of the payload reaches `text`; with `colour`, the only escape
    sequences left are helikon's own colour codes."""
    for raw in (HOSTILE, "\x1b]", "\x07", "\x1b[2J", "\x1b[31mred", "\x9b"):
        assert raw not in text, f"{raw!r} reached the terminal: {text!r}"
    left = OWN_COLOUR.sub("", text) if colour else text
    assert not CONTROLS.search(left), f"a control character reached the terminal: {left!r}"


# ---------------------------------------------------------------- safe_text


@pytest.mark.parametrize(
    ("text", "multiline", "shown"),
    [
        (HOSTILE, False, "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred"),
        (C1_CSI, False, "\\x9b2J"),
        ("a\x00b\x7fc\x85d", False, "a\\x00b\\x7fc\\x85d"),
        ("one\ntwo\tthree\r", False, "one\\ntwo\\tthree\\r"),
        ("one\ntwo\tthree", True, "one\ntwo\tthree"),
        ("crlf\r\nline\rover", True, "crlf\nline\\rover"),
        ("café → ✓ 🙂 \\x1b", False, "café → ✓ 🙂 \\x1b"),
    ],
)
def test_safe_text_shows_control_characters_visibly(text: str, multiline: bool, shown: str) -> None:
    assert safe_text(text, multiline=multiline) == shown


@given(st.text(), st.booleans())
def test_safe_text_leaves_no_control_character_and_is_idempotent(
    text: str, multiline: bool
) -> None:
    safe = safe_text(text, multiline=multiline)
    allowed = "\n\t" if multiline else ""
    assert all(c in allowed or not CONTROLS.match(c) for c in safe)
    assert safe_text(safe, multiline=multiline) == safe


# ---------------------------------------------------------------- helikon run's printer


def hostile_events() -> list[object]:
    call = ToolCall(f"c{PAYLOAD}", f"tool{PAYLOAD}", f'{{"q": "{PAYLOAD}"}}')
    return [
        RunStarted(f"agent{PAYLOAD}", f"run{PAYLOAD}"),
        TokenDelta(f"text {PAYLOAD}\nmore"),
        MessageOutput(AssistantMessage(f"answer {PAYLOAD}")),
        ToolCallDelta("c1", PAYLOAD, name=PAYLOAD),
        ToolCallItem(call),
        ToolOutputItem(ToolResult("c1", f"out {PAYLOAD}", is_error=True, status="errored")),
        HandoffItem(f"a{PAYLOAD}", f"b{PAYLOAD}"),
        AgentUpdated(f"b{PAYLOAD}"),
        GuardrailTriggered(f"g{PAYLOAD}", "output", f"info {PAYLOAD}"),
        ApprovalRequested("c1", f"tool{PAYLOAD}", f"args {PAYLOAD}", "hash"),
        PermissionDenied("c1", f"tool{PAYLOAD}", f"reason {PAYLOAD}"),
        RepairStarted(1, (f"error {PAYLOAD}",)),
        RunFailed(ToolFailed(f"tool{PAYLOAD}", "c1", f"message {PAYLOAD}")),
    ]


@pytest.mark.parametrize("colour", [False, True])
def test_the_event_printer_escapes_every_event(colour: bool) -> None:
    out = io.StringIO()
    printer = EventPrinter(out, colour)
    for event in hostile_events():
        printer(event)
    printed = out.getvalue()
    assert_escaped(printed, colour=colour)
    assert SHOWN in printed
    assert ("\x1b[1m● agent" in printed) is colour  # helikon's own colours still work


def helikon(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run(
        [sys.executable, "-m", "helikon", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "PYTHONIOENCODING": "utf-8"},
        timeout=TIMEOUT,
    )


def test_helikon_run_prints_the_hostile_run_escaped(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    done = helikon(
        "run", str(HOSTILE_CHART), "--offline", "--approve", "all", "--trace", str(trace)
    )
    assert done.returncode == 0, done.stderr
    assert_escaped(done.stdout + done.stderr)
    assert f"found {SHOWN}" in done.stdout
    assert "The weather:\n" + SHOWN + "\n\tdone" in done.stdout  # a message keeps its lines


# ---------------------------------------------------------------- the approval prompt


def on_a_terminal(args: list[str], answer: str) -> str:
    """Run `helikon ARGS` on a pseudo-terminal, type `answer` at the first `[y/N]` prompt,
    and return everything it wrote (line ends as "\\n")."""
    leader, follower = os.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR",)}
    env = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "helikon", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=ROOT,
        env={**env, "PYTHONIOENCODING": "utf-8", "TERM": "xterm"},
        start_new_session=True,
    )
    os.close(follower)
    seen = b""
    answered = False
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # EIO: the process closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and b"[y/N]" in seen:
                os.write(leader, answer.encode() + b"\n")
                answered = True
            if process.poll() is not None and not ready:
                break
        assert process.wait(TIMEOUT) == 0, seen
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    assert answered, f"no approval prompt: {seen!r}"
    return seen.decode().replace("\r\n", "\n")


def test_the_approval_prompt_shows_the_call_escaped() -> None:
    printed = on_a_terminal(["run", str(HOSTILE_CHART), "--offline", "--approve", "ask"], "y")
    prompt = next(line for line in printed.splitlines() if "[y/N]" in line)
    assert prompt.startswith("  approve lookup(") and "\\x9b2J" in prompt, prompt
    assert_escaped(printed, colour=True)
    assert "\x1b[1m●" in printed  # a terminal still gets helikon's colours


# ---------------------------------------------------------------- helikon debug


def test_the_debugger_prints_model_and_tool_text_escaped() -> None:
    commands = ["step", "step", "step", "step", "state", "conversation", "events all"]
    commands += ["history", "row", "continue", "quit"]
    done = helikon(
        "debug", str(HOSTILE_CHART), "--offline", "--approve", "all", stdin="\n".join(commands)
    )
    assert done.returncode == 0, done.stderr
    assert_escaped(done.stdout + done.stderr)
    assert SHOWN in done.stdout and "the run completed" in done.stdout


def test_the_debugger_in_colour_keeps_only_its_own_colour_codes() -> None:
    module = load_module(str(HOSTILE_CHART))
    agent = module.agent(ScriptedModel(list(module.script())))
    agent = replace(agent, on_approval=lambda request, context: True)
    out = io.StringIO()
    shell = DebugShell(
        Debugger.live(agent, module.EXAMPLE_INPUT), stdin=io.StringIO(), stdout=out, colour=True
    )
    with shell:
        shell.banner()
        for command in ("continue", "state", "conversation", "events all", "history"):
            shell.onecmd(shell.precmd(command))
    assert_escaped(out.getvalue(), colour=True)
    assert "\x1b[1m" in out.getvalue() and SHOWN in out.getvalue()


# ---------------------------------------------------------------- helikon trace on stdout


@pytest.mark.parametrize("fmt", ["md", "mermaid"])
def test_a_trace_rendered_to_stdout_is_escaped(tmp_path: Path, fmt: str) -> None:
    trace = tmp_path / "run.jsonl"
    recorded = helikon(
        "run", str(HOSTILE_CHART), "--offline", "--approve", "all", "--trace", str(trace)
    )
    assert recorded.returncode == 0, recorded.stderr
    done = helikon("trace", str(trace), "-f", fmt)
    assert done.returncode == 0, done.stderr
    assert_escaped(done.stdout)
    assert "\\x1b]0" in done.stdout  # (Mermaid swaps the ";" for a look-alike)
    # Written to a file, the rendering is left as it is: escaping is for terminals.
    assert helikon("trace", str(trace), "-f", fmt, "-o", str(tmp_path / "out")).returncode == 0
    assert "\x1b]0" in (tmp_path / "out").read_text()


def record_hostile(tmp_path: Path) -> Path:
    trace = tmp_path / "run.jsonl"
    done = helikon(
        "run", str(HOSTILE_CHART), "--offline", "--approve", "all", "--trace", str(trace)
    )
    assert done.returncode == 0, done.stderr
    return trace


def test_a_replay_of_a_hostile_trace_file_is_printed_escaped(tmp_path: Path) -> None:
    # A trace file is outside input too: here even its run id carries the payload.
    trace = record_hostile(tmp_path)
    header = json.loads(trace.read_text().splitlines()[0])
    hostile_id = json.dumps(f"run{PAYLOAD}")[1:-1]
    forged = tmp_path / "forged.jsonl"
    forged.write_text(trace.read_text().replace(header["run_id"], hostile_id))
    commands = ["step", "step", "fork approve", "history", "unfork", "continue", "state"]
    chart = ["--chart", str(HOSTILE_CHART)]  # forking computes steps: it needs the chart
    done = helikon("debug", "--trace", str(forged), *chart, stdin="\n".join(commands))
    assert done.returncode == 0, done.stderr
    assert_escaped(done.stdout + done.stderr)
    assert f"back to run run{SHOWN}" in done.stdout


def test_an_error_line_quoting_a_trace_file_is_escaped(tmp_path: Path) -> None:
    trace = record_hostile(tmp_path)
    lines = trace.read_text().splitlines()
    header = {**json.loads(lines[0]), "kind": HOSTILE}
    (tmp_path / "bad.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    done = helikon("trace", str(tmp_path / "bad.jsonl"), "-f", "md")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("helikon: ") and done.stderr.count("\n") == 1
    assert_escaped(done.stderr)
    assert "\\x1b]0;pwned" in done.stderr
