"""Checking what a studio request asks the session for, before anything runs.

Theory of operation: the server hands a request's JSON fields over as it got them (any
JSON value), and the session's commands check them here, on the calling thread, before
touching the debugger's loop: each check returns the value typed as the command wants it,
or raises a `StudioError` whose message names the field and quotes what came, cut short
(`helikon.core.quoting`). What only the debugger can judge (a phase or guard name, a step
past the end) it judges, and the session turns its `DebuggerError` into a `StudioError`.
"""

from __future__ import annotations

from typing import Any

from helikon.core.quoting import quoted
from helikon.debug.completion import BREAK_KINDS
from helikon.debug.debugger import BreakKind, Debugger
from helikon.debug.fork import calls_answer, effect_answer, text_answer, tool_answer
from helikon.studio.errors import StudioError
from helikon.studio.view import EVENT_TYPES


def check_break(kind: object, value: object) -> tuple[BreakKind, str]:
    """A breakpoint request's kind and value, checked; the debugger checks phases and guards.

    Raises:
        StudioError: an unknown kind, a value that is not a non-empty string, or an event
            type no run emits. Tool names are not checked: a model may call one that the
            agent lacks, and that is worth stopping at.
    """
    for known in BREAK_KINDS:
        if kind == known:
            break
    else:
        kinds = ", ".join(BREAK_KINDS)
        raise StudioError(f"a breakpoint's kind is one of {kinds}; got {quoted(kind)}")
    if not isinstance(value, str) or not value.strip():
        raise StudioError(f"a {known} breakpoint needs a value: a non-empty string")
    if known == "event" and value not in EVENT_TYPES:
        raise StudioError(f"no event type {quoted(value)}; event types: {', '.join(EVENT_TYPES)}")
    return known, value


REPLAY_DECIDES_NOT = (
    "a replay runs no tool: decide in a live studio (helikon studio CHART), on a stored run "
    "(helikon studio --store URL RUN_ID --chart CHART) or with helikon runs resume"
)


def check_decisions(decisions: object, *, seq_needed: bool) -> list[dict[str, Any]]:
    """A decide request's decisions, checked: a non-empty list of `{"call_id": str,
    "arguments_hash": str, "approved": bool, "seq": int}`, `seq` (the suspension's, as
    the page was shown it) optional unless `seq_needed`.

    Raises:
        StudioError: the list or one of its decisions is not that.
    """
    if not isinstance(decisions, list) or not decisions:
        raise StudioError("decisions must be a non-empty list")
    shape = '{"call_id": str, "arguments_hash": str, "approved": bool, "seq": int}'
    for given in decisions:
        fields = given if isinstance(given, dict) else {}
        seq = fields.get("seq")
        if not (
            isinstance(fields.get("call_id"), str)
            and isinstance(fields.get("arguments_hash"), str)
            and isinstance(fields.get("approved"), bool)
            and (seq is None or (isinstance(seq, int) and not isinstance(seq, bool)))
        ):
            raise StudioError(f"each decision is {shape}")
        if seq_needed and seq is None:
            raise StudioError(
                f"each decision for a stored run names the suspension it answers: {shape}"
            )
    return decisions


def check_edit(at: object, kind: object, value: object) -> tuple[int, str, Any]:
    """A fork request's step, kind and value, checked (see `ThreadedDebugger.fork`).

    Raises:
        StudioError: one of them is not what a fork takes.
    """
    if isinstance(at, bool) or not isinstance(at, int):
        raise StudioError(f"at must be a whole number of steps; got {quoted(at)}")
    if kind not in ("text", "calls", "tool", "effect"):
        raise StudioError(f"kind is text, calls, tool or effect; got {quoted(kind)}")
    if kind == "tool":
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise StudioError("a tool edit's value is an object of call id to result text")
    elif not isinstance(value, str):
        raise StudioError(f"the {kind} edit's value is a string")
    return at, str(kind), value


def edit_for(debugger: Debugger, kind: str, value: Any) -> Any:
    """The input a checked fork request names, for `debugger` at the fork point.

    Raises:
        DebuggerError: the run does not wait for that kind of input there.
    """
    if kind == "text":
        return text_answer(debugger, value)
    if kind == "calls":
        return calls_answer(debugger, value)
    if kind == "effect":
        return effect_answer(debugger, value)
    return tool_answer(debugger, [part for pair in value.items() for part in pair])


def check_steps(steps: object) -> int:
    """How many steps `back` goes: a positive whole number."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise StudioError(f"steps must be a positive whole number; got {quoted(steps)}")
    return steps


def check_rewind(to: object) -> int:
    """Where `rewind` goes: a whole number of steps (the debugger judges the range)."""
    if isinstance(to, bool) or not isinstance(to, int):
        raise StudioError(f"to must be a whole number of steps; got {quoted(to)}")
    return to


def check_then(then: object) -> list[str] | None:
    """A fork's later answers: a list of texts, or None (the agent's own model)."""
    if then is not None and (
        not isinstance(then, list) or not all(isinstance(t, str) for t in then)
    ):
        raise StudioError("then is a list of texts")
    return then


def check_run_id(run_id: object) -> str | None:
    """Which nested run `step_in` shows: a run id, or None (the only one)."""
    if run_id is not None and not isinstance(run_id, str):
        raise StudioError(f"run_id must be a nested run's id; got {quoted(run_id)}")
    return run_id


def check_breadcrumb(to: object) -> int | None:
    """Where `step_out` goes: a breadcrumb position, or None (one level up)."""
    if to is not None and (isinstance(to, bool) or not isinstance(to, int)):
        raise StudioError(f"to must be a breadcrumb position; got {quoted(to)}")
    return to
