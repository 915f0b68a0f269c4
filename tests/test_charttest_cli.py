"""`helikon test`, `helikon coverage` and `helikon diagram --coverage`, through `main(argv)`
and as real subprocesses; the module `--emit-pytest` writes, run under pytest."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helikon import DEFAULT_TABLE, Agent, ScriptedModel, ToolCall, tool
from helikon.charttest import emit
from helikon.cli import main
from helikon.cli.chart_tests import subject_for
from helikon.cli.loading import load_module
from helikon.export import TraceOverlay, chart_to_dot, chart_to_mermaid

ROOT = Path(__file__).resolve().parent.parent
CHARTS = (
    "default",
    "charts/budget_assistant.py",
    "charts/triage.py",
    "charts/plan_act.py",
    "charts/retrieve_answer.py",
)
POLITE_TEST = ROOT / "tests" / "test_charttest_paths.py"


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("helikon: "), err
    return lines[0]


def polite_chart(tmp_path: Path, *, witnesses: bool) -> str:
    """The custom-guard chart of tests/test_charttest_paths.py, as a file."""
    paths = load_module(str(POLITE_TEST))
    source = paths.POLITE_CHART + (paths.WITNESSES if witnesses else "")
    path = tmp_path / ("polite.py" if witnesses else "impolite.py")
    path.write_text(source, encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- helikon test


@pytest.mark.parametrize(
    "chart",
    [
        *CHARTS,
        "charts/approval_gated.py",
        "charts.plan_act",
        "charts/retrieve_answer.py:RetrieveAnswerChart",  # a bare agent: its effects are probes
    ],
)
def test_test_covers_every_declared_row_and_exits_0(
    capsys: pytest.CaptureFixture[str], chart: str
) -> None:
    code, out, err = cli(capsys, "test", chart)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"{chart}: chart ")
    assert lines[2].split() == [
        "row",
        "from",
        "input",
        "guards",
        "checked",
        "hits",
        "via",
        "context",
    ]
    declared = next(line for line in lines if line.startswith("declared rows: "))
    total = declared.split()[4]
    assert declared.startswith(f"declared rows: {total} of {total} covered (")
    assert "1 over transition only" in declared
    assert "targets without a witness: none" in lines
    assert lines[-1] == "gaps: none"


def test_test_says_duplicate_call_ids_is_covered_over_transition_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = cli(capsys, "test", "default")
    row = next(line for line in out.splitlines() if "duplicate_call_ids" in line)
    assert row.split()[:7] == [
        "7",
        "CallingModel",
        "model_response",
        "duplicate_call_ids",
        "FFT",
        "1",
        "transition",
    ]
    note = next(line for line in out.splitlines() if line.startswith("  1: "))
    assert "stream assembler merges fragments by call id" in note


def test_test_of_a_custom_guard_without_a_witness_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = cli(capsys, "test", polite_chart(tmp_path, witnesses=False))
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert "targets without a witness: 2 (listed under gaps)" in lines
    assert "  - row 1 (CallingModel model_response, T): no witness makes rude true" in lines
    assert "  - row 2 (CallingModel model_response, F): no witness makes rude false" in lines
    assert [line.split()[6] for line in lines[3:6]] == ["driver", "MISSED", "MISSED"]


def test_test_of_a_custom_guard_with_its_witnesses_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = cli(capsys, "test", polite_chart(tmp_path, witnesses=True))
    assert code == 0, out
    assert out.splitlines()[-1] == "gaps: none"


@pytest.mark.parametrize(
    ("chart", "message"),
    [
        ("charts/nope.py", "no such file: charts/nope.py"),
        ("charts/triage.py:nope", "charts/triage.py has no attribute 'nope'"),
        ("charts/triage.py:EXAMPLE_INPUT", "is not a chart, a compiled table, an agent"),
    ],
)
def test_test_of_what_is_not_a_chart_is_one_line(
    capsys: pytest.CaptureFixture[str], chart: str, message: str
) -> None:
    code, out, err = cli(capsys, "test", chart)
    assert (code, out) == (2, "")
    assert message in error_line(err)


# ---------------------------------------------------------------- --emit-pytest


def pytest_run(*files: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, files)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_emitted_modules_run_the_same_paths_and_pass_under_pytest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    emitted = []
    for chart in ("default", "charts/triage.py", polite_chart(tmp_path, witnesses=True)):
        target = tmp_path / "emitted" / f"test_{Path(chart).stem}_chart.py"
        target.parent.mkdir(exist_ok=True)
        code, _, _ = cli(capsys, "test", chart, "--emit-pytest", str(target))
        assert code == 0
        emitted.append(target)
    text = emitted[1].read_text(encoding="utf-8")
    assert text.startswith('"""Chart tests of charts/triage.py (chart AgentLoopChart, ')
    assert "Generated by `helikon test charts/triage.py --emit-pytest " in text
    assert "CHART = str(HERE / " in text  # the chart file, named from where the module is
    done = pytest_run(*emitted, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    paths = sum(module.read_text().count("'id': ") for module in emitted)
    assert f"{paths + 3} passed" in done.stdout  # every path, and each module's implicit rows


def test_an_emitted_module_refuses_a_changed_chart(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    chart = polite_chart(tmp_path, witnesses=True)
    target = tmp_path / "test_polite_chart.py"
    assert cli(capsys, "test", chart, "--emit-pytest", str(target))[0] == 0
    module = load_module(str(target))
    emit.bench_for(subject_for(module.CHART), module.DIGEST)  # as generated: accepted
    source = Path(chart).read_text(encoding="utf-8")
    Path(chart).write_text(source.replace('cond="rude"', 'unless="rude"'), encoding="utf-8")
    with pytest.raises(AssertionError, match="regenerate them with helikon test"):
        emit.bench_for(subject_for(module.CHART), module.DIGEST)


# ---------------------------------------------------------------- helikon coverage


@tool(read_only=True)
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: what to look for.
    """
    return f"found {query}"


def record(path: Path, turns: list[Any]) -> str:
    agent = Agent(name="agent", model=ScriptedModel(turns), tools=[lookup])
    asyncio.run(agent.run("Hello.", trace=path).collect())
    return str(path)


@pytest.fixture
def traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    plan_act = tmp_path / "plan_act.jsonl"
    argv = ["run", "charts/plan_act.py", "--offline", "--trace", str(plan_act)]
    assert main(argv) == 0
    capsys.readouterr()
    return {
        "text": record(tmp_path / "text.jsonl", ["Hi."]),
        "tools": record(
            tmp_path / "tools.jsonl", [[ToolCall("c1", "lookup", '{"query": "x"}')], "Done."]
        ),
        "plan_act": str(plan_act),
    }


def rows_of(out: str) -> dict[str, list[str]]:
    """The table's lines by row index (the first cell)."""
    lines = out.splitlines()
    cells = [line.split() for line in lines[3:]]
    return {row[0]: row for row in cells if row and row[0].isdigit()}


def test_coverage_merges_the_rows_of_two_traces(
    capsys: pytest.CaptureFixture[str], traces: dict[str, str]
) -> None:
    code, out, err = cli(capsys, "coverage", traces["text"], traces["tools"], "--chart", "default")
    assert (code, err) == (1, "")  # most rows are still uncovered: a gap
    assert (
        out.splitlines()[0]
        == f"default: chart AgentLoopChart ({DEFAULT_TABLE.digest[:12]}), 2 traces"
    )
    hit = {row: cells[5] for row, cells in rows_of(out).items() if cells[6] == "trace"}
    assert hit == {
        "4": "2",
        "10": "1",
        "13": "2",
        "24": "1",
    }  # start, tool calls, answer, next turn
    assert "declared rows: 4 of 53 covered (4 in traces)" in out
    assert "guard outcomes: 4 of 53 checked sequences covered" in out
    assert "  - row 5 (CallingModel model_response, T): no run took it" in out


def test_coverage_refuses_a_trace_of_another_chart(
    capsys: pytest.CaptureFixture[str], traces: dict[str, str]
) -> None:
    code, out, err = cli(
        capsys, "coverage", traces["text"], traces["plan_act"], "--chart", "default"
    )
    assert (code, out) == (2, "")
    line = error_line(err)
    assert line.startswith(f"helikon: {traces['plan_act']} was recorded on chart PlanActChart (")
    assert line.endswith(f"not on chart AgentLoopChart ({DEFAULT_TABLE.digest[:12]})")


def test_coverage_of_a_chart_file_counts_its_own_rows(
    capsys: pytest.CaptureFixture[str], traces: dict[str, str]
) -> None:
    code, out, _ = cli(capsys, "coverage", traces["plan_act"], "--chart", "charts/plan_act.py")
    assert code == 1
    assert "start_planning" not in out  # rows are shown by their guards, not their actions
    assert rows_of(out)["0"][1] == "Planning"


# ---------------------------------------------------------------- helikon diagram --coverage


def test_diagram_draws_the_rows_no_trace_took_as_uncovered(
    capsys: pytest.CaptureFixture[str], traces: dict[str, str]
) -> None:
    argv = ["diagram", "default", "--coverage", traces["text"], traces["tools"]]
    code, dot, _ = cli(capsys, *argv, "-f", "dot")
    assert code == 0
    overlay = TraceOverlay.for_coverage(DEFAULT_TABLE, {4: 2, 10: 1, 13: 2, 24: 1})
    assert dot == chart_to_dot(DEFAULT_TABLE, overlay)
    assert "AgentLoopChart (coverage)" in dot
    assert "#5 model_response [truncated] / fail_truncated  (uncovered)" in dot
    assert "#13 model_response / complete  x2\\l" in dot
    assert 'style="dashed"' in dot
    _, mermaid, _ = cli(capsys, *argv, "-f", "mermaid")
    assert mermaid == chart_to_mermaid(DEFAULT_TABLE, overlay)
    assert (
        "CallingModel --> Failed : #5 model_response [truncated] / fail_truncated  (uncovered)"
        in mermaid
    )


def test_diagram_takes_a_trace_or_a_coverage_not_both(
    capsys: pytest.CaptureFixture[str], traces: dict[str, str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["diagram", "default", "--trace", traces["text"], "--coverage", traces["tools"]])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_diagram_coverage_refuses_a_trace_of_another_chart(
    capsys: pytest.CaptureFixture[str], traces: dict[str, str]
) -> None:
    code, _, err = cli(capsys, "diagram", "default", "-f", "dot", "--coverage", traces["plan_act"])
    assert code == 2
    assert "was recorded on chart PlanActChart" in error_line(err)


# ---------------------------------------------------------------- as a subprocess


def test_subprocess_test_and_coverage(tmp_path: Path, traces: dict[str, str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}

    def helikon(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "helikon", *argv]
        return subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )

    done = helikon("test", "charts/triage.py")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == "gaps: none"
    done = helikon("coverage", traces["text"], "--chart", "default")
    assert (done.returncode, done.stderr) == (1, "")
    assert "declared rows: 2 of 53 covered (2 in traces)" in done.stdout


# ---------------------------------------------------------------- the how-to page

PAGE = ROOT / "docs" / "howto" / "chart-tests.md"


def blocks(fence: str) -> list[str]:
    """The page's code blocks fenced as ```fence, in order."""
    text = PAGE.read_text(encoding="utf-8")
    return [part.split("\n```", 1)[0] for part in text.split(f"```{fence}\n")[1:]]


def test_the_pages_example_runs_as_shown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = next(block for block in blocks("python") if "WITNESSES = {" in block)
    shown = next(block for block in blocks("text") if block.startswith("$ helikon test polite"))
    without = next(block for block in blocks("text") if "no witness makes rude" in block)
    (tmp_path / "polite.py").write_text(chart + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, "test", "polite.py")
    assert code == 0
    assert shown == "$ helikon test polite.py\n" + out.rstrip("\n")
    rude = chart.split("# How `helikon test`")[0] + chart.split("\n}\n", 1)[1]
    (tmp_path / "polite.py").write_text(rude, encoding="utf-8")
    code, out, _ = cli(capsys, "test", "polite.py")
    assert code == 1
    assert out.rstrip("\n").endswith(without)


def test_the_pages_table_is_what_helikon_test_prints(capsys: pytest.CaptureFixture[str]) -> None:
    shown = next(block for block in blocks("text") if block.startswith("charts/triage.py: "))
    _, out, _ = cli(capsys, "test", "charts/triage.py")
    printed = out.splitlines()
    for line in shown.splitlines():
        assert line.strip() == "..." or line in printed, line
