"""A fork beside the run it came from, for the studio's snapshot: the steps of both, which
differ, and where the paths diverge.

A step is compared by what the chart did (the phases it went from and to, the row it took,
the input's kind) and what it appended to the conversation; a replay's steps not yet taken
count as recorded, so a fork of a replay compares against the whole recording.
"""

from __future__ import annotations

from typing import Any

from helikon.core.codec import to_data
from helikon.debug.debugger import Debugger


def fork_rows(debugger: Debugger) -> list[dict[str, Any]]:
    """A run's steps for comparing: those taken, then (a replay) those recorded after."""
    rows = [
        {
            "from": step.state_before.phase,
            "to": step.state_after.phase,
            "row": step.match.row.index,
            "input": step.input.kind,
            "appends": [to_data(i, Any) for i in step.outcome.conversation_appends],
        }
        for step in debugger.history
    ]
    for k in range(len(rows) + 1, len(debugger.expected) + 1):
        line = debugger.expected[k]
        rows.append(
            {
                "from": line.state_before.phase,
                "to": line.state_after.phase,
                "row": line.row.index,
                "input": line.input.kind,
                "appends": [to_data(i, Any) for i in line.appends],
            }
        )
    return rows


def comparison(
    original: Debugger, rows: list[dict[str, Any]], at: int, fork: Debugger
) -> dict[str, Any]:
    """`fork` (forked after `at` steps) beside `original`, whose rows (`fork_rows`) were
    taken when it was forked."""
    mine = fork_rows(fork)
    steps = []
    for k in range(max(len(rows), len(mine))):
        before = rows[k] if k < len(rows) else None
        after = mine[k] if k < len(mine) else None
        steps.append({"step": k + 1, "original": before, "fork": after, "differs": before != after})
    diverged = next((s["step"] for s in steps if s["differs"]), None)
    return {"of": original.run.run_id, "at": at, "steps": steps, "diverged_at": diverged}
