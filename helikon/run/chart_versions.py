"""Chart versions: a run finishes on the version of the default chart it started on.

Theory of operation: a stored run, a snapshot and a Temporal history name the digest of the
chart they were recorded on, and resuming or replaying one on another chart is refused. When
the default chart's rows change, its digest changes, and runs recorded on the old rows would
be refused although nothing of theirs changed but helikon. So the package keeps the default
chart's spec at every digest it has had, as data: `helikon/core/chart/kept/<digest>.json`,
a chart document (`helikon.core.chart.document`), never code. `ChartVersions.table(digest)`
compiles the one a run recorded, against today's guards and actions, and checks it compiles
to that digest.

`on_recorded_chart` gives the agent to resume such a run with: when the agent runs a kept
version of the default chart and the run was recorded on another kept version, the agent with
that version's table as its chart; otherwise the agent unchanged, whose chart the identity
checks (`stored.check_identity`, `RunSnapshot.check`, the Temporal registry and writer) then
compare with the recorded one, refusing a changed chart and naming both digests, as before.
It is called by `Run.from_snapshot` and `Run.from_stored` (helikon.run.building) and
`AgentRegistry.facts` (helikon.temporal.registry) before they check the chart.

A change to the default chart adds a file to `kept/` (`kept_document`):
`tests/test_chart_versions.py` lists the kept digests and fails when the default chart's
digest is not among them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import TypeVar

import helikon.core.chart
from helikon.core.chart.compile import compile_chart
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.chart.document import spec_data, spec_from_data
from helikon.core.chart.spec import ChartSpec
from helikon.core.errors import ChartDefinitionError
from helikon.core.table import TransitionTable
from helikon.run.journal import chart_of
from helikon.run.spec import AgentSpec

KEPT = Path(helikon.core.chart.__file__).with_name("kept")
"""Where the package keeps the default chart's versions, one `<digest>.json` each."""

A = TypeVar("A", bound=AgentSpec)


class ChartVersions:
    """The default chart's kept versions in `directory`, one `<digest>.json` each."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def digests(self) -> tuple[str, ...]:
        """The kept digests, sorted."""
        return tuple(sorted(path.stem for path in self.directory.glob("*.json")))

    def table(self, digest: str) -> TransitionTable | None:
        """The compiled table of kept version `digest`; None when it is not kept.

        Raises:
            ChartDefinitionError: the kept data does not compile to its digest (a file
                edited by hand, or a guard or action renamed since).
        """
        if digest not in self.digests():
            return None
        return _compiled(self.directory / f"{digest}.json", digest)


@cache
def _compiled(path: Path, digest: str) -> TransitionTable:
    table = compile_chart(spec_from_data(json.loads(path.read_text(encoding="utf-8"))))
    if table.digest != digest:
        raise ChartDefinitionError(
            f"kept chart version {path.name} compiles to chart {table.digest}, not {digest}"
        )
    return table


def kept_document(spec: ChartSpec) -> str:
    """The text a kept version's file holds: `spec` as a chart document."""
    return json.dumps(spec_data(spec), indent=2, sort_keys=True) + "\n"


DEFAULT_VERSIONS = ChartVersions(KEPT)
"""The versions helikon ships; `on_recorded_chart` reads this name when it is called, so a
test can put a `ChartVersions` of its own in its place."""


def on_recorded_chart(agent: A, recorded: str) -> A:
    """`agent`, on the kept version `recorded` of the default chart when it runs another
    kept version of it; else `agent` itself."""
    if not recorded:
        return agent
    running = chart_of(agent.chart or DEFAULT_TABLE)[0]  # the digest, computed once per table
    if recorded == running:
        return agent
    if running not in DEFAULT_VERSIONS.digests():
        return agent
    table = DEFAULT_VERSIONS.table(recorded)
    return agent if table is None else replace(agent, chart=table)
