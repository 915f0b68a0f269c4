"""The output guardrails' rule of charts without a CheckingOutput phase: the rewrite.

Theory of operation: the default chart checks a run's answer in a phase of its own
(CheckingOutput: a completing row holds the answer there, the driver performs the
`CheckGuardrails` action like any other, and the verdict is the input that completes or
fails the run; docs/semantics.md, Guardrails). A chart without that phase never enters it:
the default chart's kept version a15a890f… (which stored runs, snapshots and the recorded
Temporal histories carry, and which resumes and replays on its own rows:
helikon.run.chart_versions) and a custom chart whose completing rows go straight to Done.
For those, and only those, the old rule holds, here alone:

- `to_check`: a step that completes (its next state is Done) of an agent with output
  guardrails is checked before it is kept;
- `checked`: a tripped guardrail rewrites that step's outcome (`trip_output_guardrail`:
  `RunCompleted` gives way to `GuardrailTriggered`, `RunFailed`); a stop during the check
  re-applies the step with the stop as its input (`landed`: the answer was paid for);
- `replayed`: a recording's verdict is taken instead of running the guardrails again (a
  debugger's replay).

Both runtimes call these (helikon.run.driver, helikon.temporal.workflow); a Temporal step
rewritten so travels whole, since the writer cannot rebuild it from its row.

The input guardrails' old rule (checked before the first model call, on a chart that does
not check them as rows: CheckingInput) is not here but in helikon.run.loop (`_first_call`):
it is part of the one dispatch on `NextAction`, which this module's import of the loop
keeps from calling back here.
"""

from __future__ import annotations

from typing import Any

from helikon.core.state import TransitionOutcome
from helikon.core.transition import Match, trip_output_guardrail
from helikon.run.guardrails import recorded_verdict
from helikon.run.loop import RunPort, Stopped, landed

__all__ = ["checked", "replayed", "rewrites", "to_check"]


def rewrites(table: Any) -> bool:
    """Whether runs on `table` check their answer by the rewrite: it has no CheckingOutput
    phase (one lookup in the table's dispatch)."""
    return "CheckingOutput" not in table.dispatch


def to_check(port: RunPort, outcome: TransitionOutcome, rewriting: bool) -> bool:
    """Whether the output guardrails check this step (`checked`): a completing one, when the
    agent has any and its chart `rewrites`. (A test apart from `checked`, so most steps
    await no coroutine for it.)"""
    return rewriting and bool(port.agent.output_guardrails) and outcome.next_state.phase == "Done"


async def checked(
    port: RunPort, inp: Any, match: Match | None, outcome: TransitionOutcome
) -> tuple[Any, Match | None, TransitionOutcome, bool]:
    """A step the output guardrails check (`to_check`), as they leave it: (input, row,
    outcome, tripped). An output that trips a guardrail fails the step instead; a stop
    during the check makes the stop the step's input, landed on the answer checked."""
    output = outcome.next_state.output  # type: ignore[union-attr]  # Done
    try:
        error = await port.check_output(output)
    except Stopped:  # the run does not complete, but the answer it checked was paid for
        stop = port.stopping
        assert stop is not None
        inp = landed(stop, inp)
        match, outcome = port.transition(inp)
        return inp, match, outcome, False
    if error is None:
        return inp, match, outcome, False
    return inp, match, trip_output_guardrail(outcome, error), True


def replayed(outcome: TransitionOutcome, recorded: TransitionOutcome) -> TransitionOutcome:
    """A completing step's outcome with the verdict its recording holds (a debugger's
    replay: guardrails are effects, and are not run again)."""
    error = recorded_verdict(recorded)
    return outcome if error is None else trip_output_guardrail(outcome, error)
