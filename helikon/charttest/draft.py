"""`Draft` and `Witness`: how one step of a path is built so that its guards come out right.

A `Draft` is one step in the making: the state it applies to (reached by the steps before
it, read only), the input being built for it, the setup the path runs under, and the context
that setup gives (`ctx`). A `Witness` holds, for one guard, a builder that makes the guard
true and one that makes it false: each takes a draft and returns a changed draft, or None
when it cannot. Builders change the input (a model response's text and calls, decisions, a
handoff's result) or the setup (an output type, limits, probe tools); a setup change makes
the planner replay the path's earlier steps under the new setup.

Builders only propose: the planner checks every draft with `match_row`, which says what the
guards really are, so a builder that gets it wrong costs a search step, never a wrong path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from helikon.charttest.setup import Setup
from helikon.core.context import TransitionCtx
from helikon.core.items import AssistantMessage, Item, ToolCall
from helikon.core.state import ModelResponse

Builder = Callable[["Draft"], "Draft | None"]
"""Makes one guard true (or false) in a draft: the changed draft, or None if it cannot."""


@dataclass(frozen=True)
class Draft:
    """One step being built (see the module docstring).

    Args:
        state: the state the step applies to.
        input: the input built so far (a `TransitionInput`).
        setup: the setup the path runs under.
        ctx: the context `setup` gives the agent.
        step: the step's position in its path (0 is the run's `Start`), for call ids.
        contexts: builds the context of a setup (the planner's, cached).
    """

    state: Any
    input: Any
    setup: Setup
    ctx: TransitionCtx
    step: int
    contexts: Callable[[Setup], TransitionCtx] = field(repr=False, compare=False)

    # ------------------------------------------------------------ reading

    @property
    def items(self) -> tuple[Item, ...]:
        """A model response's items (empty for other inputs)."""
        return tuple(getattr(self.input, "items", ()))

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(item for item in self.items if type(item) is ToolCall)

    @property
    def text(self) -> str:
        return "".join(item.content for item in self.items if type(item) is AssistantMessage)

    # ------------------------------------------------------------ changing

    def with_input(self, inp: Any) -> Draft:
        return replace(self, input=inp)

    def with_setup(self, **changes: Any) -> Draft:
        """The draft under a changed setup (`Setup` field names), its context rebuilt."""
        setup = replace(self.setup, **changes)
        return self.under(setup)

    def under(self, setup: Setup) -> Draft:
        """The draft under `setup`, its context rebuilt."""
        if setup == self.setup:
            return self
        return replace(self, setup=setup, ctx=self.contexts(setup))

    def with_items(self, items: tuple[Item, ...]) -> Draft:
        """A model response with these items (its usage and finish reason kept)."""
        inp = self.input if isinstance(self.input, ModelResponse) else ModelResponse(())
        return self.with_input(replace(inp, items=tuple(items)))

    def with_text(self, text: str) -> Draft:
        """A model response whose text is `text` (one message), its calls kept."""
        kept = tuple(item for item in self.items if type(item) is not AssistantMessage)
        message = (AssistantMessage(text, self.ctx.agent),) if text else ()
        return self.with_items((*message, *kept))

    def with_finish(self, reason: str) -> Draft:
        inp = self.input if isinstance(self.input, ModelResponse) else ModelResponse(())
        return self.with_input(replace(inp, finish_reason=reason))

    def add_call(self, tool: str, arguments: str = "{}", call_id: str | None = None) -> Draft:
        """A model response with one more call to `tool` (a fresh call id unless given)."""
        call = ToolCall(call_id or self.fresh_call_id(), tool, arguments)
        return self.with_items((*self.items, call))

    def keep_calls(self, keep: Callable[[ToolCall], bool]) -> Draft:
        """A model response without the calls `keep` refuses."""
        return self.with_items(
            tuple(item for item in self.items if type(item) is not ToolCall or keep(item))
        )

    def fresh_call_id(self) -> str:
        taken = {call.call_id for call in self.calls}
        number = len(taken)
        while f"call_{self.step}_{number}" in taken:
            number += 1
        return f"call_{self.step}_{number}"


@dataclass(frozen=True)
class Witness:
    """How to make one guard true and how to make it false.

    A chart module gives its custom guards witnesses in a dict named `WITNESSES` (or ending
    in `_WITNESSES`), guard name -> `Witness`. A side left None has no witness: the targets
    that need it are reported, never guessed.

    Args:
        true: makes the guard hold in a draft.
        false: makes it fail.
    """

    true: Builder | None = None
    false: Builder | None = None

    def builder(self, want: bool) -> Builder | None:
        return self.true if want else self.false
