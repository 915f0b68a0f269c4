"""The `helikon` command line: one module per command group, put together here.

Errors are one clear line on stderr and exit status 2, never a traceback; a run that failed
exits 1 (2, with that line, when its run store failed it), and so does `validate` of a chart
that does not compile (it lists the problems).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from helikon.cli import chart_tests, charts, debug, docs, run, runs, studio, temporal, trace
from helikon.cli.usage import UsageError
from helikon.export.console import safe_text


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="helikon", description="LLM agents as statecharts.")
    commands = top.add_subparsers(dest="command", required=True)
    run.add_parsers(commands)
    runs.add_parser(commands)
    temporal.add_parser(commands)
    charts.add_diagram_parser(commands)
    trace.add_parser(commands)
    charts.add_validate_parser(commands)
    debug.add_parser(commands)
    studio.add_parser(commands)
    docs.add_parser(commands)
    charts.add_table_parser(commands)
    chart_tests.add_test_parser(commands)
    chart_tests.add_coverage_parser(commands)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except UsageError as exc:
        # One line, even when the message quotes a multi-line error (a chart's problems).
        message = safe_text(" ".join(line.strip() for line in str(exc).splitlines()))
        print(f"helikon: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`helikon ... | head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
