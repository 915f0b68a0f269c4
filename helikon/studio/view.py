"""What the studio shows of a debugger: plain JSON-able data, built from its frames.

Theory of operation: a snapshot reads only the debugger's `history`, `frames` and `log`.
A step updates those together, after its last await, so a snapshot taken while a step is in
flight (during `continue`) shows the last finished step, never half of one; `run.state` and
`run.conversation` change mid-step and are not read here. Everything is pure: no IO, no
Graphviz (the server adds the diagram).

Values (states, inputs, items, events) go out through `helikon.core.codec.to_data`, so the page
sees the same JSON a trace holds. Events are also given a one-line `text`, with runs of
streaming deltas folded into one entry, so a timeline stays readable; a turn's text names the
phase it runs in, and a step that an effect's result drove carries that result (`effect`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from helikon.core.codec import to_data
from helikon.core.quoting import cut
from helikon.core.table import Row, TransitionTable
from helikon.core.transition import Match
from helikon.debug.debugger import Breakpoint, Debugger, Step, Stop
from helikon.debug.view import event_types
from helikon.export.console import turn_label, turn_phase
from helikon.models.scripted import ScriptedModel
from helikon.trace.times import duration_text, time_text

TEXT_LIMIT = 240
_FOLDED = frozenset({"token_delta", "reasoning_delta", "tool_call_delta"})


EVENT_TYPES = event_types()


def chart_facts(debugger: Debugger) -> dict[str, Any]:
    """What the page needs once: the chart's phases and guards, the tools, the event types."""
    table = debugger.run.ctx.table
    return {
        "name": table.name,
        "digest": table.digest,
        "initial": table.initial,
        "phases": [{"name": p.name, "final": p.final} for p in table.phases],
        "guards": sorted(table.guard_docs),
        "tools": sorted(debugger.run.tools),
        "events": list(EVENT_TYPES),
    }


def snapshot(
    debugger: Debugger,
    *,
    mode: str,
    busy: str | None = None,
    stop: dict[str, Any] | None = None,
    error: str | None = None,
    hidden: Iterable[int] = (),
) -> dict[str, Any]:
    """The debugger as the page shows it; see the module docstring.

    Args:
        debugger: the debugger to show.
        mode: "live" or "replay".
        busy: the command in flight ("step", "continue"), if any.
        stop: why the last `continue` stopped (`stop_data`).
        error: the last command's failure, to show.
        hidden: ids of breakpoints the studio set for itself (pausing), not listed.
    """
    frame = debugger.frames[-1]
    table = debugger.run.ctx.table
    history = debugger.history
    hidden_ids = set(hidden)
    upcoming = None
    if frame.next_input is not None and busy is None:
        match = debugger.peek()  # recorded in a replay without its chart, else computed
        upcoming = None if match is None else match_data(table, match)
    return {
        "mode": mode,
        "scripted": isinstance(debugger.run.agent.model, ScriptedModel),
        "agent": debugger.run.agent.name,
        "run_id": debugger.run.run_id,
        "phase": frame.state.phase,
        "seq": frame.seq,
        "position": len(history),
        "recorded": None if debugger.followed else len(debugger.expected) or None,
        "finished": busy is None and debugger.finished,
        "busy": busy,
        "stop": stop,
        "error": error,
        "state": to_data(frame.state, Any),
        "next_input": None if frame.next_input is None else input_data(frame.next_input),
        "next_row": upcoming,
        "conversation": [to_data(item, Any) for item in debugger.log[: frame.conversation_len]],
        "last_step": step_data(table, history[-1]) if history else None,
        "path": [step.match.row.index for step in history],
        "history": [step_summary(step) for step in history],
        "breakpoints": [breakpoint_data(b) for b in debugger.breakpoints if b.id not in hidden_ids],
    }


def input_data(inp: Any) -> dict[str, Any]:
    return {"kind": inp.kind, "value": to_data(inp, Any)}


def row_data(row: Row) -> dict[str, Any]:
    return {
        "index": row.index,
        "source": row.source,
        "input": row.input_kind,
        "guards": [str(guard) for guard in row.guards],
        "target": row.target,
        "action": row.action,
        "implicit": row.implicit,
    }


def attempts(table: TransitionTable, row: Row, checked: Sequence[tuple[str, bool]]) -> list[Any]:
    """The rows tried before and including the one taken, each with its guards' values.

    `Match.checked` is flat, in the order the guards were evaluated; the rows tried for
    (`row.source`, `row.input_kind`) say which guard belonged to which row: a row's guards are
    checked in order until one has the wrong value.
    """
    remaining = list(checked)
    tried: list[Any] = []
    for candidate in table.rows_for(row.source, row.input_kind):
        guards = []
        holds = True
        for ref in candidate.guards:
            if not remaining:
                break
            name, value = remaining.pop(0)
            guards.append({"name": name, "expected": ref.expected, "value": value})
            if value is not ref.expected:
                holds = False
                break
        taken = candidate.index == row.index
        tried.append({"row": row_data(candidate), "guards": guards, "taken": taken})
        if taken or holds:
            break
    return tried


def match_data(table: TransitionTable, match: Match) -> dict[str, Any]:
    return {
        "row": row_data(match.row),
        "checked": [[name, value] for name, value in match.checked],
        "attempts": attempts(table, match.row, match.checked),
    }


def step_data(table: TransitionTable, step: Step) -> dict[str, Any]:
    """One step in full: the input, the row and its guards, the events, the divergence."""
    return {
        **step_summary(step),
        "input": input_data(step.input),
        "match": match_data(table, step.match),
    }


def step_summary(step: Step) -> dict[str, Any]:
    return {
        "seq": step.seq,
        "from": step.state_before.phase,
        "to": step.state_after.phase,
        "input_kind": step.input.kind,
        "row": step.match.row.index,
        "action": step.match.row.action,
        "events": event_entries(step.events, step.state_after.phase),
        "effect": effect_data(step.state_before, step.input),
        "divergence": step.divergence,
        **time_data(step),
    }


def time_data(step: Step) -> dict[str, Any]:
    """When a step was applied (`at`, UTC, to the millisecond), how long the effect that
    produced its input took (`took`), and whether a stored run was resumed at it."""
    time = step.time
    if time is None:
        return {"at": None, "took": None, "resumed": False}
    took = None if time.took is None else duration_text(time.took)
    return {"at": time_text(time.at), "took": took, "resumed": time.resumed}


def effect_data(state: Any, inp: Any) -> dict[str, Any] | None:
    """What the effect of effect phase `state` returned, when `inp` is its result: the
    phase, the effect and its output as one line of JSON, cut short; else None."""
    if inp.kind != "effect_result":
        return None
    output = json.dumps(inp.output, ensure_ascii=False, sort_keys=True)
    return {"phase": state.phase, "effect": inp.effect, "text": cut(output)}


def event_entries(events: Iterable[Any], phase: str | None = None) -> list[dict[str, Any]]:
    """Events as `{type, text, count}`, consecutive deltas of one type folded together; a
    turn started in `phase` (the phase the step entered) names it, as `helikon run` does."""
    entries: list[dict[str, Any]] = []
    for event in events:
        kind = event.type
        text = event_text(event)
        if kind == "turn_started" and turn_phase(phase) is not None:
            text = turn_label(event.turn, phase)
        last = entries[-1] if entries else None
        if last is not None and kind in _FOLDED and last["type"] == kind:
            last["count"] += 1
            last["text"] = _clip(last["full"] + text)
            last["full"] += text
            continue
        entries.append({"type": kind, "text": _clip(text), "count": 1, "full": text})
    for entry in entries:
        del entry["full"]
    return entries


def event_text(event: Any) -> str:
    """A short human line for one event."""
    kind = event.type
    if kind in ("token_delta", "reasoning_delta"):
        return str(event.text)
    if kind == "tool_call_delta":
        return str(event.args_delta)
    if kind == "tool_call_item":
        return f"{event.item.name}({event.item.arguments})"
    if kind == "tool_output_item":
        return f"{event.item.call_id}: {event.item.content}"
    if kind == "message_output":
        return str(event.item.content)
    data = to_data(event, Any)
    if isinstance(data, dict):
        data.pop("type", None)
    return json.dumps(data, separators=(", ", ": "), ensure_ascii=False)


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"


def breakpoint_data(breakpoint: Breakpoint) -> dict[str, Any]:
    value = breakpoint.value
    if breakpoint.kind == "predicate":
        value = getattr(value, "__name__", "predicate")
    return {
        "id": breakpoint.id,
        "kind": breakpoint.kind,
        "value": str(value),
        "enabled": breakpoint.enabled,
        "text": breakpoint.describe(),
    }


def stop_data(stop: Stop, *, paused_by: int | None = None) -> dict[str, Any]:
    """Why `continue` stopped; a hit of the studio's own pause breakpoint reads "paused"."""
    hit = stop.breakpoint
    paused = hit is not None and hit.id == paused_by
    return {
        "reason": "paused" if paused else stop.reason,
        "seq": stop.step.seq if stop.step else None,
        "breakpoint": None if hit is None or paused else breakpoint_data(hit),
        "divergence": stop.step.divergence if stop.step else None,
    }
