"""The `helikon` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from helikon.chart.default import DEFAULT_TABLE
from helikon.chart.table import TransitionTable


def format_table(table: TransitionTable, *, implicit: bool = False) -> str:
    """The table's rows as aligned text, one row a line, in priority order."""
    header = ("from", "input", "guards", "to", "action")
    lines = [
        (r.source, r.input_kind, " and ".join(map(str, r.guards)) or "-", r.target, r.action)
        for r in table.rows
        if implicit or not r.implicit
    ]
    widths = [max(len(cells[i]) for cells in (header, *lines)) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths)).rstrip()]
    out += [fmt.format(*cells).rstrip() for cells in lines]
    return "\n".join(out)


def demo() -> int:
    from helikon.demo import walk_through

    print(
        f"helikon's default loop, compiled ({len(DEFAULT_TABLE.rows)} rows, "
        f"digest {DEFAULT_TABLE.digest[:12]}):\n"
    )
    print(format_table(DEFAULT_TABLE))
    print()
    print(walk_through())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="helikon", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="run the offline demo")
    table = commands.add_parser("table", help="print the default chart's compiled table")
    table.add_argument("--implicit", action="store_true", help="include implicit rows")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    print(format_table(DEFAULT_TABLE, implicit=args.implicit))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
