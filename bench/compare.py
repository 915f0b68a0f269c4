"""Is a change slower? `python bench/compare.py OLD [NEW] [--rounds N] [--quick]`

OLD and NEW are each a git revision of this repository or the path of a checkout; NEW is
this working tree (its uncommitted changes included) when left out. A revision is exported
(`git archive`) into a temporary directory, so each side runs its own copy of helikon and of
the benchmarks.

The two sides run alternately, each bench in a subprocess of its own (`python -P
bench/figures.py BENCH` with the side's `bench/` and root first on PYTHONPATH), `--rounds`
times each (7 at least), the order of the two flipped every round so a machine getting
busier weighs on both; each figure is the best over the rounds of a best over a few
repeats inside the subprocess, in CPU time (bench/figures.py says what each one times). A
checkout without bench/figures.py (a revision before it existed) is measured by this
checkout's copy of it, which imports that checkout's own benchmark pieces.

Compared, new best / old best against a limit:

- the default chart's step in bench/transition.py: at most 5% worse;
- helikon's CPU per turn in each bench/driver.py scenario, and helikon + SqliteRunStore
  NORMAL's at 10x1, 50x4 and 200x1 (bench/durable.py's scenarios): at most 10% worse each.

A bench with a figure over its limit is run again once, all its rounds, and its figures are
judged on that second run alone. Prints one table (figure, old best, new best, ratio, limit,
ok/MISS) and exits 1 when a figure still misses, 2 when a side could not be measured.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BENCHES = ("transition", "driver", "durable")
LIMITS = {"transition": 1.05, "driver": 1.10, "durable": 1.10}
MIN_ROUNDS = 7
SIDES = ("old", "new")

Figures = dict[str, float]
Measure = Callable[["Checkout", str], Figures]  # (checkout, bench) -> its figures, one run


class CompareError(Exception):
    """A side could not be checked out or measured; the message says which and why."""


@dataclass(frozen=True)
class Checkout:
    """One side of the comparison: what the user named, and the tree it stands for."""

    side: str  # "old" or "new"
    named: str  # the revision or path given
    root: Path

    def figures_script(self) -> Path:
        """The checkout's own bench/figures.py, or this one's when it has none."""
        own = self.root / "bench" / "figures.py"
        return own if own.is_file() else HERE / "figures.py"


# ---------------------------------------------------------------- checkouts


def resolve(side: str, named: str, scratch: Path) -> Checkout:
    """A checkout for `named`: an existing directory as it is, else a git revision of this
    repository exported into `scratch`.

    Raises:
        CompareError: `named` is neither.
    """
    path = Path(named)
    if path.is_dir():
        return Checkout(side, named, path.resolve())
    found = _git("rev-parse", "--verify", "--quiet", f"{named}^{{commit}}")
    if found.returncode != 0:
        raise CompareError(f"{side}: {named!r} is neither a directory nor a revision of {REPO}")
    commit = found.stdout.decode().strip()
    root = scratch / f"{side}-{commit[:12]}"
    archive = _git("archive", "--format=tar", commit)
    if archive.returncode != 0:
        raise CompareError(f"{side}: git archive {commit} failed: {archive.stderr.decode()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(root, filter="data")
    return Checkout(side, f"{named} ({commit[:12]})", root)


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=False)


# ---------------------------------------------------------------- one measurement


def measure_in_subprocess(quick: bool) -> Measure:
    """A `Measure` that runs the checkout's bench/figures.py in a fresh interpreter."""

    def measure(checkout: Checkout, bench: str) -> Figures:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = os.pathsep.join((str(checkout.root / "bench"), str(checkout.root)))
        command = [sys.executable, "-P", str(checkout.figures_script()), bench]
        done = subprocess.run(
            [*command, *(["--quick"] if quick else [])],
            cwd=checkout.root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise CompareError(f"{checkout.side} ({checkout.named}), {bench} failed:\n{tail}")
        return parse_figures(done.stdout, checkout, bench)

    return measure


def parse_figures(stdout: str, checkout: Checkout, bench: str) -> Figures:
    """The figures of bench/figures.py's output (its last line, a JSON object), checked to
    be the bench asked for and to come from the checkout's own helikon.

    Raises:
        CompareError: the output is not that.
    """
    lines = stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1])
        measured, figures = Path(data["helikon"]), data["figures"]
    except (IndexError, ValueError, KeyError, TypeError):
        raise CompareError(
            f"{checkout.side}: {bench} printed no figures: {stdout[-300:]!r}"
        ) from None
    if data.get("bench") != bench:
        raise CompareError(f"{checkout.side}: asked for {bench}, got {data.get('bench')!r}")
    if not measured.resolve().is_relative_to(checkout.root):
        raise CompareError(
            f"{checkout.side}: measured the helikon in {measured}, not the one in {checkout.root}"
        )
    if not isinstance(figures, dict) or not all(
        isinstance(v, int | float) and v > 0 for v in figures.values()
    ):
        raise CompareError(f"{checkout.side}: {bench}'s figures are not positive numbers")
    return {str(name): float(value) for name, value in figures.items()}


# ---------------------------------------------------------------- rounds and bests


Bests = dict[str, dict[str, Figures]]  # bench -> side -> figure -> best


def keep_best(bests: Bests, bench: str, side: str, figures: Figures) -> None:
    """Fold one run's figures into the bests so far (the lower, figure by figure)."""
    kept = bests.setdefault(bench, {}).setdefault(side, {})
    for name, value in figures.items():
        kept[name] = min(kept.get(name, value), value)


def run_rounds(
    checkouts: dict[str, Checkout],
    benches: Iterable[str],
    rounds: int,
    measure: Measure,
    progress: Callable[[str], None] = lambda text: None,
) -> Bests:
    """`rounds` alternating runs of each side of each bench, the order flipped each round."""
    bests: Bests = {}
    benches = tuple(benches)
    for i in range(rounds):
        order = SIDES if i % 2 == 0 else SIDES[::-1]
        progress(f"round {i + 1} of {rounds}: {', '.join(benches)}")
        for bench in benches:
            for side in order:
                keep_best(bests, bench, side, measure(checkouts[side], bench))
    return bests


@dataclass(frozen=True)
class Row:
    """One figure of the table."""

    figure: str
    old: float
    new: float
    limit: float
    rerun: bool = False

    @property
    def ratio(self) -> float:
        return self.new / self.old

    @property
    def ok(self) -> bool:
        return self.ratio <= self.limit


def table_rows(bests: Bests, rerun: frozenset[str] = frozenset()) -> list[Row]:
    """The figures both sides measured, bench by bench, against their bench's limit.

    Raises:
        CompareError: a figure one side measured and the other did not.
    """
    rows = []
    for bench in BENCHES:
        if bench not in bests:
            continue
        old, new = (bests[bench].get(side, {}) for side in SIDES)
        if old.keys() != new.keys():
            only = sorted(old.keys() ^ new.keys())
            raise CompareError(f"{bench}: figures measured on one side only: {', '.join(only)}")
        rows += [Row(name, old[name], new[name], LIMITS[bench], bench in rerun) for name in old]
    return rows


def missed_benches(rows: Sequence[Row]) -> list[str]:
    """The benches with a figure over its limit, in BENCHES order."""
    missed = {_bench_of(row.figure) for row in rows if not row.ok}
    return [bench for bench in BENCHES if bench in missed]


def _bench_of(figure: str) -> str:
    return figure.split()[0]


def format_table(rows: Sequence[Row]) -> str:
    header = (
        f"{'figure (CPU us)':<26}{'old best':>10}{'new best':>10}{'ratio':>8}{'limit':>8}  ok/MISS"
    )
    lines = [header]
    for row in rows:
        verdict = "ok" if row.ok else "MISS"
        lines.append(
            f"{row.figure:<26}{row.old:10.2f}{row.new:10.2f}{row.ratio:8.3f}"
            f"{row.limit:8.2f}  {verdict}{' (rerun)' if row.rerun else ''}"
        )
    return "\n".join(lines)


def compare(
    checkouts: dict[str, Checkout],
    benches: Sequence[str],
    rounds: int,
    measure: Measure,
    progress: Callable[[str], None] = lambda text: None,
) -> list[Row]:
    """The table's rows: every bench's rounds, then once more the benches that missed."""
    bests = run_rounds(checkouts, benches, rounds, measure, progress)
    missed = missed_benches(table_rows(bests))
    if missed:
        progress(f"over the limit: {', '.join(missed)}; running {', '.join(missed)} again")
        bests.update(run_rounds(checkouts, missed, rounds, measure, progress))
    return table_rows(bests, frozenset(missed))


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("old", help="a revision of this repository, or a checkout's path")
    parser.add_argument(
        "new", nargs="?", default=str(REPO), help="the same (default: this working tree)"
    )
    parser.add_argument(
        "--rounds", type=int, default=MIN_ROUNDS, help=f"runs of each side (>= {MIN_ROUNDS})"
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats in each run")
    parser.add_argument(
        "--bench", action="append", choices=BENCHES, help="only this bench (repeatable)"
    )
    args = parser.parse_args(argv)
    if args.rounds < MIN_ROUNDS:
        parser.error(f"--rounds is {MIN_ROUNDS} at least: a best of fewer is noise")
    return args


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min: {five:.1f}) on {os.cpu_count()} CPUs"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    benches = [b for b in BENCHES if args.bench is None or b in args.bench]
    started = time.perf_counter()

    def progress(text: str) -> None:
        print(f"  [{time.perf_counter() - started:5.0f} s] {text}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="helikon-compare-") as scratch:
        try:
            checkouts = {
                side: resolve(side, named, Path(scratch))
                for side, named in zip(SIDES, (args.old, args.new), strict=True)
            }
            print(f"old: {checkouts['old'].named}\nnew: {checkouts['new'].named}")
            print(f"{args.rounds} rounds{', quick' if args.quick else ''}; {load()} at the start")
            rows = compare(
                checkouts, benches, args.rounds, measure_in_subprocess(args.quick), progress
            )
        except CompareError as exc:
            print(f"compare: {exc}", file=sys.stderr)
            return 2
    print(format_table(rows))
    misses = sum(1 for row in rows if not row.ok)
    print(f"({time.perf_counter() - started:.0f} s in all; {load()} at the end)")
    print("all within their limits" if not misses else f"{misses} figure(s) over the limit")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
