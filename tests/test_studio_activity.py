"""The studio session's activity (helikon.studio.activity): every change from every
activity, as a table, with the error a refused one gets."""

from __future__ import annotations

import pytest

import helikon.studio.activity as activity_module
from helikon.studio.activity import TRANSITIONS, Activity, Change, next_activity
from helikon.studio.errors import StudioBusy, StudioError

A, C = Activity, Change
BUSY = "the run is busy ({}); pause it or wait for it to stop"
NOTHING_TO_PAUSE = "nothing to pause: the run is not continuing"

EXPECTED: dict[tuple[Activity, Change], Activity | tuple[type[Exception], str]] = {
    (A.IDLE, C.STEP): A.STEPPING,
    (A.IDLE, C.CONTINUE): A.CONTINUING,
    (A.IDLE, C.DECIDE): A.DECIDING,
    (A.IDLE, C.FOLLOW): A.FOLLOWING,
    (A.IDLE, C.MOVE): A.IDLE,
    (A.IDLE, C.PAUSE): (StudioError, NOTHING_TO_PAUSE),
    (A.IDLE, C.FINISH): (RuntimeError, "nothing to finish: the session is IDLE"),
    (A.CONTINUING, C.PAUSE): A.PAUSING,
    (A.PAUSING, C.PAUSE): A.PAUSING,
    **{(busy, C.FINISH): A.IDLE for busy in A if busy is not A.IDLE},
    **{
        (busy, C.PAUSE): (StudioError, NOTHING_TO_PAUSE)
        for busy in (A.STEPPING, A.DECIDING, A.FOLLOWING)
    },
    **{
        (busy, change): (StudioBusy, BUSY.format(name))
        for busy, name in (
            (A.STEPPING, "step"),
            (A.CONTINUING, "continue"),
            (A.PAUSING, "continue"),
            (A.DECIDING, "deciding"),
            (A.FOLLOWING, "follow"),
        )
        for change in (C.STEP, C.CONTINUE, C.DECIDE, C.FOLLOW, C.MOVE)
    },
}


def test_the_expectations_cover_every_change_from_every_activity() -> None:
    assert set(EXPECTED) == {(activity, change) for activity in A for change in C}
    assert set(TRANSITIONS) == set(A)


@pytest.mark.parametrize(("activity", "change"), list(EXPECTED))
def test_a_change_leads_where_the_table_says_or_is_refused(
    activity: Activity, change: Change
) -> None:
    expected = EXPECTED[activity, change]
    if isinstance(expected, Activity):
        assert next_activity(activity, change) is expected
        return
    error, message = expected
    with pytest.raises(error) as raised:
        next_activity(activity, change)
    assert type(raised.value) is error
    assert str(raised.value) == message


def test_the_page_sees_a_pausing_run_as_continuing_and_an_idle_one_as_not_busy() -> None:
    assert {activity: activity.busy for activity in A} == {
        A.IDLE: None,
        A.STEPPING: "step",
        A.CONTINUING: "continue",
        A.PAUSING: "continue",
        A.DECIDING: "deciding",
        A.FOLLOWING: "follow",
    }


def test_the_module_header_draws_the_table_as_it_is() -> None:
    """The table in helikon.studio.activity's header, written out from `TRANSITIONS`."""
    lines = []
    for activity, changes in TRANSITIONS.items():
        busy = "null" if activity.busy is None else f'"{activity.busy}"'
        for k, (change, target) in enumerate(changes.items()):
            first = f"{activity.name:<14}{busy:<14}" if k == 0 else " " * 28
            lines.append(f"    {first}{change.name:<12}{target.name}")
    assert "\n".join(lines) in (activity_module.__doc__ or "")
