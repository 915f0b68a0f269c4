"""Text for the terminal debugger: steps, rows, inputs, items, events and states as lines.

Pure functions from the debugger's values to strings. Colour comes in as a `Paint` (the
`paint` of `helikon.export.console.EventPrinter`, which honours NO_COLOR and a non-terminal
stdout), so the same lines print plain when piped. Events reuse `EventPrinter`'s wording;
the streamed deltas it prints inline are folded here into one line per run of deltas.

Everything a run or a trace file holds is shown escaped (`safe_text`: its control characters
visible): items and inputs through `clip`, states as JSON, events through `EventPrinter`,
and whatever goes through `paint`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Sequence
from itertools import groupby
from typing import Any, Protocol, get_args

from helikon.core.codec import to_data
from helikon.core.errors import describe
from helikon.core.events import AgentEvent
from helikon.core.state import LoopState
from helikon.core.transition import Match
from helikon.export.console import EventPrinter, safe_text
from helikon.trace.times import duration_text, time_text


class Paint(Protocol):
    def __call__(self, text: str, *styles: str) -> str: ...


def plain(text: str, *styles: str) -> str:
    """A `Paint` that adds no colour."""
    return text


def clip(text: str, limit: int = 100) -> str:
    """`text` on one line, escaped (`safe_text`), cut to `limit` characters with an ellipsis."""
    text = safe_text(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_types() -> tuple[str, ...]:
    """Every event `type` a run can emit, in the order `AgentEvent` lists them."""
    union = get_args(AgentEvent)[0]
    return tuple(cls.__dataclass_fields__["type"].default for cls in get_args(union))


# ---------------------------------------------------------------- items and inputs

_ITEMS: dict[str, Callable[[Any], str]] = {
    "user_message": lambda i: f"user: {i.content}",
    "system_message": lambda i: f"system: {i.content}",
    "assistant_message": lambda i: f"assistant{f' ({i.agent})' if i.agent else ''}: {i.content}",
    "reasoning": lambda i: f"reasoning: {i.content}",
    "tool_call": lambda i: f"call {i.call_id}: {i.name}({i.arguments})",
    "tool_result": lambda i: f"result {i.call_id} {i.status}: {i.content}",
    "compaction_summary": lambda i: f"summary: {i.content}",
}


def describe_item(item: Any) -> str:
    """One conversation item as `who: what`."""
    return _ITEMS[item.type](item)


def _items(items: Iterable[Any]) -> str:
    return "; ".join(describe_item(item) for item in items) or "(no items)"


def _decision(d: Any) -> str:
    return f"{d.call_id} {'approved' if d.approved else 'rejected'}" + (
        f" ({d.reason})" if d.reason else ""
    )


def _handoff_result(inp: Any) -> str:
    if inp.error is not None:
        return f"failed: {describe(inp.error)}"
    return f"output: {inp.output.text if inp.output else None}"


_INPUTS: dict[str, Callable[[Any], str]] = {
    "start": lambda i: _items(i.items),
    "model_response": lambda i: f"{_items(i.items)} [{i.finish_reason}]",
    "tool_results": lambda i: _items(i.results),
    "approval_decisions": lambda i: "; ".join(map(_decision, i.decisions)),
    "handoff_result": _handoff_result,
    "effect_result": lambda i: f"{i.effect} -> {json.dumps(i.output, ensure_ascii=False)}",
    "cancel": lambda i: i.reason or "(no reason)",
    "fail": lambda i: describe(i.error),
}


def describe_input(inp: Any, limit: int = 160) -> str:
    """A transition input as `kind: what it carries`, on one line."""
    return clip(f"{inp.kind}: {_INPUTS[inp.kind](inp)}", limit)


_CARRIES = {"start": "items", "model_response": "items", "tool_results": "results"}


def input_lines(inp: Any, limit: int = 160) -> list[str]:
    """A transition input as its kind, then one line per item it carries (if it has items)."""
    field_name = _CARRIES.get(inp.kind)
    if field_name is None:
        return [describe_input(inp, limit)]
    items = getattr(inp, field_name)
    finish = f" [{inp.finish_reason}]" if inp.kind == "model_response" else ""
    return [inp.kind + finish] + [f"  {clip(describe_item(item), limit)}" for item in items]


# ---------------------------------------------------------------- rows, steps, states


def describe_row(row: Any) -> str:
    """`row 7: CallingModel --model_response [has_tool_calls]--> ExecutingTools (action)`."""
    guards = " and ".join(map(str, row.guards))
    when = f" [{guards}]" if guards else ""
    return f"row {row.index}: {row.source} --{row.input_kind}{when}--> {row.target} ({row.action})"


def match_lines(match: Match, paint: Paint = plain) -> list[str]:
    """The row a transition takes, then every guard checked on the way with its value."""
    lines = [describe_row(match.row)]
    if not match.checked:
        return [*lines, paint("  (no guard checked)", "dim")]
    width = max(len(name) for name, _ in match.checked)
    for name, holds in match.checked:
        shown = paint("true", "green") if holds else paint("false", "dim")
        lines.append(f"  {name:<{width}}  {shown}")
    return lines


def step_line(step: Any, paint: Paint = plain) -> str:
    """`#2 CallingModel → ExecutingTools  on model_response · row 7 execute_tools`, then
    when the step was applied and how long the effect before it took, when it says
    (`· at 16:03:53.250, after 3.50 s`), and `⏵ resumed` where a stored run was resumed."""
    row = step.match.row
    move = f"{step.state_before.phase} → {step.state_after.phase}"
    where = paint(f"· row {row.index} {row.action}{when(step)}", "dim")
    line = f"{paint(f'#{step.seq}', 'bold')} {move}  on {step.input.kind} {where}"
    time = getattr(step, "time", None)
    return line + paint("  ⏵ resumed", "yellow") if time is not None and time.resumed else line


def when(step: Any) -> str:
    """` · at 16:03:53.250, after 3.50 s`: a step's time and its effect's duration, as
    far as it has them (nothing for a step without a time)."""
    time = getattr(step, "time", None)
    if time is None:
        return ""
    took = "" if time.took is None else f", after {duration_text(time.took)}"
    return f" · at {time_text(time.at)}{took}"


def state_lines(state: Any, paint: Paint = plain) -> list[str]:
    """The phase in bold, then each field: items one a line, anything else as JSON."""
    data = to_data(state, LoopState)
    lines = [paint(data.pop("phase"), "bold")]
    for key, shown in data.items():
        found = getattr(state, key, None)
        if isinstance(found, tuple) and found and all(_is_item(x) for x in found):
            lines.append(f"  {key}:")
            lines.extend(f"    {clip(describe_item(item), 200)}" for item in found)
        else:
            lines.append(f"  {key}: {safe_text(json.dumps(shown, ensure_ascii=False))}")
    return lines


def _is_item(value: Any) -> bool:
    return getattr(value, "type", None) in _ITEMS


def conversation_lines(items: Sequence[Any]) -> list[str]:
    """The conversation, one numbered item a line."""
    width = len(str(max(len(items) - 1, 0)))
    return [f"{n:>{width}}  {clip(describe_item(item), 200)}" for n, item in enumerate(items)]


# ---------------------------------------------------------------- events

_DELTAS = frozenset({"token_delta", "reasoning_delta", "tool_call_delta"})


def event_lines(events: Iterable[Any], colour: bool = False) -> list[str]:
    """Events as `helikon run` prints them; each run of streamed deltas becomes one line."""
    return _event_lines(events, EventPrinter(io.StringIO(), colour))


def step_event_lines(step: Any, colour: bool = False) -> list[str]:
    """A step's events as `helikon run` prints them, knowing the step: its turn names the
    phase it entered, and the result an effect fed back (or an effect phase it enters)
    shows after the events that led to the step, before the transition's own."""
    printer = EventPrinter(io.StringIO(), colour)
    lines = _event_lines(step.lead_events, printer)
    printer.step(step.state_after, step.input)
    lines += _drained(printer)
    return lines + _event_lines((*step.outcome.events, *step.effect_events), printer)


def _event_lines(events: Iterable[Any], printer: EventPrinter) -> list[str]:
    lines: list[str] = []
    for kind, group in groupby(events, key=lambda e: e.type if e.type in _DELTAS else None):
        if kind is None:
            lines.extend(_printed(event, printer) for event in group)
        else:
            lines.append(_deltas(kind, list(group), printer.paint))
    return lines


def _printed(event: Any, printer: EventPrinter) -> str:
    printer(event)
    return "\n".join(_drained(printer)) or printer.paint(f"  · {event.type}", "dim")


def _drained(printer: EventPrinter) -> list[str]:
    """The lines `printer` wrote since it was last drained."""
    out = printer.out
    assert isinstance(out, io.StringIO)
    text = out.getvalue()
    out.seek(0)
    out.truncate()
    return text.rstrip("\n").split("\n") if text.strip("\n") else []


def _deltas(kind: str, deltas: list[Any], paint: Paint) -> str:
    if kind == "tool_call_delta":
        names = ", ".join(d.name for d in deltas if d.name)
        return paint(f"  … streaming tool calls: {names or len(deltas)}", "dim")
    text = clip("".join(d.text for d in deltas), 120)
    what = "reasoning" if kind == "reasoning_delta" else "streaming"
    return paint(f'  … {what}: "{text}"', "dim")


# ---------------------------------------------------------------- where the session is


def step_report(step: Any, paint: Paint = plain, colour: bool = False) -> list[str]:
    """A step as the shell prints it: its line, its events indented, any divergence."""
    lines = [step_line(step, paint)]
    lines += ["  " + line for line in step_event_lines(step, colour)]
    if step.divergence:
        lines.append(paint(f"  ! {step.divergence}", "red"))
    return lines


def stop_lines(stop: Any, position: int, paint: Paint = plain) -> list[str]:
    """Why `continue` or `next` stopped, when it was not the end of the run."""
    seq = stop.step.seq if stop.step else position
    if stop.reason == "breakpoint" and stop.breakpoint is not None:
        shown = f"■ stopped at breakpoint {safe_text(stop.breakpoint.describe())} after step {seq}"
        if stop.nested is not None:
            shown += f", hit in nested run {safe_text(stop.nested)}"
        lines = [paint(shown, "yellow", "bold")]
        if stop.nested is not None:
            lines.append(paint("  `step in` opens the nested run", "dim"))
        return lines
    if stop.reason == "diverged":
        return [paint(f"■ the replay diverged at step {seq}", "red", "bold")]
    if stop.reason == "turn":
        return [paint(f"■ a new turn started at step {seq}", "bold")]
    return []


def ended_line(state: Any, paint: Paint = plain) -> str:
    if state.phase == "Done":
        return paint(f"✓ the run completed: {clip(state.output.text or '')}", "green")
    return paint(f"✗ the run failed: {describe(state.error)}", "red")


def where_lines(debugger: Any, paint: Paint = plain) -> list[str]:
    """Where a `Debugger` stands: ended, suspended, at the recording's end, or the next input."""
    state = debugger.state
    if debugger.run.finished:
        return [ended_line(state, paint)]
    if debugger.run.suspended:
        names = ", ".join(request.call.name for request in state.pending)
        return [paint(f"⏸ suspended: waiting for approval of {names}", "yellow")]
    if debugger.finished:
        return [paint(f"the recording ends after step {debugger.position}", "yellow")]
    if debugger.next_input is None:
        return [f"at step {debugger.position}, nothing observed yet"]
    first, *items = input_lines(debugger.next_input)
    nested = [
        paint(f"  nested: {safe_text(run)} (`step in` opens it)", "dim")
        for run in debugger.nested_runs()
    ]
    nested += [
        paint(
            f"  next step starts nested run {safe_text(run)} (`step in` steps into it live)", "dim"
        )
        for run in debugger.runs_ahead()
    ]
    return [f"at step {debugger.position}; {paint('next input', 'bold')}: {first}", *items, *nested]
