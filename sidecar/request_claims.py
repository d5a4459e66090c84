"""A ``StartRun`` request_id's claim on its run: one key per tenant and request_id, made once.

A request_id names one ``StartRun`` request, which starts at most one run. Looking for an
earlier run of a request_id among the run records cost a read of every record per start, and
did not hold when retries raced: retries of one request sent through a load balancer reach
sidecars of one store at once, each found no run and each started its own (every one of them
running the request's effects). The claim is written with a compare-and-set before the run's
record, so racing starts agree on one run id, and a retry finds its run with one read.

A claim names the run id and the request's digest. A claim whose run has no record yet (its
creator is writing it, or died in between) is completed by the next start of the same request
under the claimed id: the run record's own compare-and-set decides who creates it. A run's
deletion removes its claim (a retry of a deleted run's request starts it again, as before).
Runs registered before claims existed get theirs once per process (``backfill``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oma_actors.keyspace import sidecar_key
from sidecar.status import DataLoss

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from oma_actors.stores import AtomicStore
    from sidecar.record import RunRecordV1

logger = logging.getLogger(__name__)

REQUEST_KIND = "request"


@dataclass(frozen=True, slots=True)
class RequestClaim:
    """The run a request_id started (``run_id``), and the digest of that request."""

    run_id: str
    digest: str


def claim_key(tenant: str, request_id: str) -> str:
    """The key of ``request_id``'s claim in ``tenant`` (hashed: a request_id is any text)."""
    name = hashlib.sha256(f"{tenant}\0{request_id}".encode()).hexdigest()
    return sidecar_key(REQUEST_KIND, name)


class RequestClaims:
    """The claims of request_ids on runs, kept in the sidecar's state ``store``."""

    def __init__(self, store: AtomicStore) -> None:
        self._store = store
        self._backfill = asyncio.Lock()
        self._backfilled = False

    async def find(self, tenant: str, request_id: str) -> RequestClaim | None:
        """The claim of ``request_id`` in ``tenant``, or ``None``.

        Raises:
            DataLoss: ``RUN_RECORD_UNREADABLE``: the claim exists but is not one.
        """
        key = claim_key(tenant, request_id)
        entry = await self._store.get(key)
        if entry is None:
            return None
        try:
            raw = json.loads(entry.value)
            claim = RequestClaim(run_id=raw["runId"], digest=raw["digest"])
            if not (isinstance(claim.run_id, str) and isinstance(claim.digest, str)):
                raise TypeError("runId and digest must be strings")
        except (ValueError, KeyError, TypeError) as exc:
            raise DataLoss(
                "RUN_RECORD_UNREADABLE",
                f"the stored claim of request_id {request_id!r} cannot be read: {exc}",
                metadata={"key": key},
            ) from None
        return claim

    async def claim(self, tenant: str, request_id: str, claim: RequestClaim) -> bool:
        """Write ``claim`` unless the request_id has one; whether it was written."""
        text = json.dumps({"runId": claim.run_id, "digest": claim.digest})
        return await self._store.compare_and_set(claim_key(tenant, request_id), None, text)

    async def release(self, record: RunRecordV1) -> int:
        """Remove the claim of ``record``'s request_id if it names ``record``'s run; how many
        keys went (0 or 1)."""
        if record.forked or not record.request_id:
            return 0
        try:
            claim = await self.find(record.tenant, record.request_id)
        except DataLoss:
            return 0  # not one this sidecar wrote: it names no run this could be
        if claim is None or claim.run_id != record.run_id:
            return 0
        # Nobody else can claim the request_id while this claim stands: no race here.
        await self._store.delete(claim_key(record.tenant, record.request_id))
        return 1

    async def backfill(self, records: Callable[[], Awaitable[Iterable[RunRecordV1]]]) -> None:
        """Claim, once per process, the request_ids of ``records`` registered without one."""
        async with self._backfill:
            if self._backfilled:
                return
            for record in await records():
                if record.forked or not record.request_id:
                    continue
                claim = RequestClaim(run_id=record.run_id, digest=record.request_digest)
                await self.claim(record.tenant, record.request_id, claim)
            self._backfilled = True
