"""Large payloads travel by reference through the run store: a claim check.

Temporal refuses a payload over its limit (2 MB by default; the SDK fails the activity that
returns one). A tool's result, a model's answer or an effect's result has no such limit
when a run is local, so on Temporal every payload of `CLAIM_THRESHOLD` bytes or more is
kept in the run store (`RunStore.aput_payload`: keyed by the sha256 of its bytes, owned by
the run, deleted with it) and only its reference crosses the wire. This is the SDK's own
external storage (`temporalio.converter.ExternalStorage`) with the run store as its driver:
the worker and the client store and retrieve payloads outside the workflow, so the workflow
sees the whole value, as a local run does, and its history holds the reference
(`{"run_id": ..., "sha256": ...}`), which is what a replay reads back and verifies.

`helikon_worker` gives its worker this converter; a client that starts runs with a large
input or reads a large outcome takes it with `claim_check(client, store)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from helikon.durable.records import StoreError
from helikon.durable.store import RunStore

CLAIM_THRESHOLD = 256 * 1024
"""Bytes: a payload this large or larger travels by reference (well below Temporal's 2 MB
limit, and at its 256 KiB warning: a history stays small and fast to replay)."""


class RunStorePayloads(StorageDriver):
    """The claim check's driver: keeps a payload in the run store of the workflow it
    belongs to (its run: the workflow id is the run id) and reads it back, verified."""

    def __init__(self, store: RunStore) -> None:
        self.runs = store

    def name(self) -> str:
        return "helikon-run-store"

    def type(self) -> str:
        return "helikon.RunStore"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        run_id = _run_of(context)
        claims = []
        for payload in payloads:
            digest = await self.runs.aput_payload(run_id, payload.SerializeToString())
            claims.append(StorageDriverClaim({"run_id": run_id, "sha256": digest}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        payloads = []
        for claim in claims:
            run_id, digest = claim.claim_data.get("run_id"), claim.claim_data.get("sha256")
            if not run_id or not digest:
                raise StoreError(f"a payload reference names no run and sha256: {claim!r:.200}")
            payload = Payload()
            payload.ParseFromString(await self.runs.apayload(run_id, digest))
            payloads.append(payload)
        return payloads


def _run_of(context: StorageDriverStoreContext) -> str:
    """The run a payload belongs to: the workflow it is stored for (an activity's payloads
    belong to its workflow's run, a child's input to the child's)."""
    target = context.target
    if not isinstance(target, StorageDriverWorkflowInfo) or not target.id:
        raise StoreError(
            f"a payload of {CLAIM_THRESHOLD} bytes or more is kept with its run, but it is "
            f"stored for no workflow (for {target!r:.200}): send it from a helikon run"
        )
    return target.id


def claim_check(client: Client, store: RunStore) -> Client:
    """`client` with a data converter that keeps payloads of `CLAIM_THRESHOLD` bytes or
    more in `store` (a client whose converter has an external storage already keeps it)."""
    converter = client.data_converter
    if converter.external_storage is not None:
        return client
    storage = ExternalStorage(
        drivers=[RunStorePayloads(store)], payload_size_threshold=CLAIM_THRESHOLD
    )
    config = client.config()
    config["data_converter"] = replace(converter, external_storage=storage)
    return Client(**config)
