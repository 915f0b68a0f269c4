"""bench/compare.py's logic, without timing anything: reading bench/figures.py's output,
keeping the bests, ratios against limits, the rerun of a bench that missed, the table and
the arguments. The measurements are handed in by a fake `measure`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import compare  # noqa: E402
from compare import Checkout, CompareError, Row  # noqa: E402

OLD = Checkout("old", "main", ROOT)
NEW = Checkout("new", "tree", ROOT)
CHECKOUTS = {"old": OLD, "new": NEW}


def output(bench: str, figures: dict[str, float], helikon: Path = ROOT / "helikon") -> str:
    data = {"bench": bench, "helikon": str(helikon / "__init__.py"), "figures": figures}
    return f"a warning a library printed\n{json.dumps(data)}\n"


def test_the_figures_are_read_from_the_last_line() -> None:
    figures = compare.parse_figures(output("driver", {"driver 10x1": 60}), OLD, "driver")
    assert figures == {"driver 10x1": 60.0}


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "printed no figures"),
        ("Traceback (most recent call last):\n", "printed no figures"),
        ('{"bench": "driver"}', "printed no figures"),
        (output("transition", {"transition step": 2.2}), "asked for driver, got 'transition'"),
        (output("driver", {"driver 10x1": 60}, Path("/elsewhere/helikon")), "not the one in"),
        (output("driver", {"driver 10x1": 0}), "not positive numbers"),
        (output("driver", {"driver 10x1": "fast"}), "not positive numbers"),
    ],
)
def test_output_that_is_not_the_benchs_figures_is_refused(stdout: str, message: str) -> None:
    with pytest.raises(CompareError, match=message):
        compare.parse_figures(stdout, OLD, "driver")


def test_the_best_of_the_rounds_is_kept_figure_by_figure() -> None:
    bests: compare.Bests = {}
    compare.keep_best(bests, "driver", "old", {"driver 10x1": 60.0, "driver 50x4": 100.0})
    compare.keep_best(bests, "driver", "old", {"driver 10x1": 65.0, "driver 50x4": 90.0})
    assert bests == {"driver": {"old": {"driver 10x1": 60.0, "driver 50x4": 90.0}}}


@pytest.mark.parametrize(
    ("old", "new", "limit", "ok"),
    [(100.0, 105.0, 1.05, True), (100.0, 105.1, 1.05, False), (2.0, 1.0, 1.05, True)],
)
def test_a_figure_is_ok_up_to_its_limit(old: float, new: float, limit: float, ok: bool) -> None:
    row = Row("transition step", old, new, limit)
    assert row.ratio == pytest.approx(new / old)
    assert row.ok is ok


def test_each_bench_has_its_limit() -> None:
    bests: compare.Bests = {
        "durable": {"old": {"durable NORMAL 10x1": 200.0}, "new": {"durable NORMAL 10x1": 215.0}},
        "transition": {"old": {"transition step": 2.0}, "new": {"transition step": 2.2}},
    }
    rows = compare.table_rows(bests)
    assert [(r.figure, r.limit, r.ok) for r in rows] == [
        ("transition step", 1.05, False),
        ("durable NORMAL 10x1", 1.10, True),
    ]
    assert compare.missed_benches(rows) == ["transition"]


def test_a_figure_measured_on_one_side_only_is_refused() -> None:
    bests: compare.Bests = {"driver": {"old": {"driver 10x1": 60.0}, "new": {}}}
    with pytest.raises(CompareError, match="one side only: driver 10x1"):
        compare.table_rows(bests)


class Script:
    """A fake `measure`: each (side, bench) call returns the next of its planned figures,
    and every call is logged."""

    def __init__(self, plan: dict[tuple[str, str], list[dict[str, float]]]) -> None:
        self.plan = {key: list(runs) for key, runs in plan.items()}
        self.calls: list[tuple[str, str]] = []

    def __call__(self, checkout: Checkout, bench: str) -> dict[str, float]:
        self.calls.append((checkout.side, bench))
        return self.plan[checkout.side, bench].pop(0)


def steady(figure: str, value: float, runs: int) -> list[dict[str, float]]:
    return [{figure: value + i} for i in range(runs)]


def test_the_sides_alternate_and_the_order_flips_every_round() -> None:
    script = Script(
        {
            (side, bench): steady(f"{bench} x", 10.0, 7)
            for side in ("old", "new")
            for bench in ("transition", "driver")
        }
    )
    rows = compare.compare(CHECKOUTS, ["transition", "driver"], 7, script)
    assert script.calls[:8] == [
        ("old", "transition"),
        ("new", "transition"),
        ("old", "driver"),
        ("new", "driver"),
        ("new", "transition"),
        ("old", "transition"),
        ("new", "driver"),
        ("old", "driver"),
    ]
    assert len(script.calls) == 28
    assert [(r.figure, r.old, r.new, r.ok, r.rerun) for r in rows] == [
        ("transition x", 10.0, 10.0, True, False),
        ("driver x", 10.0, 10.0, True, False),
    ]


def test_a_bench_that_misses_runs_again_once_and_is_judged_on_that_run() -> None:
    script = Script(
        {
            ("old", "driver"): steady("driver 10x1", 95.0, 7) + steady("driver 10x1", 100.0, 7),
            ("new", "driver"): steady("driver 10x1", 120.0, 7) + steady("driver 10x1", 105.0, 7),
            ("old", "durable"): steady("durable NORMAL 10x1", 200.0, 7),
            ("new", "durable"): steady("durable NORMAL 10x1", 200.0, 7),
        }
    )
    rows = compare.compare(CHECKOUTS, ["driver", "durable"], 7, script)
    assert script.calls.count(("new", "driver")) == 14
    assert script.calls.count(("new", "durable")) == 7
    assert [(r.figure, r.old, r.new, r.ok, r.rerun) for r in rows] == [
        ("driver 10x1", 100.0, 105.0, True, True),
        ("durable NORMAL 10x1", 200.0, 200.0, True, False),
    ]


def test_the_table_names_each_figure_and_marks_a_miss() -> None:
    table = compare.format_table(
        [Row("transition step", 2.0, 2.0, 1.05), Row("driver 10x1", 60.0, 70.0, 1.10, True)]
    )
    assert [" ".join(line.split()) for line in table.splitlines()] == [
        "figure (CPU us) old best new best ratio limit ok/MISS",
        "transition step 2.00 2.00 1.000 1.05 ok",
        "driver 10x1 60.00 70.00 1.167 1.10 MISS (rerun)",
    ]


def test_new_defaults_to_this_tree_and_rounds_are_seven_at_least(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = compare.parse_args(["main"])
    assert (args.old, Path(args.new), args.rounds, args.bench) == ("main", ROOT, 7, None)
    with pytest.raises(SystemExit):
        compare.parse_args(["main", "--rounds", "3"])
    assert "--rounds is 7 at least" in capsys.readouterr().err


def test_a_name_that_is_neither_a_directory_nor_a_revision_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="neither a directory nor a revision"):
        compare.resolve("old", "no-such-revision-anywhere", tmp_path)
    assert compare.resolve("new", str(ROOT), tmp_path) == Checkout("new", str(ROOT), ROOT)


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_a_revision_is_exported_to_a_tree_of_its_own(tmp_path: Path) -> None:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    checkout = compare.resolve("old", "HEAD", tmp_path)
    assert checkout.named == f"HEAD ({commit[:12]})"
    assert checkout.root == tmp_path / f"old-{commit[:12]}"
    assert (checkout.root / "helikon" / "__init__.py").is_file()
    assert checkout.figures_script() == checkout.root / "bench" / "figures.py"


def test_a_checkout_without_figures_is_measured_by_this_ones(tmp_path: Path) -> None:
    assert Checkout("old", "x", tmp_path).figures_script() == ROOT / "bench" / "figures.py"
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "figures.py").write_text("")
    assert Checkout("old", "x", tmp_path).figures_script() == tmp_path / "bench" / "figures.py"


def test_figures_prints_what_compare_reads() -> None:
    """bench/figures.py and compare.py agree on the output (a quick run; no figure checked)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "figures.py"), "transition", "--quick"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert list(compare.parse_figures(done.stdout, OLD, "transition")) == ["transition step"]
