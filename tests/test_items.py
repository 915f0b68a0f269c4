"""Conversation items and usage (helikon.core.items): table-driven, no fixtures."""

from __future__ import annotations

from typing import Any

import pytest

from helikon import (
    DEFAULT_TABLE,
    AssistantMessage,
    ModelResponse,
    Start,
    TransitionCtx,
    Usage,
    initial_state,
    transition,
)


def hostile(*counts: Any) -> Usage:
    """A Usage built from what a provider sent, unchecked (as a careless adapter would)."""
    return Usage(*counts)


@pytest.mark.parametrize(
    ("built", "counted"),
    [
        (hostile(None, None, None, 1), Usage(0, 0, 0, 1)),
        (hostile(7, None, 7, None), Usage(7, 0, 7, 0)),
        (hostile(-5, 3, 3, 1), Usage(0, 3, 3, 1)),
        (hostile(float("nan"), float("inf"), 2.0, 1), Usage(0, 0, 2, 1)),
        (hostile("12", True, 1, 1), Usage(0, 0, 1, 1)),
    ],
    ids=["nulls", "some-null", "negative", "non-finite", "not-numbers"],
)
def test_a_count_that_is_not_a_count_is_zero(built: Usage, counted: Usage) -> None:
    assert built == counted
    assert all(type(count) is int for count in (built.input_tokens, built.requests))


@pytest.mark.parametrize(
    ("left", "right", "total"),
    [
        (Usage(1, 2, 3, 1), Usage(10, 20, 30, 1), Usage(11, 22, 33, 2)),
        (Usage(1, 2, 3, 1), hostile(None, None, None, 1), Usage(1, 2, 3, 2)),
        (hostile(None, 4, None, 1), Usage(1, 2, 3, 1), Usage(1, 6, 3, 2)),
    ],
)
def test_usage_adds_field_by_field(left: Usage, right: Usage, total: Usage) -> None:
    assert left + right == total


def test_a_response_with_null_counts_does_not_crash_the_loop() -> None:
    """The budget guard and the context size read the counts of the response itself."""
    ctx = TransitionCtx(table=DEFAULT_TABLE, token_budget=100)
    started = transition(initial_state(ctx), Start(), ctx).next_state
    response = ModelResponse((AssistantMessage("hi"),), hostile(None, None, None, 1))
    outcome = transition(started, response, ctx)
    assert outcome.next_state.phase == "Done"
    assert outcome.next_state.usage == Usage(0, 0, 0, 1)
