"""The planner: a path from the initial state to every target, over the pure `transition`.

Theory of operation: a path is a list of targets, one a step, and a setup. `realise` turns
it into inputs: from the initial state, each step starts from a plain input of its kind and
the witnesses of its target's guards change it, in the order `match_row` checks them, until
`match_row` says the step selects exactly its target (a few rounds, since a later builder
may undo an earlier one). When a builder changes the setup, the path is realised again from
the start under the new setup, so every step of a path runs under one setup.

The search is breadth first over (setup, phase) nodes, so the first path found to a target
is among the shortest. A path the driver can deliver replaces one it cannot; a target whose
own step the driver can never deliver (a response its stream assembler cannot build) keeps
the path it has, to be checked over `transition`. A target needing a guard outcome no witness
builds is reported and never searched for.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from helikon.charttest.bench import Bench, SetupRefused
from helikon.charttest.draft import Draft, Witness
from helikon.charttest.inputs import delivered, first_input, undeliverable
from helikon.charttest.paths import ChartPath, PathStep, Plan, Unwitnessed, approval_mode
from helikon.charttest.setup import Setup
from helikon.charttest.targets import Target, targets_of
from helikon.charttest.witnesses import BUILTIN_WITNESSES
from helikon.core.chart.guards import GUARDS
from helikon.core.items import Usage
from helikon.core.state import TERMINAL_PHASES, ModelResponse
from helikon.core.transition import initial_state, match_row, transition

MAX_STEPS = 12
"""The longest path searched for."""
ROUNDS = 3
"""Times a step's witnesses are applied in order before the step is given up."""
REPLAYS = 8
"""Setup changes one path may go through before it is given up."""


@dataclass(frozen=True, slots=True)
class _Built:
    draft: Draft
    input: Any = None
    blocked: str | None = None


@dataclass(frozen=True, slots=True)
class _Realised:
    setup: Setup
    steps: tuple[PathStep, ...]
    states: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _Node:
    setup: Setup
    targets: tuple[Target, ...]
    state: Any


def witnesses_for(bench: Bench) -> dict[str, Witness]:
    """The witnesses of the subject's chart: helikon's for helikon's guards (a chart that
    registers another function under a helikon guard's name gets none of helikon's for it),
    then the subject's own."""
    own: dict[str, Witness] = {}
    for rows in bench.table.dispatch.values():
        for compiled in rows.values():
            for entry in compiled:
                for ref, (guard, _) in zip(entry.row.guards, entry.checks, strict=True):
                    if GUARDS.get(ref.name) is guard and ref.name in BUILTIN_WITNESSES:
                        own[ref.name] = BUILTIN_WITNESSES[ref.name]
    return {**own, **bench.subject.witnesses}


class Planner:
    """Finds the paths of one subject's chart (`plan()`)."""

    def __init__(self, bench: Bench, witnesses: Mapping[str, Witness] | None = None) -> None:
        self.bench = bench
        self.witnesses = dict(witnesses if witnesses is not None else witnesses_for(bench))
        self.table = bench.table

    # ------------------------------------------------------------ the search

    def plan(self) -> Plan:
        found = targets_of(self.table)
        unwitnessed = tuple(self._unwitnessed(found.reachable))
        missing = {gap.target for gap in unwitnessed}
        wanted = [target for target in found.reachable if target not in missing]
        best, samples = self._search(wanted)
        unreached = tuple(target for target in wanted if target not in best)
        return Plan(
            subject=self.bench.subject.name,
            table=self.table,
            base=self.bench.base,
            paths=tuple(best[target] for target in wanted if target in best),
            unwitnessed=unwitnessed,
            unreached=unreached,
            contradictory=found.contradictory,
            samples=tuple(samples.values()),
        )

    def _unwitnessed(self, targets: tuple[Target, ...]) -> Iterator[Unwitnessed]:
        for target in targets:
            for name, value in target.checked:
                witness = self.witnesses.get(name)
                if witness is None or witness.builder(value) is None:
                    yield Unwitnessed(target, name, value)
                    break

    def _search(self, wanted: list[Target]) -> tuple[dict[Target, ChartPath], dict[str, Any]]:
        by_phase: dict[str, list[Target]] = {}
        for target in wanted:
            by_phase.setdefault(self.table.rows[target.row].source, []).append(target)
        base = self.bench.base
        start = initial_state(self.bench.ctx(base), _spent(base))
        queue = deque([_Node(base, (), start)])
        seen: set[tuple[Setup, str, bool]] = set()  # (setup, phase, drivable) after a start
        best: dict[Target, ChartPath] = {}
        final: set[Target] = set()
        samples: dict[str, Any] = {start.phase: start}
        while queue and len(final) < len(wanted):
            node = queue.popleft()
            if len(node.targets) >= MAX_STEPS:
                continue
            for target in by_phase.get(node.state.phase, ()):
                starts = self.table.rows[target.row].input_kind == "start"
                if starts == bool(node.targets):  # a run's first input, and only it, is Start
                    continue
                realised = self.realise(node.setup, (*node.targets, target))
                if realised is None:
                    continue
                path = ChartPath(target, realised.setup, realised.steps)
                blocked = path.blocked or approval_mode(path, realised.states)[1]
                _offer(best, final, path, blocked)
                for state in realised.states:
                    samples.setdefault(state.phase, state)
                end = realised.states[-1]
                key = (realised.setup, end.phase, blocked is None)
                if end.phase not in TERMINAL_PHASES and key not in seen:
                    seen.add(key)
                    queue.append(_Node(realised.setup, path.targets, end))
        return best, samples

    # ------------------------------------------------------------ one path

    def realise(self, setup: Setup, targets: tuple[Target, ...]) -> _Realised | None:
        """The inputs of a path of `targets` under `setup` (or the setup it chooses)."""
        for _ in range(REPLAYS):
            try:
                result = self._replay(setup, targets)
            except SetupRefused:
                return None
            if not isinstance(result, Setup):
                return result
            setup = result
        return None

    def _replay(self, setup: Setup, targets: tuple[Target, ...]) -> _Realised | Setup | None:
        ctx = self.bench.ctx(setup)
        state = initial_state(ctx, _spent(setup))
        steps: list[PathStep] = []
        states = [state]
        for position, target in enumerate(targets):
            kind = self.table.rows[target.row].input_kind
            inp = first_input(kind, state, ctx, self.bench.subject.input)
            draft = Draft(state, inp, setup, ctx, position, self.bench.ctx)
            built = self._build(draft, target)
            if built is None:
                return None
            if built.draft.setup != setup:
                return built.draft.setup
            steps.append(PathStep(target, built.input, built.blocked))
            state = transition(state, built.input, ctx).next_state
            states.append(state)
        return _Realised(setup, tuple(steps), tuple(states))

    def _build(self, draft: Draft, target: Target) -> _Built | None:
        setup = draft.setup
        for _ in range(ROUNDS):
            for name, value in target.checked:
                builder = self.witnesses[name].builder(value)
                assert builder is not None  # targets without a witness are never searched
                try:
                    changed = builder(draft)
                except Exception:  # a builder that fails cannot make this step
                    return None
                if changed is None:
                    return None
                draft = changed
            if draft.setup != setup:
                return _Built(draft)
            built = self._selects(draft, target)
            if built is not None:
                return built
        return None

    def _selects(self, draft: Draft, target: Target) -> _Built | None:
        """The step, if `draft` selects `target`: as the driver would deliver it when that
        selects it too, else as drafted (an input only `transition` can be fed)."""
        raw = draft.input
        candidates = [raw]
        if isinstance(raw, ModelResponse):
            streamed = delivered(raw, draft.ctx.agent)
            if streamed != raw:
                candidates.insert(0, streamed)
        for inp in candidates:
            if _matches(draft.state, inp, draft, target):
                blocked = undeliverable(draft.state, inp, draft.ctx, draft.step == 0)
                return _Built(draft, inp, blocked)
        return None


def _matches(state: Any, inp: Any, draft: Draft, target: Target) -> bool:
    try:
        match = match_row(state, inp, draft.ctx)
    except Exception:  # a custom guard that raises on this input: not a match
        return False
    return match.row.index == target.row and match.checked == target.checked


def _offer(
    best: dict[Target, ChartPath], final: set[Target], path: ChartPath, blocked: str | None
) -> None:
    """Keep `path` for its target if it is the first, or the first the driver can run."""
    target = path.target
    if target in final:
        return
    known = best.get(target)
    if known is None or blocked is None:
        best[target] = path if blocked is None else path.checked_over_transition(blocked)
    if blocked is None or path.steps[-1].blocked is not None:
        final.add(target)  # the driver runs it, or can never run this target's own step


def _spent(setup: Setup) -> Usage:
    return Usage(setup.spent, 0, setup.spent, 0)
