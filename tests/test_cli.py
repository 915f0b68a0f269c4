"""The `helikon` command line, through `main(argv)` and as a real subprocess.

Every command that succeeds is checked against the library call it stands for (a diagram is
the exporter's text, `docs` is `generate`'s files); every error is checked to be one
`helikon: ...` line on stderr with exit status 2 (1 for `validate` of a chart that does not
compile, and for a run that fails), never a traceback.

Tests run with the repository root as the working directory, so chart files are named as a
user types them (`charts/triage.py`) and `charts.plan_act` imports as a module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helikon import AssistantMessage
from helikon.cli import main
from helikon.cli.charts import format_table
from helikon.cli.docs import generate
from helikon.cli.loading import load_module, load_table
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.export import (
    TraceOverlay,
    chart_to_dot,
    chart_to_json,
    chart_to_markdown,
    chart_to_mermaid,
    trace_to_markdown,
    trace_to_mermaid,
)
from helikon.models.scripted import as_turn
from helikon.testing import OpenAIServer, PlannedReply
from helikon.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent
CHARTS = ROOT / "charts"
CHART_NAMES = ("budget_assistant", "triage", "plan_act", "approval_gated", "retrieve_answer")
EXPORTERS = {
    "dot": chart_to_dot,
    "mermaid": chart_to_mermaid,
    "md": chart_to_markdown,
    "json": chart_to_json,
}
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")

# A chart missing its cancel row (tests/test_compile.py's tiny chart without `cancel`).
BROKEN_CHART = """
from statemachine import State

from helikon import LoopChart


class NoCancel(LoopChart):
    calling_model = State("CallingModel", initial=True)
    done = State("Done", final=True)
    failed = State("Failed", final=True)
    start = calling_model.to.itself(on="start_turn")
    model_response = calling_model.to(failed, cond="empty", on="fail_empty") | calling_model.to(
        done, on="complete"
    )
    fail = calling_model.to(failed, on="fail_run")
"""
BROKEN_PROBLEM = "state CallingModel, input cancel: no row handles this input"
SOUND_CHART = (
    BROKEN_CHART.replace("class NoCancel", "class Tiny")
    + '    cancel = calling_model.to(failed, on="cancel_run")\n'
)

# An answer that HTML must escape.
MARKUP_ANSWER = 'Use <b>bold</b> & "quotes"'
MARKUP_CHART = f"""
from helikon import Agent


def agent(model):
    return Agent(name="markup", model=model)


def script():
    return [{MARKUP_ANSWER!r}]


EXAMPLE_INPUT = "Say something with markup."
"""


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository root, offline whatever the environment says."""
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The one `helikon: ...` line an error prints."""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("helikon: "), err
    return lines[0]


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run a command that must fail with exit status 2 and one line; return the line."""
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (2, ""), err
    return error_line(err)


def final_answer(name: str) -> str:
    """The text a chart's offline script ends with: the run's final answer."""
    turns = load_module(str(CHARTS / f"{name}.py")).script()
    items = as_turn(turns[-1]).items
    return next(item.content for item in items if isinstance(item, AssistantMessage))


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Traces of offline runs: triage (default chart) and plan_act (its own chart)."""
    folder = tmp_path_factory.mktemp("traces")
    traces = {}
    for name in ("triage", "plan_act"):
        traces[name] = folder / f"{name}.jsonl"
        chart = str(CHARTS / f"{name}.py")
        argv = ["run", chart, "--offline", "--approve", "all", "--trace", str(traces[name])]
        assert main(argv) == 0
    return traces


@pytest.fixture
def broken(tmp_path: Path) -> str:
    return write(tmp_path / "broken_chart.py", BROKEN_CHART)


# ---------------------------------------------------------------- demo, run, table


def test_demo_streams_the_budget_answer_and_completes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "demo")
    assert (code, err) == (0, "")
    assert out.startswith("helikon demo: budget_assistant.py offline")
    assert final_answer("budget_assistant") in out
    assert "completed" in out
    declared = sum(1 for row in DEFAULT_TABLE.rows if not row.implicit)
    assert f"the default chart, {declared} declared rows (`helikon table` prints them)" in out
    assert f"{len(DEFAULT_TABLE.rows)} in all (`helikon table --implicit`)" in out


def test_the_demo_and_the_table_count_the_same_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's counts are the rows `helikon table` prints, with and without --implicit."""
    _, demo, _ = cli(capsys, "demo")
    said = re.search(r"(\d+) declared rows .* (\d+) in all", demo.replace("\n", " "))
    assert said is not None, demo
    for flags, count in (((), said.group(1)), (("--implicit",), said.group(2))):
        _, out, _ = cli(capsys, "table", *flags)
        rows = out.splitlines()[2:-2]  # below the header, above the count
        assert len(rows) == int(count)
        assert out.splitlines()[-1].startswith(count)


@pytest.mark.parametrize("name", CHART_NAMES)
def test_run_each_chart_offline(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, err = cli(capsys, "run", f"charts/{name}.py", "--offline", "--approve", "all")
    assert (code, err) == (0, "")
    example = load_module(f"charts/{name}.py").EXAMPLE_INPUT
    assert out.startswith(f"> {example}  (scripted model, --offline)\n")
    assert final_answer(name) in out
    assert "completed" in out


def test_run_input_replaces_the_example(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chart = write(tmp_path / "echo.py", MARKUP_CHART)
    code, out, _ = cli(capsys, "run", chart, "--offline", "--input", "Anything else?")
    assert code == 0
    assert out.startswith("> Anything else?  (scripted model, --offline)\n")
    assert MARKUP_ANSWER in out


def test_run_trace_is_read_back(recorded: dict[str, Path]) -> None:
    trace = read_trace(recorded["triage"])
    assert trace.header.agent == "triage"
    assert trace.header.source == str(CHARTS / "triage.py")
    assert trace.header.chart_digest == DEFAULT_TABLE.digest
    assert trace.transitions(trace.header.run_id)
    types = [event.type for event in trace.events()]
    assert types[0] == "run_started"
    assert types[-1] == "run_completed"


def test_run_that_fails_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chart = write(tmp_path / "silent.py", MARKUP_CHART.replace(f"[{MARKUP_ANSWER!r}]", "[]"))
    code, out, err = cli(capsys, "run", chart, "--offline")
    assert (code, err) == (1, "")
    assert "failed" in out
    assert "ScriptedModel has no turn 1" in out


def test_table_prints_the_declared_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "table")
    assert code == 0
    assert out == format_table(DEFAULT_TABLE) + "\n"
    lines = out.splitlines()
    assert lines[0].split() == ["row", "from", "input", "guards", "to", "action"]
    declared = [row for row in DEFAULT_TABLE.rows if not row.implicit]
    assert [line.split()[0] for line in lines[2:-2]] == [str(row.index) for row in declared]
    assert lines[-2:] == ["", "53 declared rows (113 with the 60 implicit ones: --implicit)"]


def test_table_implicit_prints_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "table", "--implicit")
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[2:-2]] == [str(i) for i in range(113)]
    assert lines[-1] == "113 rows: 53 declared, 60 implicit"


@pytest.mark.parametrize("target", ["charts/plan_act.py", "charts.plan_act:PLAN_ACT_TABLE"])
def test_table_of_a_chart_file_prints_its_rows(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """`helikon table charts/plan_act.py`, as the chart pages show it."""
    code, out, err = cli(capsys, "table", target, "--implicit")
    assert (code, err) == (0, "")
    assert out == format_table(load_table("charts/plan_act.py"), implicit=True) + "\n"
    assert "Planning" in out


def test_table_of_a_missing_chart_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert fails(capsys, "table", "charts/nowhere.py") == "helikon: no such file: charts/nowhere.py"


# ---------------------------------------------------------------- diagram


@pytest.mark.parametrize("fmt", EXPORTERS)
def test_diagram_default_to_stdout(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    code, out, err = cli(capsys, "diagram", "default", "-f", fmt)
    assert (code, err) == (0, "")
    assert out == EXPORTERS[fmt](DEFAULT_TABLE)
    if fmt == "json":
        assert json.loads(out)["name"] == DEFAULT_TABLE.name


@pytest.mark.parametrize("fmt", EXPORTERS)
def test_diagram_default_to_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    target = tmp_path / f"chart.{fmt}"
    code, out, err = cli(capsys, "diagram", "default", "-f", fmt, "-o", str(target))
    assert (code, out, err) == (0, "", "")
    assert target.read_text() == EXPORTERS[fmt](DEFAULT_TABLE)


@pytest.mark.parametrize(
    ("name", "fmt"), [("x.dot", "dot"), ("x.gv", "dot"), ("x.mmd", "mermaid"), ("x.JSON", "json")]
)
def test_diagram_format_follows_the_output_extension(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, fmt: str
) -> None:
    target = tmp_path / name
    assert cli(capsys, "diagram", "default", "-o", str(target)) == (0, "", "")
    assert target.read_text() == EXPORTERS[fmt](DEFAULT_TABLE)


@needs_dot
def test_diagram_to_a_png_file_without_f_is_a_png(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "x.png"
    assert cli(capsys, "diagram", "default", "-o", str(target)) == (0, "", "")
    assert target.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_diagram_format_and_extension_that_disagree(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "x.png"
    line = fails(capsys, "diagram", "default", "-f", "svg", "-o", str(target))
    assert line == f"helikon: -f svg but {str(target)!r} ends in .png (png): change one"
    assert not target.exists()


def test_diagram_to_a_file_of_no_known_extension(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "chart.txt"
    line = fails(capsys, "diagram", "default", "-o", str(target))
    assert line.startswith(f"helikon: which format is {str(target)!r}? give -f FORMAT, or name")
    assert cli(capsys, "diagram", "default", "-f", "dot", "-o", str(target)) == (0, "", "")
    assert target.read_text() == chart_to_dot(DEFAULT_TABLE)


@needs_dot
def test_diagram_svg_names_every_phase(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "x.svg"
    code, out, _ = cli(capsys, "diagram", "default", "-f", "svg", "-o", str(target))
    assert (code, out) == (0, "")
    svg = target.read_text()
    assert "<svg" in svg
    for phase in DEFAULT_TABLE.phases:
        assert phase.name in svg


@needs_dot
def test_diagram_png_is_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "x.png"
    code, out, _ = cli(capsys, "diagram", "default", "-f", "png", "-o", str(target))
    assert (code, out) == (0, "")
    assert target.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize("fmt", ["dot", "mermaid"])
def test_diagram_layout_overview(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    code, out, err = cli(capsys, "diagram", "default", "-f", fmt, "--layout", "overview")
    assert (code, err) == (0, "")
    render = chart_to_dot if fmt == "dot" else chart_to_mermaid
    assert out == render(DEFAULT_TABLE, layout="overview")
    # Detailed stays the default: a chart's author sees every guard without a flag.
    _, detailed, _ = cli(capsys, "diagram", "default", "-f", fmt)
    assert detailed == render(DEFAULT_TABLE) == EXPORTERS[fmt](DEFAULT_TABLE) != out
    _, explicit, _ = cli(capsys, "diagram", "default", "-f", fmt, "--layout", "detailed")
    assert explicit == detailed


def test_diagram_layout_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["diagram", "default", "--layout", "sideways"])
    assert "invalid choice: 'sideways'" in capsys.readouterr().err


def overlay(table: Any, path: Path) -> TraceOverlay:
    trace = read_trace(path)
    fired = [line.row.index for line in trace.transitions(trace.header.run_id)]
    return TraceOverlay.from_rows(table, fired)


@pytest.mark.parametrize("fmt", ["dot", "mermaid", "md"])
def test_diagram_overlays_a_recorded_run(
    capsys: pytest.CaptureFixture[str], recorded: dict[str, Path], fmt: str
) -> None:
    code, out, err = cli(
        capsys, "diagram", "default", "-f", fmt, "--trace", str(recorded["triage"])
    )
    assert (code, err) == (0, "")
    hits = overlay(DEFAULT_TABLE, recorded["triage"])
    assert hits.phases["CallingModel"] >= 1
    assert out == EXPORTERS[fmt](DEFAULT_TABLE, hits)
    assert out != EXPORTERS[fmt](DEFAULT_TABLE)


def test_diagram_dot_overlay_shows_visit_counts(
    capsys: pytest.CaptureFixture[str], recorded: dict[str, Path]
) -> None:
    _, out, _ = cli(capsys, "diagram", "default", "-f", "dot", "--trace", str(recorded["triage"]))
    assert 'label="CallingModel\\nx1"' in out
    assert 'label="Done\\nx1"' in out
    assert "start_turn  x1" in out


def test_diagram_of_a_chart_file_shows_its_custom_phase(
    capsys: pytest.CaptureFixture[str], recorded: dict[str, Path]
) -> None:
    from charts.plan_act import PLAN_ACT_TABLE

    code, out, _ = cli(capsys, "diagram", "charts/plan_act.py", "-f", "dot")
    assert code == 0
    assert '"Planning"' in out
    assert out == chart_to_dot(PLAN_ACT_TABLE)
    # A run recorded on that chart overlays the chart loaded from its file.
    trace = str(recorded["plan_act"])
    code, out, _ = cli(capsys, "diagram", "charts/plan_act.py", "-f", "dot", "--trace", trace)
    assert code == 0
    assert out == chart_to_dot(PLAN_ACT_TABLE, overlay(PLAN_ACT_TABLE, recorded["plan_act"]))
    assert 'label="Planning\\nx1"' in out


@pytest.mark.parametrize(
    "target",
    [
        "helikon.core.chart.dsl:AgentLoopChart",
        "helikon.core.chart.default:DEFAULT_TABLE",
        "charts.plan_act:PLAN_ACT_TABLE",
        "charts.plan_act:PlanActChart",
        "charts/plan_act.py:PlanActChart",
        "charts.plan_act",
    ],
)
def test_diagram_of_module_attr(capsys: pytest.CaptureFixture[str], target: str) -> None:
    from charts.plan_act import PLAN_ACT_TABLE

    table = PLAN_ACT_TABLE if "plan_act" in target else DEFAULT_TABLE
    code, out, err = cli(capsys, "diagram", target, "-f", "json")
    assert (code, err) == (0, "")
    assert out == chart_to_json(table)


def test_a_chart_file_named_with_attr_is_imported_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "imports.log"
    source = f"with open({str(log)!r}, 'a') as log:\n    log.write('x')\n"
    chart = write(tmp_path / "counted.py", source + SOUND_CHART)
    code, _, err = cli(capsys, "diagram", f"{chart}:Tiny", "-f", "json")
    assert (code, err) == (0, "")
    assert log.read_text() == "x"


# ---------------------------------------------------------------- validate


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("charts/plan_act.py", "PlanActChart"),
        ("default", "AgentLoopChart"),
        ("helikon.core.chart.dsl:AgentLoopChart", "AgentLoopChart"),
        ("charts.plan_act:PLAN_ACT_TABLE", "PlanActChart"),
    ],
)
def test_validate_a_sound_chart(capsys: pytest.CaptureFixture[str], target: str, name: str) -> None:
    code, out, err = cli(capsys, "validate", target)
    assert (code, err) == (0, "")
    assert out.startswith(f"{name}: ok (")


def test_validate_lists_a_broken_charts_problem(
    capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    code, out, err = cli(capsys, "validate", broken)
    assert (code, out) == (1, "")
    assert "Traceback" not in err
    assert err.splitlines()[0] == "chart NoCancel cannot be compiled:"
    assert f"  - {BROKEN_PROBLEM}" in err.splitlines()


def test_validate_a_chart_compiled_at_import(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A file that compiles its chart at import (as charts/plan_act.py does) is validated too."""
    source = (
        "from helikon import compile_chart\n" + BROKEN_CHART + "TABLE = compile_chart(NoCancel)\n"
    )
    chart = write(tmp_path / "compiled.py", source)
    code, out, err = cli(capsys, "validate", chart)
    assert (code, out) == (1, "")
    assert f"  - {BROKEN_PROBLEM}" in err.splitlines()
    assert "Traceback" not in err
    line = fails(capsys, "diagram", chart, "-f", "dot")
    assert "failed to import" in line
    assert BROKEN_PROBLEM in line


# ---------------------------------------------------------------- trace


def test_trace_html_escapes_the_final_answer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    chart = write(tmp_path / "markup.py", MARKUP_CHART)
    trace = str(tmp_path / "markup.jsonl")
    assert cli(capsys, "run", chart, "--offline", "--trace", trace)[0] == 0
    code, out, err = cli(capsys, "trace", trace, "-f", "html")
    assert (code, err) == (0, "")
    assert out.lstrip().lower().startswith("<!doctype html>")
    assert "&lt;b&gt;bold&lt;/b&gt; &amp;" in out
    assert "<b>bold</b>" not in out


def test_trace_html_of_a_chart_run(
    capsys: pytest.CaptureFixture[str], recorded: dict[str, Path]
) -> None:
    code, out, _ = cli(capsys, "trace", str(recorded["triage"]))  # html is the default
    assert code == 0
    assert final_answer("triage") in out
    assert "<svg" in out or "digraph" in out  # the chart panel, drawn or as DOT text


@pytest.mark.parametrize(
    ("fmt", "render"), [("mermaid", trace_to_mermaid), ("md", trace_to_markdown)]
)
def test_trace_text_formats(
    capsys: pytest.CaptureFixture[str], recorded: dict[str, Path], fmt: str, render: Any
) -> None:
    code, out, err = cli(capsys, "trace", str(recorded["triage"]), "-f", fmt)
    assert (code, err) == (0, "")
    assert out == render(read_trace(recorded["triage"]))


@pytest.mark.parametrize("fmt", ["html", "mermaid", "md"])
def test_trace_to_a_file(
    capsys: pytest.CaptureFixture[str], recorded: dict[str, Path], tmp_path: Path, fmt: str
) -> None:
    trace = str(recorded["plan_act"])
    _, printed, _ = cli(capsys, "trace", trace, "-f", fmt)
    target = tmp_path / f"trace.{fmt}"
    code, out, err = cli(capsys, "trace", trace, "-f", fmt, "-o", str(target))
    assert (code, out, err) == (0, "", "")
    assert target.read_text() == printed


# ---------------------------------------------------------------- docs


@needs_dot
def test_docs_writes_what_generate_writes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = cli(capsys, "docs", "--out", str(tmp_path / "cli"))
    assert code == 0
    generate(tmp_path / "lib")
    written = sorted((tmp_path / "cli" / "charts").iterdir())
    expected = sorted((tmp_path / "lib" / "charts").iterdir())
    assert [path.name for path in written] == [path.name for path in expected]
    assert {"index.md", "default.md", "default.svg", "plan_act.md"} <= {p.name for p in written}
    for mine, theirs in zip(written, expected, strict=True):
        assert mine.read_bytes() == theirs.read_bytes(), mine.name
    assert sorted(out.splitlines()) == sorted(str(path) for path in written)


def written_names(out_dir: Path) -> set[str]:
    return {path.name for path in (out_dir / "charts").iterdir()}


USER_CHART = """\"\"\"Refunds: an agent that looks an order up before refunding it.\"\"\"

from helikon import Agent, tool


@tool(read_only=True)
def order(number: str) -> str:
    \"\"\"The order with this number.

    Args:
        number: e.g. "A-1".
    \"\"\"
    return "A-1: one mug"


def agent(model):
    return Agent(name="refunds", model=model, instructions="Refund politely.", tools=[order])
"""


@needs_dot
def test_docs_of_a_users_own_charts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    charts = tmp_path / "agents"
    charts.mkdir()
    write(charts / "refunds.py", USER_CHART)
    write(charts / "_helpers.py", "raise RuntimeError('not a chart: never imported')\n")
    out_dir = tmp_path / "site-docs"
    code, out, _ = cli(capsys, "docs", "--charts", str(charts), "--out", str(out_dir))
    assert code == 0
    assert {Path(line).name for line in out.splitlines()} == written_names(out_dir)
    written = written_names(out_dir)
    assert written == {
        "index.md",
        *(f"{name}{suffix}" for name in ("default", "refunds") for suffix in (".md", ".svg")),
        "default-detailed.svg",
        "refunds-detailed.svg",
    }
    page = (out_dir / "charts" / "refunds.md").read_text()
    assert page.startswith("# refunds\n")
    assert "Refunds: an agent that looks an order up before refunding it." in page
    assert f"helikon diagram {charts.as_posix()}/refunds.py --layout overview" in page
    assert "| `order` | The order with this number. |" in page
    index = (out_dir / "charts" / "index.md").read_text()
    assert "each chart file documented here" in index and "[refunds](refunds.md)" in index
    # helikon's own contract page is not in the user's docs, so it is not linked.
    assert "semantics.md" not in (out_dir / "charts" / "default.md").read_text()
    assert not (tmp_path / "docs").exists()


def test_docs_of_a_folder_without_charts_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    message = fails(capsys, "docs", "--charts", str(tmp_path / "nowhere"), "--out", str(tmp_path))
    assert "nowhere is not a folder" in message
    assert "holds no chart file" in fails(capsys, "docs", "--charts", str(tmp_path))


def test_docs_into_a_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = write(tmp_path / "not_a_folder", "")
    assert "cannot write" in fails(capsys, "docs", "--out", out)


# ---------------------------------------------------------------- errors


def chart_commands(chart: str) -> list[list[str]]:
    return [["run", chart, "--offline"], ["diagram", chart, "-f", "dot"], ["validate", chart]]


@pytest.mark.parametrize("command", ["run", "diagram", "validate"])
def test_a_missing_chart_file(capsys: pytest.CaptureFixture[str], command: str) -> None:
    argv = {"run": ["--offline"], "diagram": ["-f", "dot"], "validate": []}[command]
    line = fails(capsys, command, "charts/no_such_chart.py", *argv)
    assert line == "helikon: no such file: charts/no_such_chart.py"


def test_a_folder_is_not_a_chart_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert fails(capsys, "validate", "charts") == "helikon: not a file: charts"


def test_a_chart_file_that_fails_to_import(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    chart = write(tmp_path / "explodes.py", 'raise RuntimeError("boom at import")\n')
    for argv in chart_commands(chart):
        line = fails(capsys, *argv)
        assert line == f"helikon: {chart} failed to import: RuntimeError: boom at import"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("helikon.core.chart.dsl:Nope", "helikon.core.chart.dsl has no attribute 'Nope'"),
        ("charts.plan_act:NOPE", "charts.plan_act has no attribute 'NOPE'"),
        ("charts/plan_act.py:NOPE", "charts/plan_act.py has no attribute 'NOPE'"),
        ("no_such_module_xyz:Chart", "cannot import module 'no_such_module_xyz'"),
        ("charts.plan_act:script", "charts.plan_act:script is not a chart"),
    ],
)
def test_a_module_attr_that_does_not_load(
    capsys: pytest.CaptureFixture[str], target: str, message: str
) -> None:
    for command in (["diagram", target, "-f", "dot"], ["validate", target]):
        assert message in fails(capsys, *command)


def test_diagram_of_a_broken_chart_is_one_line(
    capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    line = fails(capsys, "diagram", broken, "-f", "dot")
    assert line.startswith("helikon: chart NoCancel cannot be compiled:")
    assert BROKEN_PROBLEM in line


CORRUPT_TRACES = {
    "bad_json": ("{not json\n", ":1: not a valid trace line"),
    "not_a_trace_line": ('{"kind": "nope", "run_id": "r"}\n', ":1: not a valid trace line"),
    "json_list": ("[1, 2]\n", ":1: not a valid trace line"),
    "empty": ("", ": empty trace"),
    "blank_lines": ("\n\n", ": empty trace"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\xff", ": not a trace: the file is not UTF-8 text"),
}


@pytest.fixture(params=[*CORRUPT_TRACES, "truncated", "missing"])
def corrupt_trace(
    request: pytest.FixtureRequest, tmp_path: Path, recorded: dict[str, Path]
) -> tuple[str, str]:
    """(path, what the error says after the path) for each way a trace file can be bad."""
    path = tmp_path / f"{request.param}.jsonl"
    if request.param == "missing":
        return str(path), "cannot read trace"
    if request.param == "truncated":  # a run cut off mid-line: the second line is broken
        header, second, *_ = recorded["triage"].read_text().splitlines(keepends=True)
        path.write_text(header + second[: len(second) // 2])
        return str(path), ":2: not a valid trace line"
    content, message = CORRUPT_TRACES[request.param]
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path), message


@pytest.mark.parametrize("command", ["trace", "diagram"])
def test_a_corrupt_trace_is_one_line(
    capsys: pytest.CaptureFixture[str], corrupt_trace: tuple[str, str], command: str
) -> None:
    path, message = corrupt_trace
    argv = ["trace", path] if command == "trace" else ["diagram", "default", "--trace", path]
    line = fails(capsys, *argv)
    assert path in line
    assert message in line


def test_a_trace_from_another_chart(
    capsys: pytest.CaptureFixture[str], recorded: dict[str, Path]
) -> None:
    trace = str(recorded["plan_act"])
    line = fails(capsys, "diagram", "default", "-f", "dot", "--trace", trace)
    assert line.startswith(f"helikon: {trace}: the trace was recorded on chart PlanActChart (")
    assert DEFAULT_TABLE.digest[:12] in line


@needs_dot
def test_png_to_stdout_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    line = fails(capsys, "diagram", "default", "-f", "png")
    assert line == "helikon: PNG is binary: write it to a file with -o FILE"


def test_svg_without_graphviz_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` here
    line = fails(capsys, "diagram", "default", "-f", "svg", "-o", str(tmp_path / "x.svg"))
    assert "`dot`" in line or "graphviz" in line
    assert not (tmp_path / "x.svg").exists()


def test_output_into_a_missing_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "x.dot"
    line = fails(capsys, "diagram", "default", "-f", "dot", "-o", str(target))
    assert line == f"helikon: cannot write {target}: No such file or directory"


@pytest.mark.parametrize("chart", ["helikon.core.chart.dsl", "broken"])
def test_run_a_chart_without_agent(
    capsys: pytest.CaptureFixture[str], broken: str, chart: str
) -> None:
    target = broken if chart == "broken" else chart
    line = fails(capsys, "run", target, "--offline")
    assert line == f"helikon: {target} defines no agent(model) for helikon run"


def test_run_offline_without_a_script(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chart = write(tmp_path / "unscripted.py", MARKUP_CHART.split("def script")[0])
    line = fails(capsys, "run", chart, "--offline")
    assert line == (
        f"helikon: {chart} has no offline script(): drop --offline and set OPENAI_API_KEY or "
        "OPENAI_BASE_URL"
    )


def test_run_on_a_model_string_the_environment_points_at_a_server(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = write(tmp_path / "markup.py", MARKUP_CHART)
    with OpenAIServer([PlannedReply(text="From the wire.")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code, out, err = cli(capsys, "run", chart, "--model", "openai:responses/gpt-test")
    assert code == 0, err
    assert "From the wire." in out
    assert [(r.path, r.body["model"]) for r in server.requests] == [("/v1/responses", "gpt-test")]


def test_run_on_a_model_string_that_names_no_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = write(tmp_path / "markup.py", MARKUP_CHART)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    line = fails(capsys, "run", chart, "--model", "openai:completions/gpt-test")
    assert line.startswith(
        "helikon: model 'openai:completions/gpt-test': unknown wire format 'completions'"
    )


NO_MODEL = (
    "calls a real model: set OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible "
    "server), or give --offline for the chart's scripted model"
)

MODEL_COMMANDS = {
    "run": ["run", "charts/triage.py", "--model", "gpt-5-mini"],
    "runs resume": ["runs", "resume", "r1", "--chart", "charts/approval_gated.py"],
    "runs recover": ["runs", "recover", "--chart", "charts/triage.py"],
    "worker": ["worker", "charts/triage.py", "--temporal", "127.0.0.1:9"],
    "debug": ["debug", "charts/triage.py"],
    # An address no studio can listen on: a studio that started anyway fails, never serves.
    "studio": ["studio", "charts/triage.py", "--host", "256.0.0.1", "--port", "0"],
}


def model_command(command: str, store: Path) -> list[str]:
    """`MODEL_COMMANDS[command]` on the run store `store` (debug's and studio's `--store`
    replays a stored run instead: not theirs)."""
    on_store = [] if command in ("debug", "studio") else ["--store", f"sqlite:///{store}"]
    return [*MODEL_COMMANDS[command], *on_store]


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_a_command_that_calls_a_model_needs_one_set_up(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    """No key, no base URL, no --offline: one line naming all three, exit 2, nothing run."""
    store = tmp_path / "runs.db"
    line = fails(capsys, *model_command(command, store))
    assert line == f"helikon: helikon {command} {NO_MODEL}"
    assert not store.exists()


def test_a_local_server_needs_only_its_base_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_BASE_URL alone (no key) runs the real model on that server."""
    chart = write(tmp_path / "markup.py", MARKUP_CHART)
    with OpenAIServer([PlannedReply(text="From the local server.")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code, out, err = cli(capsys, "run", chart, "--store", "none", "--model", "local")
    assert (code, err) == (0, "")
    assert out.startswith("> Say something with markup.\n")  # no "scripted" on a real model
    assert "From the local server." in out and "scripted" not in out
    assert [r.body["model"] for r in server.requests] == ["local"]


def test_a_model_named_with_offline_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")  # even with a key: --offline never calls it
    line = fails(capsys, "run", "charts/triage.py", "--offline", "--model", "gpt-5-mini")
    assert line == "helikon: --model 'gpt-5-mini' names a real model: drop it or --offline"


def test_run_without_input_or_example(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chart = write(tmp_path / "no_example.py", MARKUP_CHART.split("EXAMPLE_INPUT")[0])
    line = fails(capsys, "run", chart, "--offline")
    assert line == 'helikon: give the agent something to do: --input "..."'


@pytest.mark.parametrize("function", ["agent", "script", "deps"])
def test_a_chart_function_that_raises(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, function: str
) -> None:
    source = MARKUP_CHART + "\n\ndef deps():\n    return None\n"
    source = source.replace(f"def {function}(", f"def {function}(*_):\n    1 / 0\n\n\ndef _old(")
    chart = write(tmp_path / "raises.py", source)
    line = fails(capsys, "run", chart, "--offline")
    assert line == f"helikon: {chart}: {function}() failed: ZeroDivisionError: division by zero"
    if function == "agent":  # diagram builds the agent to find its chart
        assert "agent() failed" in fails(capsys, "diagram", chart, "-f", "dot")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bogus"], "invalid choice: 'bogus'"),
        ([], "the following arguments are required: command"),
        (["diagram"], "the following arguments are required: chart"),
        (["diagram", "default", "-f", "gif"], "invalid choice: 'gif'"),
        (["trace", "t.jsonl", "-f", "svg"], "invalid choice: 'svg'"),
        (["run", "charts/triage.py", "--approve", "maybe"], "invalid choice: 'maybe'"),
    ],
)
def test_argparse_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


# ---------------------------------------------------------------- as a subprocess


def helikon(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "helikon", *argv],
        cwd=ROOT,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,
    )


def offline_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}


def test_subprocess_demo() -> None:
    done = helikon("demo")
    assert (done.returncode, done.stderr) == (0, "")
    assert final_answer("budget_assistant") in done.stdout
    assert "completed" in done.stdout


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_subprocess_without_a_model_says_so(tmp_path: Path, command: str) -> None:
    """A clean environment, no key: the scripted model never answers in a real one's place."""
    store = tmp_path / "runs.db"
    done = helikon(*model_command(command, store), stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"helikon: helikon {command} {NO_MODEL}\n"
    assert not store.exists()


def test_subprocess_offline_run_says_it_is_scripted() -> None:
    done = helikon("run", "charts/triage.py", "--offline", "--store", "none")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[0].endswith("  (scripted model, --offline)")


def test_subprocess_diagram_mermaid() -> None:
    done = helikon("diagram", "default", "-f", "mermaid")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == chart_to_mermaid(DEFAULT_TABLE)


def test_subprocess_validate_a_broken_chart(broken: str) -> None:
    done = helikon("validate", broken)
    assert (done.returncode, done.stdout) == (1, "")
    assert "Traceback" not in done.stderr
    assert f"  - {BROKEN_PROBLEM}" in done.stderr.splitlines()


def test_subprocess_corrupt_trace(tmp_path: Path) -> None:
    trace = write(tmp_path / "corrupt.jsonl", "{not json\n")
    done = helikon("trace", trace)
    assert (done.returncode, done.stdout) == (2, "")
    assert error_line(done.stderr).startswith(f"helikon: {trace}:1: not a valid trace line")


def test_subprocess_reader_closes_early() -> None:
    """`helikon run ... | head -1`: the run stops quietly when its reader goes away."""
    argv = [sys.executable, "-m", "helikon", "run", "charts/triage.py", "--offline"]
    with subprocess.Popen(
        argv, cwd=ROOT, env=offline_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read().decode()
        code = process.wait(timeout=60)
    example = load_module("charts/triage.py").EXAMPLE_INPUT
    assert first.decode() == f"> {example}  (scripted model, --offline)\n"
    assert "Traceback" not in stderr
    assert "Exception ignored" not in stderr
    assert code in (0, 141)  # 141: it wrote after the reader had gone


def test_subprocess_reader_already_gone() -> None:
    """A reader that is gone before the first line: exit status 141, nothing on stderr."""
    read, write_end = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "helikon", "run", "charts/triage.py", "--offline"],
            cwd=ROOT,
            env=offline_env(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, b"")
