"""Render a `TraceView` as a Mermaid `sequenceDiagram`: who said what to whom, in order.

Participants: the user, each agent (in the order they first ran), the model and the tools.
Messages: the user's input; each model call and its answer (text shortened, or the tools it
asked for); each tool call with its approval (asked of the user) and its result (a crossed
arrow for an error or a denial); handoffs, with the target's run in between; runs of agents
called as tools; repairs, guardrails, compactions and effects (with their results) as notes;
the final output or failure.

Text from the trace is one line, shortened, and made inert: Mermaid reads `;` as the end of
a statement and `#` as the start of a comment, and (in its default, strict mode) shows tags
as text but still breaks lines at `<br>`. Its entity codes (`#59;`) would do, but Mermaid 11
leaves them undecoded in sequence diagrams. So `;`, `#`, `<` and `>` become look-alikes that
no Mermaid version reads as syntax or markup: U+204F (⁏), U+266F (♯), and the single angle
quotation marks U+2039 and U+203A.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from helikon.export.trace_view import (
    ApprovalView,
    CompactionView,
    EffectView,
    Entry,
    ErrorView,
    GuardrailView,
    HandoffView,
    Message,
    ModelCall,
    RepairView,
    RunSection,
    ToolCallView,
    TraceView,
)

INDENT = "    "
WIDTH = 60
_INERT = str.maketrans({";": "\u204f", "#": "\u266f", "<": "\u2039", ">": "\u203a"})


def to_mermaid(view: TraceView) -> str:
    """The trace as Mermaid text, ending in a newline."""
    ids = _participants(view)
    lines = [
        "---",
        # A YAML double-quoted string: JSON's escaping is valid YAML.
        "title: "
        + json.dumps(f"{view.header.agent} · run {view.header.run_id[:12]}", ensure_ascii=False),
        "---",
        "sequenceDiagram",
        f"{INDENT}actor user as user",
        *(f"{INDENT}participant {ids[name]} as {text(name, 40)}" for name in ids),
        f"{INDENT}participant model as model",
        f"{INDENT}participant tools as tools",
    ]
    root = ids[view.root.agent]
    lines += [f"{INDENT}user->>{root}: {text(line)}" for line in view.root.input]
    lines += _run(view.root, ids)
    for run in view.detached:
        lines += _run(run, ids)
    lines.append(_final(view.root, root))
    return "\n".join(lines) + "\n"


def text(value: str, width: int = WIDTH) -> str:
    """`value` on one line, at most `width` characters, made inert for a Mermaid label."""
    one_line = " ".join(value.split())
    if len(one_line) > width:
        one_line = one_line[: width - 1].rstrip() + "…"
    return one_line.translate(_INERT) or " "


def _participants(view: TraceView) -> dict[str, str]:
    ids: dict[str, str] = {}
    for run in view.runs:
        ids.setdefault(run.agent, f"a{len(ids)}")
    return ids


def _run(run: RunSection, ids: dict[str, str]) -> Iterator[str]:
    me = ids[run.agent]
    for turn in run.turns:
        yield f"{INDENT}Note over {me}: {text(run.agent + ' · ' + turn.label)}"
        entries = turn.entries
        for position, entry in enumerate(entries):
            yield from _entry(entry, me, ids, entries[position + 1 :])


def _entry(entry: Entry, me: str, ids: dict[str, str], after: Sequence[Entry]) -> Iterator[str]:
    if isinstance(entry, ModelCall):
        yield f"{INDENT}{me}->>model: {text(entry.purpose)}"
        yield from _answer(me, after)
    elif isinstance(entry, ToolCallView):
        yield from _tool_call(entry, me, ids)
    elif isinstance(entry, HandoffView):
        yield from _handoff(entry, me, ids)
    elif isinstance(entry, ApprovalView):
        yield from _approval(entry, me)
    elif isinstance(entry, RepairView):
        errors = "; ".join(entry.errors)
        yield f"{INDENT}Note over {me}: {text(f'repair {entry.attempt}: {errors}')}"
    elif isinstance(entry, GuardrailView):
        label = f"{entry.stage} guardrail {entry.name} tripped: {entry.message}"
        yield f"{INDENT}Note over {me}: {text(label)}"
    elif isinstance(entry, CompactionView):
        yield f"{INDENT}Note over {me}: {text('compacted: ' + entry.text)}"
    elif isinstance(entry, EffectView):
        label = f"{entry.phase} ran {entry.effect}: {entry.output}"
        yield f"{INDENT}Note over {me}: {text(label)}"
    elif isinstance(entry, ErrorView):
        yield f"{INDENT}Note over {me}: {text(f'{entry.title}: {entry.message}')}"


def _answer(me: str, after: Sequence[Entry]) -> Iterator[str]:
    """The model's answer: its messages, else the tools it called (up to the next call)."""
    messages: list[Message] = []
    calls: list[str] = []
    for entry in after:
        if isinstance(entry, ModelCall):
            break
        if isinstance(entry, Message):
            messages.append(entry)
        elif isinstance(entry, ToolCallView):
            calls.append(entry.name)
        elif isinstance(entry, HandoffView):
            calls.append(f"handoff to {entry.to_agent}")
    for message in messages:
        yield f"{INDENT}model-->>{me}: {text(message.text)}"
    if not messages:
        said = "calls " + ", ".join(calls) if calls else "(no text)"
        yield f"{INDENT}model-->>{me}: {text(said)}"


def _approval(approval: ApprovalView, me: str) -> Iterator[str]:
    yield f"{INDENT}{me}->>user: {text(f'approve {approval.tool}({approval.arguments})?')}"
    if approval.approved is not None:
        arrow = "-->>" if approval.approved else "--x"
        said = approval.status + (f": {approval.reason}" if approval.reason else "")
        yield f"{INDENT}user{arrow}{me}: {text(said)}"


def _tool_call(call: ToolCallView, me: str, ids: dict[str, str]) -> Iterator[str]:
    if call.approval is not None:
        yield from _approval(call.approval, me)
    yield f"{INDENT}{me}->>tools: {text(f'{call.name}({call.arguments})')}"
    if call.run is not None:
        child = ids[call.run.agent]
        yield f"{INDENT}tools->>{child}: {text(' '.join(call.run.input) or call.name)}"
        yield from _run(call.run, ids)
        yield _returned(call.run, child, "tools")
    if call.result is not None:
        failed = call.result.is_error or call.denied is not None
        arrow = "--x" if failed else "-->>"
        yield f"{INDENT}tools{arrow}{me}: {text(f'{call.result.status}: {call.result.content}')}"


def _handoff(handoff: HandoffView, me: str, ids: dict[str, str]) -> Iterator[str]:
    target = ids.get(handoff.to_agent)
    if target is None or handoff.run is None:
        yield f"{INDENT}Note over {me}: {text(f'handoff to {handoff.to_agent}')}"
        return
    label = f"handoff ({handoff.from_agent} to {handoff.to_agent})"
    yield f"{INDENT}{me}->>{target}: {text(label)}"
    yield from _run(handoff.run, ids)
    yield _returned(handoff.run, target, me)


def _returned(run: RunSection, source: str, target: str) -> str:
    outcome = run.outcome
    if outcome.status == "completed":
        said = outcome.value or outcome.text or "completed"
        return f"{INDENT}{source}-->>{target}: {text('done: ' + said)}"
    if outcome.status == "failed" and outcome.error is not None:
        return f"{INDENT}{source}--x{target}: {text('failed: ' + outcome.error.message)}"
    return f"{INDENT}{source}--x{target}: {text(outcome.status)}"


def _final(root: RunSection, me: str) -> str:
    outcome = root.outcome
    if outcome.status == "suspended":
        waiting = ", ".join(p.tool for p in outcome.pending)
        return f"{INDENT}{me}-)user: {text('suspended: waiting for approval of ' + waiting)}"
    return _returned(root, me, "user")
