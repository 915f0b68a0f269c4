"""Readable terminal output for a run's event stream (colour when the terminal has it).

Text from outside (model answers, tool output, what a trace file holds) may carry terminal
control sequences: an OSC that retitles the window or writes the clipboard, a CSI that clears
the screen or moves the cursor. `safe_text` shows every C0 and C1 control character as a
visible escape (ESC as `\\x1b`) before such text is printed; every printer of helikon's goes
through it (`EventPrinter`, `helikon debug`, the approval prompt, `helikon trace` on stdout).
helikon's own colour codes are added by `EventPrinter.paint` around text already escaped, so
they are the only escape sequences that reach the terminal.

The events do not say which phase a turn runs in, nor what an effect phase's effect returned
(an `EffectResult` is an input, not an event). A printer given the run's transitions as well
(`StepNotes`, a trace sink: `Run(trace=...)`) names the phase of every turn outside
`CallingModel`, and prints each effect phase as it starts and the effect's result as it
comes back, cut short (`helikon.core.quoting.cut`). Those values are the ones a trace
records: redacted when the run redacts. Told a stored step's time as well (`helikon runs
show`), it prints how long each model call, tool batch and effect took, and where a stored
run was resumed, after how long a pause.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from helikon.core.errors import describe
from helikon.core.quoting import cut
from helikon.trace.times import duration_text, gap, time_text

_CONTROLS = [*range(0x20), *range(0x7F, 0xA0)]
_SHOWN = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_ONE_LINE = {code: _SHOWN.get(chr(code), f"\\x{code:02x}") for code in _CONTROLS}
_MULTILINE = {code: shown for code, shown in _ONE_LINE.items() if chr(code) not in "\n\t"}

_CODES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def use_colour(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def safe_text(text: str, *, multiline: bool = False) -> str:
    """`text` with every C0 and C1 control character shown as a visible escape.

    ESC becomes `\\x1b`, BEL `\\x07`, a C1 CSI `\\x9b`; newline, tab and carriage return
    read `\\n`, `\\t`, `\\r`. With `multiline`, newlines and tabs are kept (and a CRLF
    line end reads as a newline), for text printed as lines of its own. The result holds no
    control character (but those kept), so escaping it again changes nothing.
    """
    if multiline:
        return text.replace("\r\n", "\n").translate(_MULTILINE)
    return text.translate(_ONE_LINE)


def _short(text: str, limit: int = 160) -> str:
    text = safe_text(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class EventPrinter:
    """Prints events as they arrive: tokens inline, one line for everything else. Told each
    transition too (`step`, through `StepNotes`), it names a turn's phase and shows what an
    effect phase ran and returned."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    colour: bool | None = None
    _streaming: bool = False
    _phase: str | None = None  # the phase the last transition entered, when told (`step`)
    _shown: bool = False  # the text this step's message holds was streamed already
    at: str | None = None  # when the last step told with its time was applied
    _time: Any = None  # the last step's `StepTime`, when told: its calls' seconds

    def __post_init__(self) -> None:
        if self.colour is None:
            self.colour = use_colour(self.out)

    def paint(self, text: str, *styles: str) -> str:
        """`text` escaped (`safe_text`, keeping its lines), in `styles` on a colour terminal."""
        text = safe_text(text, multiline=True)
        if not self.colour or not styles:
            return text
        codes = ";".join(_CODES[style] for style in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def line(self, text: str) -> None:
        if self._streaming:
            self.out.write("\n")
            self._streaming = False
        self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, event: Any) -> None:
        handler = getattr(self, f"_{event.type}", None)
        if handler is not None:
            handler(event)

    def _run_started(self, e: Any) -> None:
        self.line(self.paint(f"● {e.agent}", "bold") + self.paint(f"  run {e.run_id[:12]}", "dim"))

    def step(self, state: Any, inp: Any, time: Any = None) -> None:
        """Take a transition, before its events are printed: `inp` the input it applied,
        `state` the state it entered, `time` its `StepTime` when a store says (a stored
        run shown). Note the phase; print when a stored run was resumed, how long the
        effect that produced `inp` took, the result an effect fed back, and an effect phase
        as it starts."""
        self._phase, self._shown, self._time = state.phase, self._streaming, time
        if time is not None:
            self._timed(inp, time)
        if inp.kind == "effect_result":
            output = json.dumps(inp.output, ensure_ascii=False, sort_keys=True)
            self.line(self.paint(f"  ↳ {inp.effect} returned: {safe_text(cut(output))}", "dim"))
        effect = getattr(state, "effect", None)
        if isinstance(effect, str):
            self.line(self.paint(f"── {state.phase}: effect {effect}", "dim"))

    def _timed(self, inp: Any, time: Any) -> None:
        if time.resumed:
            paused = gap(self.at, time.at)
            after = "" if paused is None else f" after {duration_text(paused)}"
            self.line(self.paint(f"⏵ resumed{after}, at {time_text(time.at, date=True)}", "yellow"))
        self.at = time.at
        what = _TIMED.get(inp.kind)
        if what is not None and time.took is not None:
            took = f"  ⏱ {what} took {duration_text(time.took)} (at {time_text(time.at)})"
            self.line(self.paint(took, "dim"))

    def _turn_started(self, e: Any) -> None:
        self.line(self.paint(f"── {turn_label(e.turn, self._phase)}", "dim"))

    def _token_delta(self, e: Any) -> None:
        self.out.write(safe_text(e.text, multiline=True))
        self.out.flush()
        self._streaming = True

    def _message_output(self, e: Any) -> None:
        if self._streaming:
            self.line("")
        elif not self._shown:
            self.line(safe_text(e.item.content, multiline=True))

    def _tool_call_item(self, e: Any) -> None:
        call = f"{e.item.name}({_short(e.item.arguments)})"
        self.line(self.paint("  ⚙ ", "cyan") + self.paint(call))

    def _tool_output_item(self, e: Any) -> None:
        style = ("red",) if e.item.is_error else ("dim",)
        took = None if self._time is None else self._time.call(e.item.call_id)
        after = "" if took is None else f"  (took {duration_text(took)})"
        self.line(self.paint(f"  ↳ {e.item.status}: {_short(e.item.content)}{after}", *style))

    def _handoff_item(self, e: Any) -> None:
        self.line(self.paint(f"  ⇢ handoff {e.from_agent} → {e.to_agent}", "yellow"))

    def _agent_updated(self, e: Any) -> None:
        self.line(self.paint(f"● {e.agent}", "bold"))

    def _approval_requested(self, e: Any) -> None:
        self.line(self.paint(f"  ? approval needed: {e.tool}({_short(e.args)})", "yellow"))

    def _permission_denied(self, e: Any) -> None:
        self.line(self.paint(f"  ✗ {e.tool} denied ({e.reason})", "red"))

    def _guardrail_triggered(self, e: Any) -> None:
        self.line(self.paint(f"  ! {e.kind} guardrail {e.guardrail}: {e.info}", "red"))

    def _repair_started(self, e: Any) -> None:
        self.line(self.paint(f"  ↻ repairing output: {'; '.join(e.errors)}", "yellow"))

    def _run_completed(self, e: Any) -> None:
        usage = e.output.usage
        self.line(
            self.paint("✓ completed", "green", "bold")
            + self.paint(f"  {usage.requests} model calls, {usage.total_tokens} tokens", "dim")
        )

    def _run_failed(self, e: Any) -> None:
        self.line(self.paint(f"✗ failed: {failure(e.error)}", "red", "bold"))

    def _run_suspended(self, e: Any) -> None:
        names = ", ".join(request.call.name for request in e.pending)
        self.line(self.paint(f"⏸ suspended: waiting for approval of {names}", "yellow", "bold"))


_TIMED = {
    "model_response": "model call",
    "tool_results": "tools",
    "effect_result": "effect",
    "handoff_result": "handoff",
    "approval_decisions": "approval",
}
"""What produced a step's input, by its kind: what its `took` timed."""


def turn_phase(phase: str | None) -> str | None:
    """The phase a turn's line names: `phase`, unless it is CallingModel (the loop's own
    model-calling phase: a turn there is named by its number alone)."""
    return None if phase == "CallingModel" else phase


def turn_label(turn: int, phase: str | None) -> str:
    """`turn 2`, or `turn 2 · Reviewing` for a turn that runs in a phase of its own."""
    named = turn_phase(phase)
    return f"turn {turn}" if named is None else f"turn {turn} · {named}"


@dataclass
class StepNotes:
    """A trace sink (`Run(trace=...)`) that gives `printer` the transitions of run `run_id`
    and of the runs it hands off to, whose events its stream carries (`EventPrinter.step`).

    Agents run as tools (`<run>/<seq>:<call_id>`) stream nothing into it, so their
    transitions are not shown.
    """

    printer: EventPrinter
    run_id: str

    def started(self, run: Any) -> None:
        pass

    def transition(self, run: Any, record: Any) -> None:
        if streamed_by(run.run_id, self.run_id):
            self.printer.step(record.outcome.next_state, record.input)

    def effect(self, run: Any, event: Any) -> None:
        pass

    def stored(self, record: Any) -> None:
        """A stored record (`StepRecord`) of run `run_id` or of a handoff target, read back
        as a Temporal run is followed: the step as `transition` gives it."""
        self.printer.step(record.state_after, record.input)


def streamed_by(run_id: str, root: str) -> bool:
    """Whether run `run_id`'s events are in run `root`'s stream: it is `root`, or a handoff
    target of it (`<root>/<seq>`, at any depth)."""
    if run_id == root:
        return True
    prefix = root + "/"
    return run_id.startswith(prefix) and all(
        part.isdigit() for part in run_id[len(prefix) :].split("/")
    )


def failure(error: Any) -> str:
    """A run's error in one readable line: a store's failure as the store said it (its
    kind, then its message, escaped), any other as `describe` gives it."""
    if error.kind == "store_failed":
        return f"the run store failed ({error.reason}): {safe_text(error.message)}"
    return describe(error)
