"""`--store URL`, which `helikon run`, `helikon runs ...` and `helikon worker` take: the URL
the command line names (default $HELIKON_STORE, else `sqlite:///.helikon/runs.db`, relative
to the current directory), opening it, and a store's refusal as one line (`store_errors`).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Iterator
from contextlib import contextmanager

from helikon.cli.usage import UsageError
from helikon.durable import RunLeased, RunStore, StoreError, open_store
from helikon.export.console import safe_text
from helikon.run.snapshot import ApprovalMismatch, SnapshotMismatch

DEFAULT_STORE = "sqlite:///.helikon/runs.db"
STORE_ENV = "HELIKON_STORE"


def add_store_argument(command: argparse.ArgumentParser, *, ephemeral: bool = False) -> None:
    """`--store URL`; with `ephemeral`, `--store none` runs without one."""
    none = "; none: an ephemeral run, kept nowhere" if ephemeral else ""
    command.add_argument(
        "--store",
        metavar="URL",
        help=f"the run store (default ${STORE_ENV}, else {DEFAULT_STORE}{none})",
    )


def store_url(args: argparse.Namespace) -> str | None:
    """The store URL the command line names, or None for `none`."""
    url: str = args.store or os.environ.get(STORE_ENV) or DEFAULT_STORE
    return None if url.strip().lower() == "none" else url


def open_cli_store(args: argparse.Namespace) -> RunStore:
    """The store a `runs` command works on.

    Raises:
        UsageError: `none`, or the store cannot be opened.
    """
    url = store_url(args)
    if url is None:
        raise UsageError(f"helikon runs {args.runs_command} needs a run store, not --store none")
    with store_errors():
        store = open_store(url)
    vars(args).setdefault("_stores", []).append(store)  # closed when the command ends
    return store


@contextmanager
def store_errors() -> Iterator[None]:
    """A store's refusal (and a run that cannot resume) as one line: a UsageError."""
    try:
        yield
    except RunLeased as exc:  # the store's message says `force=True`; here it is --force
        held = str(exc).split(" (its lease)")[0]
        raise UsageError(
            f"{held} (its lease): resume it after that, or with --force if that owner is known dead"
        ) from None
    except (StoreError, SnapshotMismatch, ApprovalMismatch) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise UsageError(first if len(first) <= 300 else first[:299] + "…") from None


def with_store(args: argparse.Namespace) -> str:
    """`--store URL` as the user gave it, to repeat in a hint (empty for the default)."""
    return f" --store {safe_text(shlex.quote(args.store))}" if args.store else ""
