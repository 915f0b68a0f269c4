"""Traces are hostile input: opening one executes nothing, and a broken one fails in one line.

Every consumer is tried as a user runs it (`helikon trace`, `diagram --trace`, `debug --trace`,
`studio --trace`, `read_trace`, `ReplayModel.from_trace`): a trace whose header names a module
that would run code, a line nested 200,000 deep, text with a lone surrogate, a row that is not
the chart's. None imports what the trace names; none prints a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helikon import ReplayModel
from helikon.trace import TraceError, read_trace

ROOT = Path(__file__).resolve().parent.parent
TRIAGE = ROOT / "charts" / "triage.py"


def helikon(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run(
        [sys.executable, "-m", "helikon", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "PYTHONIOENCODING": "utf-8"},
        timeout=120,
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace of the triage chart's scripted run (a handoff: two runs in one file)."""
    path = tmp_path_factory.mktemp("recorded") / "triage.jsonl"
    done = helikon("run", str(TRIAGE), "--offline", "--trace", str(path))
    assert done.returncode == 0, done.stderr
    return path


def edited(recorded: Path, target: Path, edit: Callable[[list[dict]], None]) -> Path:
    lines = [json.loads(text) for text in recorded.read_text().splitlines()]
    edit(lines)
    target.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return target


# ---------------------------------------------------------------- nothing is executed


def booby_trapped(recorded: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The recorded trace, its header's `source` naming a chart file that leaves a marker
    when imported (and would be a working chart, so a consumer has every reason to use it)."""
    marker = tmp_path / "imported"
    evil = tmp_path / "evil_chart.py"
    trap = f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
    future = "from __future__ import annotations\n"
    evil.write_text(TRIAGE.read_text().replace(future, future + trap, 1))

    def point_at_evil(lines: list[dict]) -> None:
        lines[0]["source"] = str(evil)

    return edited(recorded, tmp_path / "trap.jsonl", point_at_evil), marker


CONSUMERS = {
    "trace html": lambda t: helikon("trace", str(t), "-f", "html", "-o", os.devnull),
    "trace md": lambda t: helikon("trace", str(t), "-f", "md"),
    "trace mermaid": lambda t: helikon("trace", str(t), "-f", "mermaid"),
    "debug": lambda t: helikon("debug", "--trace", str(t), stdin="continue\nquit\n"),
}


@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_opening_a_trace_imports_nothing_it_names(
    recorded: Path, tmp_path: Path, consumer: str
) -> None:
    trap, marker = booby_trapped(recorded, tmp_path)
    done = CONSUMERS[consumer](trap)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists(), f"`{consumer}` imported the module the trace's header names"


def test_the_studio_opens_a_trace_without_importing_what_it_names(
    recorded: Path, tmp_path: Path
) -> None:
    trap, marker = booby_trapped(recorded, tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "helikon", "studio", "--trace", str(trap), "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
    assert line.startswith("helikon studio: http://127.0.0.1:"), errors
    assert not marker.exists(), "`studio --trace` imported the module the trace's header names"


def test_debug_steps_a_trace_alone_and_refuses_what_needs_its_chart(recorded: Path) -> None:
    done = helikon("debug", "--trace", str(recorded), stdin="step\nfork text hi\ncontinue\nquit\n")
    assert done.returncode == 0, done.stderr
    assert "✓ the run completed" in done.stdout
    assert "give the chart the run used (--chart CHART)" in done.stdout


# ---------------------------------------------------------------- broken traces, one line


def nested_too_deep(lines: list[dict]) -> None:
    lines[1]["input"] = "PLACEHOLDER"


def with_row(index: int) -> Callable[[list[dict]], None]:
    def edit(lines: list[dict]) -> None:
        next(line for line in lines if line["kind"] == "transition")["row"]["index"] = index

    return edit


def with_forged_chart(lines: list[dict]) -> None:
    lines[0]["table"]["rows"][0]["target"] = "Done"  # the recorded chart no longer hashes


def write_hostile(recorded: Path, tmp_path: Path, case: str) -> Path:
    target = tmp_path / f"{case}.jsonl"
    if case == "nested":
        edited(recorded, target, nested_too_deep)
        deep = "[" * 200_000 + "]" * 200_000
        target.write_text(target.read_text().replace('"PLACEHOLDER"', deep, 1))
        return target
    edits = {"row 9999": with_row(9999), "row -1": with_row(-1), "forged chart": with_forged_chart}
    return edited(recorded, target, edits[case])


HOSTILE = {
    "nested": "2: not a valid trace line: nested too deeply",
    "row 9999": ": row.index: 9999 is not a row of chart 'AgentLoopChart'",
    "row -1": ": row.index: -1 is not a row of chart 'AgentLoopChart'",
    "forged chart": "1: header.table: the recorded chart's digest is ",
}
COMMANDS = {
    "trace html": ("trace", "{t}", "-f", "html", "-o", os.devnull),
    "trace md": ("trace", "{t}", "-f", "md"),
    "trace mermaid": ("trace", "{t}", "-f", "mermaid"),
    "diagram": ("diagram", "default", "-f", "dot", "--trace", "{t}"),
    "debug": ("debug", "--trace", "{t}"),
    "studio": ("studio", "--trace", "{t}", "--port", "0"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_broken_trace_fails_in_one_line_naming_the_line_and_field(
    recorded: Path, tmp_path: Path, case: str, command: str
) -> None:
    trace = write_hostile(recorded, tmp_path, case)
    done = helikon(*(arg.format(t=trace) for arg in COMMANDS[command]), stdin="quit\n")
    assert done.returncode == 2, done.stdout
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"helikon: {trace}:"), done.stderr
    assert HOSTILE[case] in done.stderr


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_read_trace_and_replay_model_refuse_a_broken_trace(
    recorded: Path, tmp_path: Path, case: str
) -> None:
    trace = write_hostile(recorded, tmp_path, case)
    with pytest.raises(TraceError, match=HOSTILE[case].replace("(", r"\(").replace(")", r"\)")):
        read_trace(trace)
    with pytest.raises(TraceError):
        ReplayModel.from_trace(trace)


def with_lone_surrogate(lines: list[dict]) -> None:
    """The user's question and the triage answer's text get a lone surrogate (a JSON
    `\\ud800` escape)."""
    start = next(line for line in lines if line["kind"] == "transition")
    start["input"]["items"][0]["content"] = "\ud800" + start["input"]["items"][0]["content"]
    for line in lines:
        for event in line.get("events", ()):
            if event["type"] == "message_output":
                event["item"]["content"] = "\ud800" + event["item"]["content"]
        for item in line.get("appends", ()):
            if item["type"] == "assistant_message":
                item["content"] = "\ud800" + item["content"]


@pytest.mark.parametrize("fmt", ["html", "md", "mermaid"])
def test_a_lone_surrogate_renders_escaped(recorded: Path, tmp_path: Path, fmt: str) -> None:
    """Helikon itself records what a provider sends, lone surrogates included; rendering
    shows one as `\\ud800` instead of failing to encode it."""
    trace = edited(recorded, tmp_path / "surrogate.jsonl", with_lone_surrogate)
    out = tmp_path / f"out.{fmt}"
    done = helikon("trace", str(trace), "-f", fmt, "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "\\ud800" in out.read_text(encoding="utf-8")
    printed = helikon("trace", str(trace), "-f", fmt)
    assert printed.returncode == 0, printed.stderr
    assert "\\ud800" in printed.stdout


def test_a_trace_of_the_previous_format_is_refused_by_version(
    recorded: Path, tmp_path: Path
) -> None:
    def version_1(lines: list[dict]) -> None:
        lines[0]["version"] = 1
        del lines[0]["table"]

    old = edited(recorded, tmp_path / "v1.jsonl", version_1)
    with pytest.raises(TraceError, match=r"v1.jsonl:1: trace version 1 is not supported"):
        read_trace(old)
