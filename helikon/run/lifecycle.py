"""A run's lifecycle and position: `Lifecycle`, its moves, and `Positioned`, the part of
`Run` that places a run between two steps and moves it through its life; and `Applied`, one
transition as `Run.apply` applied it.

Theory of operation: the chart's state says where the loop is; `Lifecycle` says where the
run around it is: whether it announced itself, listed its tool sources, ran its input
guardrails, claimed a stored run's lease, suspended, or closed (its journal closed, its span
ended). A run makes the moves below itself, each in one place of the driver; `Run.position`
places a run anywhere (a resume, a debugger's rewind or fork) and is the only other way a
lifecycle changes. A move the table does not hold is a bug, raised as `LifecycleError`
naming both states.

```
NEW ──announce──▶ STARTED ──list tools──▶ PREPARED ──check input──▶ RUNNING
NEW ──take recorded tools (a replay)──▶ PREPARED
RESUMING ──claim the lease──▶ PREPARED, or RUNNING once it has called a model
PREPARED, RUNNING ──ask approval──▶ SUSPENDING ──close──▶ SUSPENDED
PREPARED, RUNNING ──close, its chart having ended it──▶ ENDED
```

NEW: built, nothing done; its first step announces it (`RunStarted`) and prepares it.
STARTED: announced, or continuing a stream it did not start (a handoff target, a debugger's
run); its tool sources not listed yet. PREPARED: its tools are fixed; the input guardrails
have not run (they run as its chart's `CheckingInput` check, or, on a chart without one,
before its first model call, which a debugger may perform before it applies a transition:
STARTED becomes RUNNING then). RESUMING: positioned at a stored run's
last step; its first step claims the lease and spends its decisions. RUNNING: the input
guardrails ran, or are not to run again. SUSPENDING: an approval it has no handler for
suspended it; the end of the step closes it. SUSPENDED: closed, waiting for decisions.
ENDED: it finished (its chart's terminal phase), and is closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any, NamedTuple

from helikon.core.errors import HelikonError
from helikon.core.events import AgentEvent
from helikon.core.items import Item
from helikon.core.state import NextAction, TransitionOutcome
from helikon.core.transition import Match
from helikon.run.conversation import Conversation
from helikon.run.stored import Claim

__all__ = ["KEEP", "MOVES", "Applied", "Keep", "Lifecycle", "LifecycleError", "Positioned"]


class Lifecycle(Enum):
    """Where a run is in its life (see the module docstring). Its flags are columns of this
    table, not state of their own (plain attributes: the driver reads some every step):
    `announced` (its `RunStarted` is behind it, or it has none of its own), `prepared` (its
    tools are fixed), `guarded` (its input guardrails ran, or are not to run again),
    `suspended` (it waits for approval decisions) and `closed` (its journal closed, its
    stepper told, its span ended: it ended or suspended)."""

    # fmt: off
    #             label          announced  prepared  guarded  suspended  closed
    NEW        = ("new",         False,     False,    False,   False,     False)
    STARTED    = ("started",     True,      False,    False,   False,     False)
    PREPARED   = ("prepared",    True,      True,     False,   False,     False)
    RESUMING   = ("resuming",    True,      True,     False,   False,     False)
    RUNNING    = ("running",     True,      True,     True,    False,     False)
    SUSPENDING = ("suspending",  True,      True,     True,    True,      False)
    SUSPENDED  = ("suspended",   True,      True,     True,    True,      True)
    ENDED      = ("ended",       True,      True,     True,    False,     True)
    # fmt: on

    def __init__(
        self,
        label: str,
        announced: bool,
        prepared: bool,
        guarded: bool,
        suspended: bool,
        closed: bool,
    ) -> None:
        self.label = label
        self.announced = announced
        self.prepared = prepared
        self.guarded = guarded
        self.suspended = suspended
        self.closed = closed

    @property
    def resumed(self) -> Lifecycle:
        """This lifecycle once the run no longer waits for decisions (a debugger decided,
        or rewound it): RUNNING for a suspended run, itself otherwise."""
        return Lifecycle.RUNNING if self.suspended else self


MOVES: dict[Lifecycle, frozenset[Lifecycle]] = {
    Lifecycle.NEW: frozenset({Lifecycle.STARTED, Lifecycle.PREPARED}),
    Lifecycle.STARTED: frozenset({Lifecycle.PREPARED, Lifecycle.RUNNING}),
    Lifecycle.PREPARED: frozenset({Lifecycle.RUNNING, Lifecycle.SUSPENDING, Lifecycle.ENDED}),
    Lifecycle.RESUMING: frozenset({Lifecycle.PREPARED, Lifecycle.RUNNING}),
    Lifecycle.RUNNING: frozenset({Lifecycle.SUSPENDING, Lifecycle.ENDED}),
    Lifecycle.SUSPENDING: frozenset({Lifecycle.SUSPENDED}),
    Lifecycle.SUSPENDED: frozenset(),
    Lifecycle.ENDED: frozenset(),
}
"""The moves a run makes itself, from each state; `Run.position` is the only other."""


class Keep(Enum):
    """`Run.position`'s default for each of its arguments: the run keeps what it has."""

    KEEP = "keep"


KEEP = Keep.KEEP


class LifecycleError(HelikonError, RuntimeError):
    """A run was asked for a move its lifecycle does not allow (a bug in its driver)."""

    def __init__(self, run_id: str, at: Lifecycle, to: Lifecycle) -> None:
        allowed = ", ".join(sorted(state.name for state in MOVES[at])) or "none"
        super().__init__(
            f"run {run_id!r} is {at.name} and cannot become {to.name} "
            f"(from {at.name} it may become: {allowed})"
        )
        self.run_id, self.at, self.to = run_id, at, to


class Positioned:
    """Where a run is and where it is in its life: the part of `Run` that places it
    (`position`) and moves its lifecycle (`_move`); `Run` provides the rest."""

    run_id: str
    state: Any
    conversation: Conversation
    seq: int
    next_input: Any
    next_action: NextAction | None
    model_calls: int
    _lifecycle: Lifecycle
    _claim: Claim | None
    _resuming: bool

    def position(
        self,
        *,
        state: Any = KEEP,
        conversation: Sequence[Item] | Keep = KEEP,
        seq: int | Keep = KEEP,
        next_input: Any = KEEP,
        next_action: NextAction | Keep | None = KEEP,
        model_calls: int | Keep = KEEP,
        lifecycle: Lifecycle | Keep = KEEP,
        claim: Claim | None = None,
        resumed: bool | Keep = KEEP,
    ) -> None:
        """Place the run between two steps: the one way, besides stepping, that anything of
        where it is changes (a resume from a snapshot or a store, a nested run resumed, a
        debugger's replay, rewind or fork). Each argument left out is kept.

        Args:
            state: the chart's state it is in.
            conversation: its whole conversation.
            seq: the transitions it has taken.
            next_input: the input its next transition applies (None: perform first).
            next_action: the action to perform when `next_input` is None (None: the state's).
            model_calls: the model calls it has made.
            lifecycle: where it is in its life (`helikon.run.lifecycle`), with `claim`
                exactly when it is RESUMING a stored run.
            resumed: its next step is the first of a resumption (a snapshot's, a stored
                run's): that step's time says so (`StepTime.resumed`).

        Raises:
            ValueError: `claim` without RESUMING, or RESUMING without `claim`.
        """
        resuming = lifecycle is Lifecycle.RESUMING
        if resuming != (claim is not None):
            raise ValueError("a run resumes a stored run with what it claims, and only then")
        if state is not KEEP:
            self.state = state
        if not isinstance(conversation, Keep):
            self.conversation = Conversation(conversation)
        if not isinstance(seq, Keep):
            self.seq = seq
        if next_input is not KEEP:
            self.next_input = next_input
        if not isinstance(next_action, Keep):
            self.next_action = next_action
        if not isinstance(model_calls, Keep):
            self.model_calls = model_calls
        if not isinstance(lifecycle, Keep):
            self._lifecycle, self._claim = lifecycle, claim
        if not isinstance(resumed, Keep):
            self._resuming = resumed

    @property
    def lifecycle(self) -> Lifecycle:
        """Where the run is in its life: announced, prepared, suspended, closed, ..."""
        return self._lifecycle

    @property
    def suspended(self) -> bool:
        """Whether the run waits for approval decisions."""
        return self._lifecycle.suspended

    def _move(self, to: Lifecycle) -> None:
        """Make one move of the run's lifecycle (`helikon.run.lifecycle.MOVES`)."""
        if to not in MOVES[self._lifecycle]:
            raise LifecycleError(self.run_id, self._lifecycle, to)
        self._lifecycle = to

    def continue_stream(self) -> None:
        """Let the run continue a stream it did not start (a handoff target, a debugger's
        run): its first step announces nothing (no `RunStarted`)."""
        if self._lifecycle is Lifecycle.NEW:
            self._move(Lifecycle.STARTED)


class Applied(NamedTuple):
    """One transition as `Run.apply` applied it: the run's `seq` after it, the state before
    it, the input it applied, the row it took with each guard's value (`match`; None when
    nothing keeps rows: no trace, store or observer), its outcome, and the events the step
    streams (the outcome's, or the failure of the store that refused to keep it). A tuple:
    one is built every step, and a tuple is the cheapest immutable value to build."""

    seq: int
    before: Any
    input: Any
    match: Match | None
    outcome: TransitionOutcome
    events: tuple[AgentEvent, ...]
