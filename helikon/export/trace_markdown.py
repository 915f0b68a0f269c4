"""Render a `TraceView` as a Markdown summary: outcome, usage, a table of turns, the tool
calls and the effects with their results, and the errors.

Text from the trace is escaped for where it lands: in table cells and lists as one line with
`<`, `>` and `&` as entities and Markdown's punctuation backslash-escaped, in code spans with
a fence longer than any backtick run it holds, in fenced blocks likewise. So a tool output of
`<script>` shows as text in any Markdown viewer, and a `|` cannot split a table row.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from helikon.export.trace_view import (
    EffectView,
    Entry,
    ErrorView,
    GuardrailView,
    HandoffView,
    ModelCall,
    RepairView,
    RunSection,
    ToolCallView,
    TraceView,
    Turn,
    usage_text,
)

CELL_WIDTH = 100
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")


def to_markdown(view: TraceView) -> str:
    """The trace as a Markdown document, ending in a newline."""
    header = view.header
    lines = [f"# Trace of {plain(header.agent)}", "", *_facts(view), ""]
    for text in view.root.input:
        lines += ["## Input", "", *fenced(text, "text"), ""]
    lines += _final(view)
    lines += ["", "## Turns", "", *_turns(view)]
    calls = [(run, turn, e) for run, turn, e in _entries(view) if isinstance(e, ToolCallView)]
    if calls:
        lines += ["", "## Tool calls", "", *_tool_calls(calls)]
    effects = [(run, turn, e) for run, turn, e in _entries(view) if isinstance(e, EffectView)]
    if effects:
        lines += ["", "## Effects", "", *_effects(effects)]
    events = list(_events(view))
    if events:
        lines += ["", "## Handoffs, repairs and guardrails", "", *events]
    errors = list(_errors(view))
    if errors:
        lines += ["", "## Errors", "", *errors]
    return "\n".join(lines) + "\n"


def plain(value: str, width: int | None = CELL_WIDTH) -> str:
    """`value` as inline Markdown text: one line, shortened, nothing in it markup."""
    one_line = " ".join(value.split())
    if width is not None and len(one_line) > width:
        one_line = one_line[: width - 1].rstrip() + "…"
    one_line = one_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", one_line)


def code(value: str, width: int | None = CELL_WIDTH) -> str:
    """`value` as an inline code span, one line, its pipes escaped for table cells."""
    one_line = " ".join(value.split())
    if width is not None and len(one_line) > width:
        one_line = one_line[: width - 1].rstrip() + "…"
    fence = "`" * (_longest_run(one_line, "`") + 1)
    pad = " " if one_line.startswith("`") or one_line.endswith("`") else ""
    return f"{fence}{pad}{one_line.replace('|', chr(92) + '|')}{pad}{fence}"


def fenced(value: str, language: str = "") -> list[str]:
    fence = "`" * max(3, _longest_run(value, "`") + 1)
    return [fence + language, *value.splitlines(), fence]


def _longest_run(value: str, char: str) -> int:
    return max((len(run) for run in re.findall(f"{re.escape(char)}+", value)), default=0)


def _facts(view: TraceView) -> Iterator[str]:
    header, outcome = view.header, view.outcome
    yield "| | |"
    yield "|---|---|"
    yield f"| outcome | **{outcome.status}** |"
    yield f"| run | {code(header.run_id)} |"
    yield f"| chart | {plain(header.chart)} {code(header.chart_digest[:12])} |"
    yield f"| helikon | {plain(header.helikon_version)} |"
    yield f"| usage | {usage_text(view.usage)} |"


def _final(view: TraceView) -> list[str]:
    outcome = view.outcome
    if outcome.status == "completed":
        if outcome.value is not None:
            return ["## Final output", "", *fenced(outcome.value, "json")]
        return ["## Final output", "", *fenced(outcome.text or "", "text")]
    if outcome.status == "failed" and outcome.error is not None:
        error = outcome.error
        return ["## Failed", "", f"**{plain(error.title)}**: {plain(error.message, None)}"]
    if outcome.status == "suspended":
        waiting = [f"- {code(p.tool)} {code(p.arguments)}" for p in outcome.pending]
        return ["## Suspended, waiting for approval", "", *waiting]
    return ["## Unfinished", "", "The trace ends before the run did."]


def _turns(view: TraceView) -> Iterator[str]:
    yield "| agent | run | turn | phase path | model calls | tool calls | usage |"
    yield "|---|---|---|---|---|---|---|"
    for run in view.runs:
        for turn in run.turns:
            path = " → ".join(turn.phases) or "—"
            models = sum(isinstance(e, ModelCall) for e in turn.entries)
            tools = sum(isinstance(e, ToolCallView) for e in turn.entries)
            cells = [plain(run.agent), code(run.run_id), turn.label, path]
            cells += [str(models), str(tools), usage_text(turn.usage)]
            yield "| " + " | ".join(cells) + " |"


def _entries(view: TraceView) -> Iterator[tuple[RunSection, Turn, Entry]]:
    for run in view.runs:
        for turn in run.turns:
            for entry in turn.entries:
                yield run, turn, entry


def _tool_calls(calls: list[tuple[RunSection, Turn, ToolCallView]]) -> Iterator[str]:
    yield "| agent | turn | tool | arguments | approval | status | result |"
    yield "|---|---|---|---|---|---|---|"
    for run, turn, entry in calls:
        approval = entry.approval.status if entry.approval else "—"
        status: str = entry.result.status if entry.result else "no result"
        if entry.result is not None and entry.result.is_error:
            status = f"**{status}**"
        result = code(entry.result.content) if entry.result else "—"
        cells = [plain(run.agent), turn.label, code(entry.name), code(entry.arguments)]
        cells += [approval, status, result]
        yield "| " + " | ".join(cells) + " |"


def _effects(effects: list[tuple[RunSection, Turn, EffectView]]) -> Iterator[str]:
    yield "| agent | turn | phase | effect | arguments | result |"
    yield "|---|---|---|---|---|---|"
    for run, turn, entry in effects:
        cells = [plain(run.agent), turn.label, plain(entry.phase), code(entry.effect)]
        cells += [code(entry.arguments), code(entry.output)]
        yield "| " + " | ".join(cells) + " |"


def _events(view: TraceView) -> Iterator[str]:
    for run, turn, entry in _entries(view):
        where = f"{plain(run.agent)}, {turn.label}"
        if isinstance(entry, HandoffView):
            target = f" (run {code(entry.run.run_id)})" if entry.run else ""
            names = f"{plain(entry.from_agent)} → {plain(entry.to_agent)}"
            yield f"- {where}: handoff {names}{target}"
        elif isinstance(entry, RepairView):
            errors = "; ".join(entry.errors)
            yield f"- {where}: repair attempt {entry.attempt}: {plain(errors, None)}"
        elif isinstance(entry, GuardrailView):
            said = f": {plain(entry.message, None)}" if entry.message else ""
            yield f"- {where}: {entry.stage} guardrail {code(entry.name)} tripped{said}"


def _errors(view: TraceView) -> Iterator[str]:
    for run, turn, entry in _entries(view):
        where = f"{plain(run.agent)}, {turn.label}"
        if isinstance(entry, ErrorView):
            yield f"- {where}: **{plain(entry.title)}**: {plain(entry.message, None)}"
        elif isinstance(entry, ToolCallView) and (entry.failed or entry.denied):
            reason = entry.result.content if entry.result else entry.denied or ""
            yield f"- {where}: tool {code(entry.name)} {code(entry.call_id)}: {plain(reason)}"
