"""A handle from before its run record was deleted does not own the record created after.

Deleting a record (``oma runs delete`` once the lease ran out, retention) starts the fencing
token over at 1, so a stalled handle of the same worker that held token 1 matched the new
record's token and owner: its renewal adopted the new record and its fenced write landed in the
run's new life, beside the handle that created it. A record keeps its ``createdAt`` for life,
so a handle also checks that it is the record it acquired.
"""

from __future__ import annotations

from run_helpers import code_of

from oma_actors.keyspace import checkpoint_key
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores.base import ConditionalStore, Expect, Put, Write
from oma_actors.testing import FakeClock

SNAPSHOT = checkpoint_key("run-1")


async def test_a_stalled_handle_does_not_own_its_run_created_anew_by_the_same_worker(
    store: ConditionalStore, clock: FakeClock
) -> None:
    run_store = MemoryStoreRunStore(store)
    worker = RunLedger(run_store, owner="w", lease_ttl=1, clock=clock.unix)
    stalled = await worker.acquire("run-1", heartbeat=False)
    clock.advance(5)  # its lease ran out; the run is deleted and started again
    await run_store.delete("run-1")
    fresh = await worker.acquire("run-1", heartbeat=False)
    assert fresh.fencing_token == stalled.fencing_token == 1

    async def apply(checks: list[Expect], writes: list[Write]) -> bool:
        return await store.apply(checks, [*writes, Put(SNAPSHOT, "from the stalled handle")])

    assert await code_of(stalled.fenced(apply)) == "RUN_LEASE_LOST"
    assert await store.get(SNAPSHOT) is None
    assert await code_of(stalled.renew()) == "RUN_LEASE_LOST"
    assert await run_store.get("run-1") == fresh.record
    assert (await fresh.renew()).fencing_token == 1  # the new handle alone owns the run


async def test_a_stalled_handle_does_not_report_what_the_new_life_of_its_run_did(
    store: ConditionalStore, clock: FakeClock
) -> None:
    # Completing converges on a record already completed at the handle's token (a repeat of
    # its own command); the run's new life, completed by its new handle at token 1 too, is
    # not the stalled handle's doing: it learns it lost the run instead.
    run_store = MemoryStoreRunStore(store)
    worker = RunLedger(run_store, owner="w", lease_ttl=1, clock=clock.unix)
    stalled = await worker.acquire("run-1", heartbeat=False)
    clock.advance(5)
    await run_store.delete("run-1")
    fresh = await worker.acquire("run-1", heartbeat=False)
    done = await fresh.complete()
    assert await code_of(stalled.complete()) == "RUN_LEASE_LOST"
    assert await run_store.get("run-1") == done
