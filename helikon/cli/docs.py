"""Generated documentation: a page and a diagram for every chart in charts/, and the default's.

`generate(out_dir)` writes into `out_dir/charts/`:

    index.md                the list of chart pages
    default.md              helikon's default loop (`AGENT_LOOP`, compiled as `DEFAULT_TABLE`)
    <name>.md               one page per `charts/<name>.py`
    <name>.svg              each page's diagram in the overview layout (one numbered edge per
                            source and target), legible at the page's width
    <name>-detailed.svg     the same chart with every row on its edge, linked from the page

`generate(out_dir, charts_dir)` documents the chart files of another folder instead (a
user's own, `helikon docs --charts DIR`): the same pages, plus the default loop's, which
their agents run on unless given another chart. Loading a chart file imports it, running
its module code, as `helikon run` does.

A chart file's table is its agent's chart (`agent(model).chart`, the default loop when None);
a file without an agent gives the table or chart class it defines. Diagrams and transition
tables come from `helikon.export` only (`chart_to_dot` drawn by Graphviz's `dot` through
`render`, and `chart_to_markdown`), so the pages cannot drift from the compiled tables.

Output is deterministic: the same charts, helikon and Graphviz give the same bytes. The pages
are checked in under docs/ and a test regenerates them to catch stale ones.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from helikon.cli.loading import CHARTS, LoadError, charts_in, compile_in, load_module
from helikon.cli.usage import UsageError
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.chart.dsl import AgentLoopChart
from helikon.core.errors import ChartDefinitionError
from helikon.core.table import TransitionTable
from helikon.export import Layout, RenderError, chart_to_dot, chart_to_markdown, render
from helikon.models.scripted import ScriptedModel
from helikon.run.agent import Agent
from helikon.run.spec import HandoffTo
from helikon.tools import Tool

DEFAULT_NAME = "default"
CONFIG_FIELDS = (
    "max_turns",
    "parallel_tool_call_limit",
    "max_agent_depth",
    "timeout",
    "token_budget",
    "compaction_threshold",
)


@dataclass(frozen=True)
class ChartPage:
    """What one generated page shows.

    Args:
        name: the page's file stem (`default`, or the chart file's stem).
        title: the page's heading.
        summary: Markdown describing the chart or agent (a module docstring).
        table: the compiled chart drawn and tabulated on the page.
        source: the chart file as the command line names it, e.g. `charts/triage.py`.
        agent: the file's agent, built on a model with no turns, if it defines one.
        example: the file's `EXAMPLE_INPUT`, if any.
        offline: the file has a `script()` for `helikon run --offline`.
    """

    name: str
    title: str
    summary: str
    table: TransitionTable
    source: str | None = None
    agent: Agent | None = None
    example: str | None = None
    offline: bool = False


def generate(out_dir: Path, charts_dir: Path | None = None) -> list[Path]:
    """Write the chart pages and diagrams into `out_dir/charts/`.

    Args:
        out_dir: the documentation directory (docs/).
        charts_dir: where the chart files are; helikon's own charts/ when None. Each file
            is imported.

    Returns:
        The files written, in order: the index, then each page's `.md`, `.svg` and
        `-detailed.svg`.

    Raises:
        RenderError: Graphviz's `dot` (or the `graphviz` package) is missing.
        LoadError: a chart file does not import.
        ChartDefinitionError: a chart does not compile.
    """
    own = charts_dir is None
    files = chart_files(charts_dir)
    pages = [
        default_page(contract=own),
        *(chart_page(path, _source(path, charts_dir)) for path in files),
    ]
    target = out_dir / "charts"
    target.mkdir(parents=True, exist_ok=True)
    written = [_write(target / "index.md", index_markdown(pages, own=own).encode())]
    for page in pages:
        written.append(_write(target / f"{page.name}.md", page_markdown(page).encode()))
        written.append(_write(target / f"{page.name}.svg", diagram(page.table)))
        detailed = diagram(page.table, "detailed")
        written.append(_write(target / f"{page.name}-detailed.svg", detailed))
    return written


def _source(path: Path, charts_dir: Path | None) -> str:
    """The chart file as a command line would name it."""
    return f"charts/{path.name}" if charts_dir is None else (charts_dir / path.name).as_posix()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def chart_files(charts_dir: Path | None = None) -> list[Path]:
    """The chart files, sorted by name; files starting with `_` are not charts."""
    where = charts_dir if charts_dir is not None else CHARTS
    return sorted(path for path in where.glob("*.py") if not path.name.startswith("_"))


def diagram(table: TransitionTable, layout: Layout = "overview") -> bytes:
    """The chart drawn as SVG by Graphviz's `dot`, in the overview layout unless told."""
    return render(chart_to_dot(table, layout=layout), "svg")


# ---------------------------------------------------------------- pages


def default_page(*, contract: bool = True) -> ChartPage:
    """The page of helikon's default loop; `contract` links helikon's contract page
    (../semantics.md), which only helikon's own docs have."""

    rules = (
        "its rules are written out in [the contract](../semantics.md)"
        if contract
        else "its rules are written out in helikon's documentation (the contract)"
    )
    summary = "\n\n".join(
        [
            _docstring(AgentLoopChart),
            "Every agent runs on it unless it is given another chart (`Agent(chart=...)`). "
            "It is `AGENT_LOOP` (the chart class) compiled once at import as "
            f"`DEFAULT_TABLE`; {rules}.",
        ]
    )
    return ChartPage(DEFAULT_NAME, "The default loop", summary, DEFAULT_TABLE)


def chart_page(path: Path, source: str | None = None) -> ChartPage:
    """The page of one chart file: its agent (if any), its table, its docstring.

    `source` is how the page names the file in its commands (`charts/<file>` when None).
    The file is imported.
    """

    module = load_module(str(path))
    agent = module.agent(ScriptedModel([])) if hasattr(module, "agent") else None
    table = (agent.chart or DEFAULT_TABLE) if agent is not None else _module_table(module, path)
    example = getattr(module, "EXAMPLE_INPUT", None)
    return ChartPage(
        name=path.stem,
        title=path.stem,
        summary=_docstring(module),
        table=table,
        source=source or f"charts/{path.name}",
        agent=agent,
        example=example if isinstance(example, str) else None,
        offline=hasattr(module, "script"),
    )


def _module_table(module: ModuleType, path: Path) -> TransitionTable:
    """The table a module without an agent defines: a compiled table, else its one chart."""

    tables = [obj for obj in vars(module).values() if isinstance(obj, TransitionTable)]
    if len(tables) == 1:
        return tables[0]
    charts = charts_in(module)
    if len(charts) != 1:
        raise LoadError(f"{path} defines no agent and not exactly one chart or compiled table")
    table: TransitionTable = compile_in(module, charts[0])
    return table


def _docstring(obj: Any) -> str:
    return inspect.getdoc(obj) or ""


def index_markdown(pages: Sequence[ChartPage], *, own: bool = True) -> str:
    """The index of chart pages: name, chart and the summary's first line."""
    where = "each reference agent in `charts/`" if own else "each chart file documented here"
    command = "`helikon docs`" if own else "`helikon docs --charts`"
    lines = [
        "# Charts",
        "",
        f"One page per chart: the default loop, and {where}, with its diagram (drawn by "
        "Graphviz from the compiled table) and its transition table. "
        f"These pages are generated by {command}; do not edit them by hand.",
        "",
        "| page | chart | what it is |",
        "|---|---|---|",
    ]
    for page in pages:
        first = page.summary.split("\n\n")[0].replace("\n", " ")
        link = f"[{page.title}]({page.name}.md)"
        lines.append(f"| {link} | `{page.table.name}` | {_cell(first)} |")
    return "\n".join(lines) + "\n"


def page_markdown(page: ChartPage) -> str:
    """One chart's page: summary, how to run it, its agent, then the chart itself."""
    lines = [f"# {page.title}", "", _GENERATED, "", page.summary, ""]
    lines += _how_to_run(page)
    if page.agent is not None:
        lines += _agent_section(page.agent, page.table)
    lines += _chart_section(page)
    return "\n".join(lines).rstrip("\n") + "\n"


_GENERATED = "<!-- Generated by helikon.cli.docs; edit the chart or its docstring instead. -->"


def _how_to_run(page: ChartPage) -> list[str]:
    if page.source is None:
        return [
            "## See it yourself",
            "",
            "```bash",
            "helikon table                          # the declared rows, by id",
            "helikon table --implicit               # with the implicit rows",
            "helikon diagram default --layout overview -o loop.svg   # this diagram",
            "helikon diagram default -o loop.svg    # every row on its edge",
            "helikon diagram default -f mermaid     # as Mermaid text",
            "```",
            "",
        ]
    lines = ["## Run it", "", "```bash"]
    if page.agent is not None and page.offline:
        lines.append(f"helikon run {page.source} --offline   # the scripted model plays script()")
    if page.agent is not None:
        lines.append(f"helikon run {page.source}             # a real model, when one is set up")
    lines += [
        f"helikon table {page.source}          # its rows, by id (--implicit: all of them)",
        f"helikon diagram {page.source} --layout overview -o {page.name}.svg",
        f"helikon diagram {page.source} -o {page.name}-detailed.svg   # every row on its edge",
        "```",
        "",
    ]
    if page.agent is not None:
        lines += [_REAL_MODEL_NOTE, ""]
    if page.example is not None:
        lines += ["Without `--input`, the agent is asked:", "", f"> {page.example}", ""]
    if page.agent is not None and _asks(page.agent):
        lines += [_APPROVAL_NOTE, ""]
    return lines


_REAL_MODEL_NOTE = (
    "Without `--offline`, `helikon run` uses a real model through `OpenAIModel.chat` when "
    "`OPENAI_API_KEY` or `OPENAI_BASE_URL` is set (`--model` or `HELIKON_MODEL` names the "
    "model); with neither it says so and exits 2."
)
_APPROVAL_NOTE = (
    "Some calls need approval. On a terminal `helikon run` asks y/n for each; "
    "`--approve all` or `--approve none` decides without asking; otherwise the run "
    "suspends with `RunSuspended`."
)


def _asks(agent: Agent) -> bool:
    return any(tool.needs_approval is not False or tool.permission == "ask" for tool in agent.tools)


# ---------------------------------------------------------------- the agent


def _agent_section(agent: Agent, table: TransitionTable) -> list[str]:
    chart = (
        "the default loop ([page](default.md))"
        if table is DEFAULT_TABLE
        else f"`{table.name}` (drawn below)"
    )
    lines = ["## The agent", "", "| setting | value |", "|---|---|", f"| name | `{agent.name}` |"]
    if agent.description:
        lines.append(f"| description | {_cell(agent.description)} |")
    lines.append(f"| chart | {chart} |")
    if agent.output_type is not None:
        lines.append(f"| output type | `{getattr(agent.output_type, '__name__', 'output')}` |")
    lines += [f"| `{name}` | {_config_value(agent, name)} |" for name in CONFIG_FIELDS]
    lines += ["", "Instructions:", "", *_quoted(agent.instructions), ""]
    lines += _tools_section(agent.tools, "### Tools")
    lines += _effects_section(agent)
    lines += _handoffs_section(agent.handoff_targets())
    return lines


def _effects_section(agent: Agent) -> list[str]:
    """The effects the agent's chart runs: which phase runs each, and what it does."""
    if not agent.effects:
        return []
    table = agent.chart or DEFAULT_TABLE
    runs = {effect: phase for phase, effect in table.effects.items()}
    lines = [
        "### Effects",
        "",
        "| effect | run by | what it does | on resume |",
        "|---|---|---|---|",
    ]
    for each in agent.effects:
        phase = f"`{runs[each.name]}`" if each.name in runs else "—"
        doc = _cell(inspect.getdoc(each.fn) or "")
        resume = "runs again if in flight" if each.idempotent else "fails the run if in flight"
        lines.append(f"| `{each.name}` | {phase} | {doc} | {resume} |")
    return [*lines, ""]


def _config_value(agent: Agent, name: str) -> str:
    value = getattr(agent.config, name)
    return "—" if value is None else f"`{value}`"


def _quoted(text: str) -> list[str]:
    return [f"> {line}".rstrip() for line in (text or "(none)").splitlines()]


def _tools_section(tools: Sequence[Tool], heading: str) -> list[str]:
    if not tools:
        return []
    lines = [heading, "", "| tool | what it does | arguments | permission |", "|---|---|---|---|"]
    for tool in tools:
        arguments = ", ".join(f"`{name}`" for name in tool.spec.parameters["properties"]) or "—"
        cells = (f"`{tool.name}`", _cell(tool.description), arguments, _permission(tool))
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def _permission(tool: Tool) -> str:
    said: list[str] = [tool.permission]
    if tool.needs_approval is True:
        said.append("always asks for approval")
    elif tool.needs_approval is not False:
        said.append("asks for approval depending on its arguments")
    if tool.read_only:
        said.append("read-only")
    return ", ".join(said)


def _handoffs_section(targets: Sequence[HandoffTo]) -> list[str]:
    if not targets:
        return []
    lines = ["### Handoffs", "", "| tool | hands off to | purpose |", "|---|---|---|"]
    lines += [f"| `{t.name}` | `{t.agent_name}` | {_cell(t.purpose)} |" for t in targets]
    lines.append("")
    for target in targets:
        if not isinstance(target.agent, str):  # a target by name is documented where defined
            lines += _tools_section(target.agent.tools, f"#### Tools of `{target.agent.name}`")
    return lines


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


# ---------------------------------------------------------------- the chart


def _chart_section(page: ChartPage) -> list[str]:
    table = page.table
    alt = f"{table.name} as a diagram"
    return [
        f"## The chart: `{table.name}`",
        "",
        f"[![{alt}]({page.name}.svg)]({page.name}.svg)",
        "",
        "Each edge is labelled with the ids of its rows, listed in the table below; the "
        f"[detailed diagram]({page.name}-detailed.svg) writes every row out on its edge.",
        "",
        *_demoted(chart_to_markdown(table)),
    ]


def _demoted(markdown: str) -> Iterator[str]:
    """The exporter's Markdown under this page's chart heading: its title dropped, its
    sections one level deeper."""
    lines = markdown.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    while lines and not lines[0].strip():
        lines = lines[1:]
    for line in lines:
        yield "#" + line if line.startswith("#") else line


def add_parser(commands: Any) -> None:
    docs = commands.add_parser(
        "docs",
        help="generate a page per chart for the documentation",
        description=(
            "Write a page, an overview diagram and a detailed diagram per chart into "
            "OUT/charts/. Without --charts, helikon's own reference charts; with it, every "
            "chart file in DIR (files starting with _ are skipped). Each file is imported, "
            "running its code, as `helikon run` does."
        ),
    )
    docs.add_argument("--out", default="docs", help="the docs folder (default: docs)")
    docs.add_argument("--charts", metavar="DIR", help="document the chart files in DIR")
    docs.set_defaults(handler=command_docs)


def command_docs(args: argparse.Namespace) -> int:
    charts = Path(args.charts) if args.charts else None
    if charts is not None and not chart_files(charts):
        found = "is not a folder" if not charts.is_dir() else "holds no chart file (*.py)"
        raise UsageError(f"{args.charts} {found}")
    try:
        written = generate(Path(args.out), charts)
    except (LoadError, ChartDefinitionError, RenderError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or args.out}: {exc.strerror}") from None
    for path in written:
        print(path)
    return 0
