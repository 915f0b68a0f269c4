"""The mkdocs plugin: a fenced `helikon-chart` block becomes the chart's diagram and rows.

In mkdocs.yml:

    plugins:
      - search
      - helikon:
          layout: overview      # or detailed; a block may say otherwise
          root: .               # where chart and trace paths start (mkdocs.yml's folder)

In a page:

    ```helikon-chart
    chart: charts/triage.py
    trace: runs/triage.jsonl    # optional: the run's path drawn over the chart
    layout: detailed            # optional
    implicit: true              # optional: the implicit rows too
    table: false                # optional: the diagram alone
    ```

The block is replaced, before the page is converted, by the diagram as inline SVG (in a
`<div class="helikon-chart">`) and a Markdown table of its rows by id. Blocks inside
another fence (a page showing the syntax, as this one does) are left alone. A block that
cannot be drawn fails the build, naming the page. `mkdocs serve` watches the files a page's
charts were loaded from. Loading a chart imports its file, running its code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.config import config_options
from mkdocs.config.base import Config
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin

from helikon.docsite.block import ChartBlock, DocsiteError, chart_block
from helikon.export.markdown import rows_table

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\n]*)$")
KEYS = ("chart", "trace", "layout", "implicit", "table")


class ChartsConfig(Config):  # type: ignore[no-untyped-call]
    layout = config_options.Choice(("overview", "detailed"), default="overview")
    root = config_options.Optional(config_options.Type(str))


class ChartsPlugin(BasePlugin[ChartsConfig]):  # type: ignore[no-untyped-call]
    """Draws `helikon-chart` blocks; see the module docstring."""

    def __init__(self) -> None:
        self.root = Path.cwd()
        self.watched: set[Path] = set()

    def on_config(self, config: Any) -> Any:
        base = Path(config.config_file_path or "mkdocs.yml").resolve().parent
        self.root = base / (self.config.root or ".")
        return config

    def on_page_markdown(self, markdown: str, /, *, page: Any, **_: Any) -> str:
        try:
            return replace_blocks(markdown, self.root, self.config.layout, self.watched)
        except DocsiteError as exc:
            raise PluginError(f"helikon-chart in {page.file.src_uri}: {exc}") from exc

    def on_serve(self, server: Any, /, **_: Any) -> Any:
        for path in sorted(self.watched):
            server.watch(str(path))
        return server


def replace_blocks(markdown: str, root: Path, layout: str, watched: set[Path]) -> str:
    """`markdown` with every top-level `helikon-chart` fence drawn (see the module docstring).

    Raises:
        DocsiteError: a block names no chart, an unknown key, or a chart that cannot be drawn.
    """
    out: list[str] = []
    lines = iter(markdown.split("\n"))
    for line in lines:
        opened = FENCE.match(line)
        if opened is None:
            out.append(line)
            continue
        body = list(_until_closed(lines, opened.group("fence")))
        if opened.group("info").strip() != "helikon-chart":
            out += [line, *body]
            continue
        options = _options(body[:-1] if body and FENCE.match(body[-1]) else body)
        block = _block(options, root, layout)
        watched.update(block.files)
        out += _markdown(block, options.get("table", "true") != "false")
    return "\n".join(out)


def _until_closed(lines: Iterator[str], fence: str) -> Iterator[str]:
    """The fence's lines up to and including its closing line (or to the end)."""
    for line in lines:
        yield line
        closing = FENCE.match(line)
        if closing and not closing.group("info") and _closes(closing.group("fence"), fence):
            return


def _closes(candidate: str, fence: str) -> bool:
    return candidate[0] == fence[0] and len(candidate) >= len(fence)


def _options(body: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for line in body:
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        key, colon, value = text.partition(":")
        if not colon or key.strip() not in KEYS:
            raise DocsiteError(f"{line.strip()!r}: expected `key: value` with a key of {KEYS}")
        options[key.strip()] = value.strip()
    if not options.get("chart"):
        raise DocsiteError("the block names no chart (`chart: charts/my_agent.py`)")
    return options


def _block(options: dict[str, str], root: Path, layout: str) -> ChartBlock:
    return chart_block(
        options["chart"],
        root=root,
        trace=options.get("trace") or None,
        layout=options.get("layout", layout),
        implicit=options.get("implicit", "false") == "true",
    )


def _markdown(block: ChartBlock, table: bool) -> list[str]:
    lines = ["", '<div class="helikon-chart">', block.svg, "</div>", ""]
    if table:
        lines += [rows_table(block.graph), ""]
    return lines
