"""Who a handle still owns after the record moved under it (mutation sweep of ``runs/``).

Each test pins one guard the contract suites left unchecked: the owner compared next to the
fencing token, a resume that clears an abandoned lease, the handle adopting what it wrote, the
swap comparing the stored text itself, and a fence store only where ``apply`` exists.
"""

from __future__ import annotations

import json

from run_helpers import START, code_of, ledger, record

from oma_actors.keyspace import checkpoint_key, run_record_key
from oma_actors.runs import Lease, MemoryStoreRunStore, RunLedger
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import ConditionalStore, Expect, MemoryStore, Put, Write
from oma_actors.testing import FakeClock, ForwardingStore

SNAPSHOT = checkpoint_key("run-1")
LOST = "RUN_LEASE_LOST"


def _writer(store: ConditionalStore, text: str, calls: list[int] | None = None):  # type: ignore[no-untyped-def]
    """A fenced snapshot write: the handle's checks and writes plus the snapshot, one apply."""

    async def apply(checks: list[Expect], writes: list[Write]) -> bool:
        if calls is not None:
            calls.append(len(checks))
        return await store.apply(checks, [*writes, Put(SNAPSHOT, text)])

    return apply


async def _value(store: MemoryStore, key: str) -> str | None:
    entry = await store.get(key)
    return None if entry is None else entry.value


async def test_a_run_recreated_by_another_owner_at_the_same_token_is_lost(
    store: ConditionalStore, clock: FakeClock
) -> None:
    # Deleting a record starts its fencing token over: only the owner tells the two apart.
    run_store = MemoryStoreRunStore(store)
    old = await RunLedger(run_store, owner="a", clock=clock.unix).acquire("run-1", heartbeat=False)
    await run_store.delete("run-1")
    new = await RunLedger(run_store, owner="b", clock=clock.unix).acquire("run-1", heartbeat=False)
    assert new.fencing_token == old.fencing_token == 1
    assert await code_of(old.fenced(_writer(store, "stale"))) == LOST
    assert await _value(store, SNAPSHOT) is None
    assert await code_of(old.renew()) == LOST
    assert await run_store.get("run-1") == new.record
    assert (await new.renew()).lease == Lease("b", START, START.replace(minute=1))


async def test_resuming_an_abandoned_run_fences_out_its_stalled_holder(
    store: ConditionalStore, clock: FakeClock
) -> None:
    # request_resume keeps the token (no new owner yet), so the cleared lease is the fence.
    old = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(5)
    resumed = await ledger(store, clock, "operator").request_resume("run-1")
    assert (resumed.status, resumed.lease) == ("queued", None)
    assert resumed.fencing_token == old.fencing_token
    assert await code_of(old.fenced(_writer(store, "stale"))) == LOST
    assert await _value(store, SNAPSHOT) is None
    assert await code_of(old.renew()) == LOST
    stored = await MemoryStoreRunStore(store).get("run-1")
    assert stored == resumed


async def test_a_handle_adopts_the_record_it_wrote(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    clock.advance(1)
    renewed = await handle.renew()
    assert handle.record == renewed
    assert handle.fence_checks() == [
        Expect(run_record_key("run-1"), await _value(store, run_record_key("run-1")))
    ]
    calls: list[int] = []
    assert await handle.fenced(_writer(store, "rev 1", calls))
    assert calls == [1]  # the fence held at once: no stale copy, no second round


async def test_a_record_stored_in_another_json_layout_is_still_swapped(
    store: ConditionalStore, clock: FakeClock
) -> None:
    # Valid JSON laid out differently (an operator's edit, another writer): the swap compares
    # the text it read, so it still lands instead of staying "contended".
    expired = record(lease=Lease("a", START, START))
    await store.set(run_record_key("run-1"), json.dumps(expired.to_dict(), indent=2))
    clock.advance(1)
    handle = await ledger(store, clock, "b").acquire("run-1", heartbeat=False)
    assert (handle.fencing_token, handle.attempt) == (2, 2)
    assert await MemoryStoreRunStore(store).get("run-1") == handle.record


class _CompareAndSetOnly(ForwardingStore):
    """An atomic store without ``apply``: nothing can fence a write in one transaction."""

    def __init__(self, inner: ConditionalStore) -> None:
        super().__init__(inner)
        del self.apply


async def test_only_a_store_with_apply_is_handed_out_as_the_fence_store(clock: FakeClock) -> None:
    atomic = _CompareAndSetOnly(InMemoryStore())
    handle = await ledger(atomic, clock, "a").acquire("run-1", heartbeat=False)
    assert handle.fence_store is None
    conditional = InMemoryStore()
    other = await ledger(conditional, clock, "a").acquire("run-1", heartbeat=False)
    assert other.fence_store is conditional
