"""When things happened: the clock a run reads, and how its times are written.

Theory of operation: a run reads one clock (`clock()`), at its edges only, never in the pure
core: the wall clock once per step (when the step was applied) and the monotonic clock around
each effect (how long a model call, a tool batch or a chart effect took). It keeps them as
floats (seconds) while it runs, and they are written as text only where they leave the
process: a trace line, a stored record (`iso`: UTC, ISO 8601, milliseconds). On Temporal the
workflow takes `workflow.now()` instead, and its activities time themselves.

The clock is a module hook, so a test (and a golden file) fixes it for every run it starts:
`with using_clock(TickingClock()): ...` gives each read the time after the previous one, the
same on every run. Replay comparisons (the debugger's replay, a stored run's resume checks,
Temporal's replay, the runtimes' parity) never compare times: they are not part of a step.

`StepTime` is a step's time as traces and stores write it: when it was applied, how long the
effect whose result it applied took, how long each call of a tool batch ran (`calls`, on the
step whose input is the batch's results: where its results are kept), and whether it is the
first step of a resumption (a stored run resumed after a crash or a suspension, a run
resumed from a snapshot: the gap before it is the pause).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Protocol

from pydantic import Field

from helikon.core.values import value

__all__ = [
    "CallTime",
    "Clock",
    "StepTime",
    "SystemClock",
    "TickingClock",
    "Times",
    "clock",
    "iso",
    "parse_iso",
    "using_clock",
]


class Clock(Protocol):
    """Where a run reads the time: `wall()` in seconds since the Unix epoch (UTC),
    `monotonic()` in seconds from any start, for durations."""

    def wall(self) -> float: ...
    def monotonic(self) -> float: ...


class SystemClock:
    """The system's clocks (`time.time`, `time.monotonic`)."""

    __slots__ = ()

    wall = staticmethod(time.time)
    monotonic = staticmethod(time.monotonic)


class TickingClock:
    """A clock for tests: every read (of either clock) is `tick` seconds after the one
    before, starting at `start` (seconds since the epoch); the same reads give the same
    times on every run."""

    __slots__ = ("now", "tick")

    def __init__(self, start: float = 1_767_225_600.0, tick: float = 0.25) -> None:
        self.now, self.tick = start, tick

    def wall(self) -> float:
        self.now += self.tick
        return self.now

    monotonic = wall


_current: Clock = SystemClock()


def clock() -> Clock:
    """The clock runs read now (the system's, unless `using_clock` set another)."""
    return _current


@contextlib.contextmanager
def using_clock(chosen: Clock) -> Iterator[Clock]:
    """Runs read `chosen` inside the block (tests, golden files), the one before after it."""
    global _current
    before, _current = _current, chosen
    try:
        yield chosen
    finally:
        _current = before


def emitted(event: object) -> float:
    """When `event` was emitted: the time the run stamped it with as it streamed it
    (`Stamped.at`, helikon.core.events), else the clock's now (an event no run streamed)."""
    at: float | None = getattr(event, "at", None)
    return _current.wall() if at is None else at


def iso(at: float) -> str:
    """`at` (seconds since the epoch) as UTC ISO 8601, to the millisecond:
    `2026-01-01T00:00:00.250Z`."""
    text = datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")
    return text.removesuffix("+00:00") + "Z"


def parse_iso(text: str) -> float | None:
    """The seconds since the epoch an `iso` text names; None for text that is not one (a
    stored row's own text is never trusted to be)."""
    try:
        parsed = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


MOST_SECONDS = 1e9
"""The longest duration a trace line or stored record may say (about 31 years)."""


def seconds(duration: float) -> float:
    """A duration as written: seconds, to the microsecond."""
    return round(duration, 6)


Seconds = Annotated[float, Field(ge=0, le=MOST_SECONDS, allow_inf_nan=False)]
"""A duration as written and read: finite, not negative, and at most `MOST_SECONDS` (a
written value is never trusted to be one: a turn's total then cannot overflow a float)."""


@value
class CallTime:
    """How long one tool call ran: `took` seconds (the monotonic clock), call `call_id`."""

    call_id: str
    took: Seconds


CallTimes = tuple[tuple[str, float], ...]
"""Each timed call of a batch as a run keeps it: (call id, seconds), in the calls' order."""

Times = tuple[float, float | None, CallTimes, bool]
"""A step's times as a run keeps them while it runs (`Run.times`), `StepTime.of`'s
arguments: when it was applied (wall), how long the effect before it ran (monotonic; None:
no effect of this run produced its input), each tool call's seconds, whether it is the
first step of a resumption."""


def _no_calls(calls: tuple[CallTime, ...]) -> bool:
    return not calls


@value
class StepTime:
    """A step's time as written (a trace line's `time`, a stored record's): `at`, when it
    was applied (`iso`); `took`, the seconds the effect whose result it applied ran (a
    model call, a tool batch, a chart effect, a handoff; None when no effect of this
    process produced its input); `resumed`, this is the first step a run took after it was
    resumed (a stored run after a crash or a suspension, a run from a snapshot); `calls`,
    on the step whose input is a tool batch's results, each call's own seconds (a call
    this process did not run, one finished before a crash, has none). `calls` is left out
    of the JSON when empty, so a step without calls is written as before it existed."""

    at: str
    took: Seconds | None = None
    resumed: bool = False
    calls: Annotated[tuple[CallTime, ...], Field(exclude_if=_no_calls)] = ()

    @classmethod
    def of(
        cls, at: float, took: float | None, calls: CallTimes = (), resumed: bool = False
    ) -> StepTime:
        timed = tuple([CallTime(call_id, seconds(spent)) for call_id, spent in calls])
        return cls(iso(at), None if took is None else seconds(took), resumed, timed)

    def call(self, call_id: str) -> float | None:
        """The seconds call `call_id` ran, None when it was not timed here."""
        return next((call.took for call in self.calls if call.call_id == call_id), None)


def duration_text(duration: float) -> str:
    """A duration for people: `250 ms`, `1.25 s`, `3 min 5 s`, `2 h 5 min`, `3 d 2 h`."""
    if duration < 1:
        return f"{duration * 1000:.0f} ms"
    if duration < 60:
        return f"{duration:.2f} s"
    whole = int(duration)
    for unit, size, smaller, rest in (("d", 86400, "h", 3600), ("h", 3600, "min", 60)):
        if whole >= size:
            return f"{whole // size} {unit} {whole % size // rest} {smaller}"
    return f"{whole // 60} min {whole % 60} s"


def time_text(at: str | None, *, date: bool = False) -> str:
    """An `iso` time for people, in UTC: `16:03:53.250`, with `date` `2026-12-02
    16:03:53.250 UTC`; text that is no time is shown as it is (cut to 40 characters)."""
    if at is None:
        return ""
    seconds_ = parse_iso(at)
    if seconds_ is None:
        return at[:40]
    moment = datetime.fromtimestamp(seconds_, UTC)
    clock_ = moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
    return f"{moment:%Y-%m-%d} {clock_} UTC" if date else clock_


def gap(before: str | None, after: str | None) -> float | None:
    """Seconds between two `iso` times; None unless both are times."""
    start = None if before is None else parse_iso(before)
    end = None if after is None else parse_iso(after)
    return None if start is None or end is None else end - start
