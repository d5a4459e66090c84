"""Fenced writes: the ownership check and the caller's write as ONE store operation (D11).

OMA fences a checkpoint by moving the run record first and writing the snapshot after (RS-12);
a takeover between the two lets one stale snapshot land. Here, when the run store is a
``MemoryStoreRunStore`` over a ``ConditionalStore`` (``RunLeaseHandle.fence_store``), the check
"the run record is exactly the text this handle last wrote" goes into the same
``apply(checks, writes)`` as the snapshot. Any takeover, operator cancel or resume rewrites the
record, so after one the old owner's write is refused by the store itself, and it is told. How
the orchestrator's writer uses it::

    store = handle.fence_store
    async def write(checks: list[Expect], writes: list[Write]) -> bool:
        return await store.apply([*checks, *my_checks], [*writes, Put(key, snapshot)])

    saved = await handle.fenced(write, checkpoint_ref={"key": key, "snapshotVersion": 4,
                                                       "savedAt": saved_at})

``True``: everything landed. ``False``: the fence held but one of the writer's own checks
failed; nothing landed. ``LeaseError(RUN_LEASE_LOST)``: the run is someone else's now (latched);
nothing landed. With ``checkpoint_ref`` the writes also move the record to point at this
snapshot and renew the lease: OMA's ``recordCheckpoint``, in the same transaction, so the
pointer is never one write ahead.

Why the handle runs the write under its lock instead of handing out the check: a renewal (the
heartbeat) rewrites the record too, so a check taken before a renewal and applied after it would
fail although the handle still owns the run. Holding the lock across "take the check, apply,
classify" serialises fenced writes with renewals: a False or a loss is never a false alarm. The
``apply`` callback therefore must not call back into the handle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.keyspace import run_record_key
from oma_actors.runs import transitions as tx
from oma_actors.runs.store import record_put
from oma_actors.stores.base import Expect

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from oma_actors.runs.claim import Claim
    from oma_actors.stores.base import Write

    ApplyWrites = Callable[[list[Expect], list[Write]], Awaitable[bool]]
    """Applies the fence's checks and writes with the caller's own, as one atomic step."""


async def fenced_write(claim: Claim, apply: ApplyWrites, ref: dict[str, object] | None) -> bool:
    """Run ``apply`` under the fence of ``claim`` (see the module docstring).

    Raises:
        LeaseError: the latched ``RUN_LEASE_LOST``. Whatever ``apply`` raises propagates.
    """
    claim.raise_if_lost()
    async with claim.lock:
        claim.raise_if_lost()
        # Twice at most: a False that comes from our copy being stale (an earlier write whose
        # outcome we never learned) is retried once with the stored copy.
        for _ in range(2):
            # A handle that closed the run itself holds no lease any more: a fenced write after
            # that is refused, as OMA refuses a late recordCheckpoint.
            checked = claim.owned(claim.record)
            nxt = None
            if ref is not None:
                terms = claim.terms
                nxt = tx.checkpointed(checked, ref, terms.owner, terms.now(), terms.ttl_ms)
            writes: list[Write] = [] if nxt is None else [record_put(nxt)]
            if await apply([Expect(run_record_key(claim.run_id), checked.to_json())], writes):
                claim.record = checked if nxt is None else nxt
                return True
            if await claim.confirm():
                claim.raise_if_lost()
            if claim.record.to_json() == checked.to_json():
                return False
        return False
