"""`helikon runs`: what a run store keeps (list, show, export, delete, prune), and driving its
runs on (resume, recover). This module builds the command group's parser; the commands live
in `reading` (list, show, export), `editing` (fork, delete, prune) and `resuming` (resume,
recover, and the hints `helikon run` prints too); `--store` is `helikon.cli.store`'s.

    helikon runs list [--status S] [--all]        helikon runs show RUN_ID [--events N]
    helikon runs resume RUN_ID --chart CHART [--approve all|none|ask] [--offline] [--force]
    helikon runs recover --chart CHART            helikon runs export RUN_ID [-o OUT.jsonl]
    helikon runs delete RUN_ID                    helikon runs prune --older-than 30d
    helikon runs fork RUN_ID --at SEQ [--edit KIND ARGS... --chart CHART]

Every command takes `--store URL` (default $HELIKON_STORE, else `sqlite:///.helikon/runs.db`,
relative to the current directory). Nothing is ever imported because a store row names it:
`resume` and `recover` run the agent of the chart given on the command line, and the store
checks it is the run's agent, chart and tool set. Store rows are hostile input: every name,
text and argument printed goes through `safe_text`. A store that does not check out, a run
that is not there, a run another driver holds, a run its store failed (`StoreFailed`): one
line, exit status 2.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from helikon.cli.runs.editing import command_delete, command_fork, command_prune
from helikon.cli.runs.reading import command_export, command_list, command_show
from helikon.cli.runs.resuming import (
    command_recover,
    command_resume,
    decide,
    resume_hint,
    stopped_by_its_store,
)
from helikon.cli.store import add_store_argument, store_errors, store_url, with_store

# The names other modules imported from here before the group was split, importable as before.
__all__ = [
    "add_parser",
    "add_store_argument",
    "decide",
    "duration",
    "resume_hint",
    "stopped_by_its_store",
    "store_errors",
    "store_url",
    "with_store",
]

STATUSES = ("running", "suspended", "completed", "failed")
DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


# ---------------------------------------------------------------- the parser


def add_parser(commands: Any) -> None:
    """Add `runs` and its subcommands to `commands` (`ArgumentParser.add_subparsers()`)."""
    runs = commands.add_parser("runs", help="list, show, resume, export and prune stored runs")
    sub = runs.add_subparsers(dest="runs_command", required=True)

    listing = _command(sub, "list", "the runs in the store, newest first", command_list)
    listing.add_argument("--status", choices=STATUSES, help="only runs of this status")
    listing.add_argument("--all", action="store_true", help="nested runs too")

    show = _command(sub, "show", "a run: its state, pending approvals, last events", command_show)
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--events", type=int, default=10, metavar="N", help="last N (default 10)")

    resume = _command(sub, "resume", "continue a run with the agent of CHART", command_resume)
    resume.add_argument("run_id", metavar="RUN_ID")
    _add_driving_arguments(resume)
    resume.add_argument(
        "--force", action="store_true", help="take the run's lease from an owner known dead"
    )

    recover = _command(
        sub, "recover", "resume every run of CHART's agent whose owner died", command_recover
    )
    _add_driving_arguments(recover)

    export = _command(sub, "export", "write a run (and its nested runs) as a trace", command_export)
    export.add_argument("run_id", metavar="RUN_ID")
    export.add_argument("-o", "--output", help="the trace file to write (default: stdout)")

    fork = _command(
        sub, "fork", "a new run sharing RUN_ID's records up to SEQ, to resume", command_fork
    )
    fork.add_argument("run_id", metavar="RUN_ID")
    fork.add_argument("--at", required=True, type=int, metavar="SEQ", help="the last seq shared")
    fork.add_argument(
        "--edit",
        nargs="+",
        metavar="WORD",
        help='replace the next input: text "ANSWER" | calls \'[{"call_id": ..., "name": ..., '
        '"arguments": ...}]\' | tool CALL_ID "RESULT" ... | effect JSON | approve [CALL_ID ...] '
        "| reject [CALL_ID ...] (needs --chart)",
    )
    fork.add_argument(
        "--chart", help="with --edit: the chart file whose agent ran the run (to compute the step)"
    )

    delete = _command(sub, "delete", "delete a run and the runs nested in it", command_delete)
    delete.add_argument("run_id", metavar="RUN_ID")
    delete.add_argument(
        "--force", action="store_true", help="delete it even while a live owner drives it"
    )

    prune = _command(sub, "prune", "delete runs not updated for a while", command_prune)
    prune.add_argument(
        "--older-than", required=True, metavar="AGE", type=duration, help="e.g. 90s, 12h, 30d"
    )


def _command(sub: Any, name: str, help: str, handler: Any) -> argparse.ArgumentParser:
    command: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
    add_store_argument(command)
    command.set_defaults(handler=_closing(handler))
    return command


def _closing(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`handler`, closing the stores it opened (`open_cli_store`) when it returns or raises."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        finally:
            for store in vars(args).pop("_stores", ()):
                store.close()

    return run


def _add_driving_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--chart", required=True, help="the chart file whose agent ran the run")
    command.add_argument(
        "--approve",
        choices=("ask", "all", "none"),
        default="ask",
        help="decide approvals (ask: prompt on a terminal, else leave the run suspended)",
    )
    command.add_argument("--offline", action="store_true", help="use the scripted model")
    command.add_argument("--model", help="model name for a real endpoint")


def duration(text: str) -> float:
    """`90s`, `15m`, `12h`, `30d` in seconds (argparse's `type=`)."""
    found = DURATION.fullmatch(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age: use e.g. 90s, 15m, 12h, 30d")
    return float(found[1]) * SECONDS[found[2]]
