"""`helikon.durable.chain`: a run's rows as links of one hash chain. A chain as written
checks out; every link removed, added, moved or swapped, and every head moved, is refused
naming the link. Table-driven and property-tested, no store.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helikon.durable.chain import Chain, Link, digest, genesis, verify
from helikon.durable.records import StoreCorrupt

START = genesis("run", "r1")


def written(*rows: str) -> tuple[list[Link], Chain]:
    """Links as a store writes them, one per row, and the chain's head after them."""
    chain, links = Chain(0, START), []
    for row in rows:
        at, last = chain.add("record", row)
        links.append(Link(at, f"row {row}", ("record", row), last))
    return links, chain


def check(links: list[Link], head: Chain) -> None:
    verify("run 'r1'", START, 1, links, head.n, head.digest)


def test_a_chain_as_written_checks_out_in_any_order_read() -> None:
    links, head = written("a", "b", "c")
    check(links, head)
    check(links[::-1], head)  # rows read back in another order: placed by their link


def one_link(links: list[Link], i: int, **changes: object) -> list[Link]:
    return [replace(link, **changes) if n == i else link for n, link in enumerate(links)]


TAMPERED = {
    "a row removed": (lambda ls: ls[:1] + ls[2:], "link 2 of 3, after row a, is missing"),
    "the last row removed": (lambda ls: ls[:2], "link 3 of 3, after row b, is missing"),
    "the first row removed": (lambda ls: ls[1:], "link 1 of 3, after its start, is missing"),
    "a row added past the head": (
        lambda ls: [*ls, Link(4, "row d", ("record", "d"), "00")],
        "row d is not in its chain (link 4, head at link 3): an added row",
    ),
    "a row of no chain": (
        lambda ls: [*ls, Link(None, "row d", ("record", "d"), "00")],
        "row d is not in its chain (link None, head at link 3)",
    ),
    "a row added at a link taken": (
        lambda ls: [*ls, replace(ls[1], what="row b2")],
        "two rows claim link 2",
    ),
    "a row edited": (
        lambda ls: one_link(ls, 1, parts=("record", "B")),
        "link 2 of 3 (row b) does not chain",
    ),
    "two rows swapped": (
        lambda ls: [replace(ls[0], at=2), replace(ls[1], at=1), ls[2]],
        "link 1 of 3 (row b) does not chain",
    ),
    "two rows' contents swapped": (
        lambda ls: [replace(ls[0], parts=ls[1].parts), replace(ls[1], parts=ls[0].parts), ls[2]],
        "link 1 of 3 (row a) does not chain",
    ),
    "every digest rebuilt (no key needed) for an edited row": (
        lambda ls: rebuilt([("record", "a"), ("record", "X"), ("record", "c")]),
        "its rows do not end at its signed head (link 3)",
    ),
}


def rebuilt(parts: list[tuple[str, str]]) -> list[Link]:
    chain, links = Chain(0, START), []
    for part in parts:
        at, last = chain.add(*part)
        links.append(Link(at, f"row {part[1]}", part, last))
    return links


@pytest.mark.parametrize("tampering", TAMPERED, ids=list(TAMPERED))
def test_a_tampered_chain_is_refused_naming_the_link(tampering: str) -> None:
    links, head = written("a", "b", "c")
    change, named = TAMPERED[tampering]
    with pytest.raises(StoreCorrupt, match="run 'r1'") as refused:
        check(change(links), head)
    assert named in str(refused.value)


def test_rows_of_another_run_do_not_chain() -> None:
    links, head = written("a", "b")
    with pytest.raises(StoreCorrupt, match=r"link 1 of 2 \(row a\) does not chain"):
        verify("run 'r2'", genesis("run", "r2"), 1, links, head.n, head.digest)


def test_parts_are_kept_apart_and_a_dropped_link_is_taken_back() -> None:
    assert digest(START, ("ab", "c")) != digest(START, ("a", "bc"))
    chain = Chain(0, START)
    chain.add("call", "t1")
    before = (chain.n, chain.digest)
    chain.add("call", "t1")  # its row was there: not written
    chain.drop()
    assert (chain.n, chain.digest) == before


@given(st.permutations(range(5)))
def test_rows_read_back_at_other_links_are_refused(order: list[int]) -> None:
    links, head = written("a", "b", "c", "d", "e")
    moved = [replace(link, at=order[i] + 1) for i, link in enumerate(links)]
    if order == sorted(order):
        check(moved, head)
    else:
        with pytest.raises(StoreCorrupt, match="does not chain"):
            check(moved, head)
