"""Charts drawn into documentation sites at build time: the mkdocs plugin, the Sphinx directive.

Each front end is tested with a real build of a throwaway project in tmp_path: a chart file
of the project's own, a recorded run of it, and pages naming both. The build must succeed
with warnings as errors, and the page must hold the diagram (inline SVG, with the run's path
when a trace is named) and the rows by id. A chart that cannot be drawn fails the build,
naming the page and the chart.

mkdocs finds plugins only through the `mkdocs.plugins` entry point. The project declares it
in pyproject.toml; so that the build also works on a checkout that was not reinstalled since,
the test puts a dist-info holding just that declaration on the build's path.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helikon import DEFAULT_TABLE
from helikon.cli import main
from helikon.docsite import DocsiteError, chart_block
from helikon.docsite.mkdocs import replace_blocks

ROOT = Path(__file__).resolve().parents[1]
TRIAGE = ROOT / "charts" / "triage.py"

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")
needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed ('.[docs]')"
)
needs_sphinx = pytest.mark.skipif(
    importlib.util.find_spec("sphinx") is None, reason="Sphinx is not installed ('.[docs]')"
)


def project(tmp_path: Path) -> Path:
    """A project with a chart file of its own and a recorded run of it."""
    where = tmp_path / "project"
    (where / "charts").mkdir(parents=True)
    shutil.copy(TRIAGE, where / "charts" / "triage.py")
    (where / "runs").mkdir()
    chart = str(where / "charts" / "triage.py")
    assert main(["run", chart, "--offline", "--trace", str(where / "runs" / "triage.jsonl")]) == 0
    return where


def entry_point_path(tmp_path: Path) -> Path:
    """A folder holding a dist-info that declares pyproject's mkdocs plugin entry point."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())
    plugins = declared["project"]["entry-points"]["mkdocs.plugins"]
    info = tmp_path / "entry" / "helikon_docsite_plugin-0.dist-info"
    info.mkdir(parents=True)
    metadata = "Metadata-Version: 2.1\nName: helikon-docsite-plugin\nVersion: 0\n"
    (info / "METADATA").write_text(metadata)
    lines = ["[mkdocs.plugins]", *(f"{name} = {target}" for name, target in plugins.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return info.parent


def build(command: list[str], cwd: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(entry_point_path(tmp_path)), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": path, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def svg_titles(html: str) -> list[str]:
    return re.findall(r'<svg width="100%".*?<title>([^<]*)</title>', html, re.S)


# ---------------------------------------------------------------- the block


@needs_dot
def test_a_block_draws_the_overview_and_knows_its_files(tmp_path: Path) -> None:
    where = project(tmp_path)
    block = chart_block("charts/triage.py", root=where, trace="runs/triage.jsonl")
    assert block.table.digest == DEFAULT_TABLE.digest
    assert block.graph.overlaid and block.graph.node("ApplyingHandoff").visits == 1
    assert block.svg.startswith('<svg width="100%" style="max-width: ')
    assert "\n\n" not in block.svg and "<?xml" not in block.svg
    assert block.files == (
        (where / "charts" / "triage.py").resolve(),
        where / "runs" / "triage.jsonl",
    )
    assert "has_handoff" not in block.svg  # the overview: row ids on the edges
    assert "has_handoff" in chart_block("default", root=where, layout="detailed").svg


def test_a_block_that_cannot_be_drawn_says_why(tmp_path: Path) -> None:
    with pytest.raises(DocsiteError, match=r"chart nowhere\.py: no such file"):
        chart_block("nowhere.py", root=tmp_path)
    with pytest.raises(DocsiteError, match="layout 'sideways'"):
        chart_block("default", root=tmp_path, layout="sideways")
    with pytest.raises(DocsiteError, match=r"trace run\.jsonl: .*No such file"):
        chart_block("default", root=tmp_path, trace="run.jsonl")


@needs_dot
def test_only_top_level_helikon_chart_fences_are_replaced(tmp_path: Path) -> None:
    page = "\n".join(
        [
            "# A page",
            "",
            "````markdown",
            "```helikon-chart",
            "chart: default",
            "```",
            "````",
            "",
            "```helikon-chart",
            "chart: default   # helikon's own loop",
            "table: false",
            "```",
            "",
            "```python",
            "print('untouched')",
            "```",
        ]
    )
    watched: set[Path] = set()
    out = replace_blocks(page, tmp_path, "overview", watched)
    assert out.count("<svg") == 1 and out.count('<div class="helikon-chart">') == 1
    assert "````markdown\n```helikon-chart\nchart: default\n```\n````" in out
    assert "```python\nprint('untouched')\n```" in out
    assert "| row |" not in out  # table: false
    with pytest.raises(DocsiteError, match="names no chart"):
        replace_blocks("```helikon-chart\nlayout: overview\n```", tmp_path, "overview", set())
    with pytest.raises(DocsiteError, match="expected `key: value`"):
        replace_blocks("```helikon-chart\nchart: default\ncolour: red\n```", tmp_path, "", set())


# ---------------------------------------------------------------- mkdocs


MKDOCS_PAGE = """# Triage

```helikon-chart
chart: charts/triage.py
```

The run of the example, over the chart:

```helikon-chart
chart: charts/triage.py
trace: runs/triage.jsonl
```
"""


@needs_dot
@needs_mkdocs
def test_a_real_mkdocs_build_draws_the_charts_a_page_names(tmp_path: Path) -> None:
    where = project(tmp_path)
    (where / "docs").mkdir()
    (where / "docs" / "index.md").write_text(MKDOCS_PAGE)
    (where / "mkdocs.yml").write_text("site_name: Refunds\nplugins:\n  - helikon\n")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(where / "site")]
    done = build(command, where, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    html = (where / "site" / "index.html").read_text()
    assert svg_titles(html) == ["AgentLoopChart", "AgentLoopChart"]
    assert html.count('<div class="helikon-chart">') == 2
    assert "AgentLoopChart (trace overlay)" in html
    # The rows beneath, by id, as the table Markdown became.
    handoff = next(r for r in DEFAULT_TABLE.rows if r.action == "apply_handoff")
    assert f"<td>{handoff.index}</td>" in html
    assert html.count("<th>row</th>") == 2 and "<th>fired</th>" in html


@needs_dot
@needs_mkdocs
def test_an_mkdocs_block_that_cannot_be_drawn_fails_the_build(tmp_path: Path) -> None:
    where = tmp_path / "broken"
    (where / "docs").mkdir(parents=True)
    (where / "docs" / "index.md").write_text("```helikon-chart\nchart: charts/gone.py\n```\n")
    (where / "mkdocs.yml").write_text("site_name: Broken\nplugins:\n  - helikon\n")
    done = build([sys.executable, "-m", "mkdocs", "build", "--strict"], where, tmp_path)
    assert done.returncode != 0
    assert "helikon-chart in index.md: chart charts/gone.py: no such file" in done.stderr


# ---------------------------------------------------------------- Sphinx


SPHINX_PAGE = """Triage
======

.. helikon-chart:: ../charts/triage.py

With the example's run over it, every row written out:

.. helikon-chart:: /../charts/triage.py
   :trace: ../runs/triage.jsonl
   :layout: detailed
   :no-table:
"""


@needs_dot
@needs_sphinx
def test_a_real_sphinx_build_draws_the_charts_a_page_names(tmp_path: Path) -> None:
    where = project(tmp_path)
    source = where / "source"
    source.mkdir()
    conf = 'project = "Refunds"\nextensions = ["helikon.docsite.sphinx"]\n'
    (source / "conf.py").write_text(conf)
    (source / "index.rst").write_text(SPHINX_PAGE)
    command = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "source", "out"]
    done = build(command, where, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    html = (where / "out" / "index.html").read_text()
    assert svg_titles(html) == ["AgentLoopChart", "AgentLoopChart"]
    assert "AgentLoopChart (trace overlay)" in html
    detailed = html[html.index("AgentLoopChart (trace overlay)") :]
    assert "has_handoff" in detailed  # the detailed layout writes the guards out
    # One table of rows (the second block has none), by id.
    assert html.count('class="helikon-chart-rows') == 1
    handoff = next(r for r in DEFAULT_TABLE.rows if r.action == "apply_handoff")
    assert f"<p>{handoff.index}</p>" in html
    assert "<p>any non-terminal phase</p>" in html


@needs_dot
@needs_sphinx
def test_a_sphinx_directive_that_cannot_be_drawn_fails_the_build(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "conf.py").write_text('extensions = ["helikon.docsite.sphinx"]\n')
    (source / "index.rst").write_text("Broken\n======\n\n.. helikon-chart:: gone.py\n")
    command = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "source", "out"]
    done = build(command, tmp_path, tmp_path)
    assert done.returncode != 0
    assert "helikon-chart: chart gone.py: no such file" in done.stderr
