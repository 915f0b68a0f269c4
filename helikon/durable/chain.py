"""One hash chain per run over every row it owns, and one per session over its items: a
removed, added, reordered or swapped row is refused, not only an edited one.

Theory of operation: every row a run owns (records, events, a call's start and its result,
approval decisions) is a *link* of the run's chain, numbered in the order it was written.
A link's digest is SHA-256 over the link before's digest and the row's parts (its kind,
the numbers that place it, its exact text); the first link chains to a digest of the run's
id, so a row moved from another run does not chain. A row carries no signature of its own,
only its link number and its digest (unkeyed: it tells where a chain broke); the run's row
carries the chain's head (how many links, the last digest), signed with the store's key
once per transaction (`rows.head_sig`). Reading a run re-hashes every link in order and
checks it ends at the signed head: one hash a row, one HMAC a read.

A session's items are chained alike, from the first item a prune kept (`first`, `base`).

What no chain can see: a whole run (or session) removed, or restored from an older copy
with its older signed head; the store holds nothing newer to compare it with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from helikon.durable.records import StoreCorrupt


def genesis(kind: str, owner: str) -> str:
    """The digest a chain starts from: the run's (or session's) id, so chains never mix."""
    return hashlib.sha256(f"helikon {kind}\x1f{owner}".encode("utf-8", "surrogatepass")).hexdigest()


def digest(previous: str, parts: tuple[str | int, ...]) -> str:
    """The digest of the link after `previous` holding `parts`, each kept apart."""
    message = "\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(bytes.fromhex(previous) + message).hexdigest()


class Chain:
    """A chain's head as a transaction extends it: `n` links, the last one's `digest`."""

    __slots__ = ("_before", "digest", "n")

    def __init__(self, n: int, last: str) -> None:
        self.n, self.digest = n, last
        self._before = (n, last)

    def add(self, *parts: str | int) -> tuple[int, str]:
        """Chain a row of `parts`: (its link number, its digest)."""
        self._before = (self.n, self.digest)
        self.n, self.digest = self.n + 1, digest(self.digest, parts)
        return self.n, self.digest

    def drop(self) -> None:
        """Take back the last `add`: its row was not written (a call already started)."""
        self.n, self.digest = self._before


@dataclass(frozen=True, slots=True)
class Link:
    """A row as read back: its link number (`None`: a row of no chain), what it is (for
    messages), the parts it chains, and the digest stored with it (`None`: not kept)."""

    at: int | None
    what: str
    parts: tuple[str | int, ...]
    stored: str | None


def verify(owner: str, start: str, first: int, links: Iterable[Link], n: int, head: str) -> None:
    """Check that `links` are links `first`..`n` of a chain from `start`, ending at `head`.

    Raises:
        StoreCorrupt: naming `owner`, the link and what is wrong with it.
    """
    ordered = sorted(links, key=lambda link: -1 if link.at is None else link.at)
    last, before = start, "its start"
    for expected, link in enumerate(ordered, start=first):
        _place(owner, link, expected, n, before)
        last = digest(last, link.parts)
        if link.stored is not None and last != link.stored:
            raise StoreCorrupt(
                f"{owner}: link {link.at} of {n} ({link.what}) does not chain: that row or "
                "one before it was edited, moved or swapped"
            )
        before = link.what
    if first + len(ordered) - 1 < n:
        raise StoreCorrupt(
            f"{owner}: link {first + len(ordered)} of {n}, after {before}, is missing "
            "(a row was removed)"
        )
    if last != head:
        raise StoreCorrupt(f"{owner}: its rows do not end at its signed head (link {n})")


def _place(owner: str, link: Link, expected: int, n: int, before: str) -> None:
    """Refuse a row that is not where the next link of the chain should be."""
    if link.at is None or link.at > n:
        raise StoreCorrupt(
            f"{owner}: {link.what} is not in its chain (link {link.at}, head at link {n}): "
            "an added row"
        )
    if link.at < expected:
        raise StoreCorrupt(f"{owner}: two rows claim link {link.at} ({link.what}): an added row")
    if link.at > expected:
        raise StoreCorrupt(
            f"{owner}: link {expected} of {n}, after {before}, is missing (a row was removed)"
        )
