"""`ChartTests`: a subject's chart tests, planned when built and run with `run()`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from helikon.charttest.bench import Bench
from helikon.charttest.coverage import Coverage, check_implicit, coverage_of_runs, implicit_cases
from helikon.charttest.draft import Witness
from helikon.charttest.drive import PathRun, check_over_transition, drive
from helikon.charttest.paths import ChartPath
from helikon.charttest.search import Planner
from helikon.charttest.subject import Subject


class ChartTests:
    """The chart tests of `subject`: a path to every target of its chart (`plan`), each
    run through the driver, or over `transition` where the driver cannot deliver it.

    Args:
        subject: the agent whose chart is tested.
        witnesses: the witnesses to use instead of helikon's and the subject's.
    """

    def __init__(self, subject: Subject, witnesses: Mapping[str, Witness] | None = None) -> None:
        self.bench = Bench(subject)
        self.plan = Planner(self.bench, witnesses).plan()

    async def run_path(self, path: ChartPath) -> PathRun:
        """Run one path: through the driver, or over `transition` if it is blocked."""
        if path.blocked is not None:
            return check_over_transition(self.bench, path)
        return await drive(self.bench, path)

    async def run(self) -> Coverage:
        """Run every path, then the implicit rows' table tests; what they covered."""
        runs = [await self.run_path(path) for path in self.plan.paths]
        ctx = self.bench.ctx(self.bench.base)
        implicit, failures = check_implicit(self.plan.table, implicit_cases(self.plan), ctx)
        return coverage_of_runs(self.plan, runs, implicit, failures)

    def run_sync(self) -> Coverage:
        """`run()` in an event loop of its own."""
        return asyncio.run(self.run())
