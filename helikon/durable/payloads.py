"""Payloads a run keeps by reference (the claim check of helikon.temporal.payloads).

A payload is content addressed: its key is the sha256 of its bytes, so a read verifies
itself (`checked`). It belongs to a run (its `run_id`), so deleting the run deletes it;
what refers to it (a Temporal history, a record) holds the key, so whatever covers the
reference covers the bytes.
"""

from __future__ import annotations

import hashlib

from helikon.core.quoting import quoted
from helikon.durable.records import StoreCorrupt, StoreError


class PayloadNotFound(StoreError):
    """The store holds no payload of this key for this run."""


def digest_of(data: bytes) -> str:
    """A payload's key: the sha256 of its bytes, in hex."""
    return hashlib.sha256(data).hexdigest()


def checked(run_id: str, digest: str, data: bytes | None, where: str) -> bytes:
    """The payload `data` read for (`run_id`, `digest`) from the store `where`, verified.

    Raises:
        PayloadNotFound: nothing was stored under this key for this run.
        StoreCorrupt: the bytes stored do not hash to their key.
    """
    if data is None:
        raise PayloadNotFound(
            f"no payload {digest[:16]!r} of run {quoted(run_id)} in the store {where}: it was "
            "deleted with its run, or stored in another store"
        )
    found = digest_of(data)
    if found != digest:
        raise StoreCorrupt(
            f"payload {digest[:16]!r} of run {quoted(run_id)} in the store {where} hashes to "
            f"{found[:16]!r}: its bytes were changed"
        )
    return bytes(data)
