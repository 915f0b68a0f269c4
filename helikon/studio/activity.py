"""What a studio session is doing: its states, the one table of their changes, and what a
request that the state refuses is told.

Theory of operation: a session does one thing at a time, and that thing is an `Activity`.
IDLE takes any command. A command that runs the model or tools (step, continue, a live
decide) or waits on a stored run (a stored decide, following its newer records) moves the
session to its busy activity, and FINISH moves it back to IDLE when that command ends,
however it ends. While CONTINUING, a pause asks the continue to stop after the step in
flight (PAUSING); asking again changes nothing. Commands that move the shown run without
running it (back, rewind, fork, unfork, step in, step out) need IDLE and leave it IDLE
(MOVE). Breakpoints are set and deleted in any activity: they are not in the table.

`next_activity` is the only place an activity changes, and `TRANSITIONS` the only place
the rules are written: a change the table lacks from the activity it is asked in is
refused with the error the server answers (409 `StudioBusy` while busy, 400 otherwise),
naming the activity by its `busy` name, the one the page sees in a snapshot's `busy`.
The table (tests/test_studio_activity.py holds this text to `TRANSITIONS` and `BUSY`):

    activity      busy          change      next activity
    IDLE          null          STEP        STEPPING
                                CONTINUE    CONTINUING
                                DECIDE      DECIDING
                                FOLLOW      FOLLOWING
                                MOVE        IDLE
    STEPPING      "step"        FINISH      IDLE
    CONTINUING    "continue"    PAUSE       PAUSING
                                FINISH      IDLE
    PAUSING       "continue"    PAUSE       PAUSING
                                FINISH      IDLE
    DECIDING      "deciding"    FINISH      IDLE
    FOLLOWING     "follow"      FINISH      IDLE
"""

from __future__ import annotations

from enum import Enum

from helikon.studio.errors import StudioBusy, StudioError


class Activity(Enum):
    """What the session is doing."""

    IDLE = "idle"
    STEPPING = "stepping"
    CONTINUING = "continuing"
    PAUSING = "pausing"
    DECIDING = "deciding"
    FOLLOWING = "following"

    @property
    def busy(self) -> str | None:
        """The name the page sees in a snapshot's `busy` (None: idle; a pausing run is
        still continuing to it)."""
        return BUSY[self]


BUSY: dict[Activity, str | None] = {
    Activity.IDLE: None,
    Activity.STEPPING: "step",
    Activity.CONTINUING: "continue",
    Activity.PAUSING: "continue",
    Activity.DECIDING: "deciding",
    Activity.FOLLOWING: "follow",
}


class Change(Enum):
    """What asks the session to change its activity."""

    STEP = "step"
    CONTINUE = "continue"  # a continue, or a live run's decide (it continues the run)
    DECIDE = "decide"  # a stored run's decide: its source resumes it elsewhere
    FOLLOW = "follow"  # a stored run's newer records, stepped through
    PAUSE = "pause"
    MOVE = "move"  # back, rewind, fork, unfork, step in, step out
    FINISH = "finish"  # the busy command ended


TRANSITIONS: dict[Activity, dict[Change, Activity]] = {
    Activity.IDLE: {
        Change.STEP: Activity.STEPPING,
        Change.CONTINUE: Activity.CONTINUING,
        Change.DECIDE: Activity.DECIDING,
        Change.FOLLOW: Activity.FOLLOWING,
        Change.MOVE: Activity.IDLE,
    },
    Activity.STEPPING: {Change.FINISH: Activity.IDLE},
    Activity.CONTINUING: {Change.PAUSE: Activity.PAUSING, Change.FINISH: Activity.IDLE},
    Activity.PAUSING: {Change.PAUSE: Activity.PAUSING, Change.FINISH: Activity.IDLE},
    Activity.DECIDING: {Change.FINISH: Activity.IDLE},
    Activity.FOLLOWING: {Change.FINISH: Activity.IDLE},
}


def next_activity(activity: Activity, change: Change) -> Activity:
    """The activity `change` leads to from `activity`.

    Raises:
        StudioError: a pause while no continue runs.
        StudioBusy: any other change but FINISH while a command is busy.
        RuntimeError: FINISH while idle (no command was busy: a bug, not a request).
    """
    found = TRANSITIONS[activity].get(change)
    if found is not None:
        return found
    if change is Change.PAUSE:
        raise StudioError("nothing to pause: the run is not continuing")
    if change is Change.FINISH:
        raise RuntimeError(f"nothing to finish: the session is {activity.name}")
    raise StudioBusy(f"the run is busy ({activity.busy}); pause it or wait for it to stop")
