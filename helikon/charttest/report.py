"""The coverage table as text: one line a target, then what is covered and what is not.

    row  from          input           guards              checked  hits  via           context
      5  CallingModel  model_response  duplicate_call_ids  FFT         1  transition 1  +probe

`checked` is the guards `match_row` checks for the target, in order, T or F each; `via` says
what hit it (`driver`, `transition` with a numbered note saying why not the driver, `trace`),
and `context` how the path varied the agent's setup.
"""

from __future__ import annotations

from collections import Counter

from helikon.charttest.coverage import Coverage

HEADER = ("row", "from", "input", "guards", "checked", "hits", "via", "context")


def format_coverage(coverage: Coverage) -> str:
    """The coverage table and its summary, ending without a newline."""
    table = coverage.table
    notes: list[str] = []
    lines = []
    for entry in coverage.targets:
        row = table.rows[entry.target.row]
        via = entry.via or "-"
        if entry.via == "transition" and entry.note:
            if entry.note not in notes:
                notes.append(entry.note)
            via = f"transition {notes.index(entry.note) + 1}"
        lines.append(
            (
                str(row.index),
                row.source,
                row.input_kind,
                " and ".join(map(str, row.guards)) or "-",
                entry.target.outcome(),
                str(entry.hits),
                via if entry.hits else "MISSED",
                ", ".join(entry.context) or "-",
            )
        )
    head = f"{coverage.subject}: chart {table.name} ({table.digest[:12]}), {coverage.source}"
    columns = len(HEADER) - 1 if coverage.from_traces else len(HEADER)  # traces vary nothing
    out = [head, "", *_aligned([cells[:columns] for cells in [HEADER, *lines]])]
    out += [f"  {number}: {note}" for number, note in enumerate(notes, 1)]
    return "\n".join([*out, "", *summary(coverage)])


def _aligned(lines: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(cells[i]) for cells in lines) for i in range(len(lines[0]))]
    right = {0, 5}  # numbers are right-aligned
    rendered = []
    for cells in lines:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        rendered.append("  ".join(parts).rstrip())
    return rendered


def summary(coverage: Coverage) -> list[str]:
    """The lines under the table: rows, guard outcomes, implicit rows, witnesses, gaps."""
    declared = set(coverage.declared)
    hit = set(coverage.rows_hit)
    by_via = Counter(t.via for t in coverage.targets if t.hits)
    rows_by_via = {
        via: len({t.target.row for t in coverage.targets if t.hits and t.via == via})
        for via in by_via
    }
    ways = ", ".join(f"{count} {_VIA[via]}" for via, count in sorted(rows_by_via.items()))
    targets = coverage.targets
    done = sum(1 for t in targets if t.hits)
    lines = [
        f"declared rows: {len(hit & declared)} of {len(declared)} covered"
        + (f" ({ways})" if ways else ""),
        f"guard outcomes: {done} of {len(targets)} checked sequences covered",
        _implicit_line(coverage),
    ]
    if not coverage.from_traces:
        lines.append(_witness_line(coverage))
    if coverage.contradictory:
        rows = ", ".join(str(t.row) for t in coverage.contradictory)
        lines.append(f"never checkable (a guard both true and false): rows {rows}")
    gaps = coverage.gaps
    if coverage.paths:
        failed = sum(1 for gap in coverage.failures if gap.startswith("path "))
        lines.append(f"paths: {coverage.paths} run, {failed} failed")
    lines.append(f"gaps: {len(gaps)}" if gaps else "gaps: none")
    lines += [f"  - {gap}" for gap in gaps]
    return lines


_VIA = {"driver": "through the driver", "transition": "over transition only", "trace": "in traces"}


def _implicit_line(coverage: Coverage) -> str:
    implicit = coverage.implicit
    covered = [i for i in implicit if i.hits]
    actions = Counter(coverage.table.rows[i.row].action for i in covered)
    kinds = ", ".join(f"{action} {count}" for action, count in sorted(actions.items()))
    how = "hit by the traces" if coverage.from_traces else "covered over transition"
    text = f"implicit rows: {len(covered)} of {len(implicit)} {how}"
    return text + (f" ({kinds})" if kinds else "")


def _witness_line(coverage: Coverage) -> str:
    if not coverage.unwitnessed:
        return "targets without a witness: none"
    return f"targets without a witness: {len(coverage.unwitnessed)} (listed under gaps)"
