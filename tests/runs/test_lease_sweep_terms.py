"""The edges of a lease's terms and of leaving it (mutation sweep of ``runs/``).

A lease lasts at least a millisecond, the clock is read to the nearest millisecond and again on
every retry, leaving ``async with`` after a loss is quiet, and a run whose lease was lost
settles as nothing.
"""

from __future__ import annotations

from typing import Any

from run_helpers import START, code_of, ledger

from oma_actors.keyspace import run_record_key
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.runs import transitions as tx
from oma_actors.runs.fields import from_ms
from oma_actors.runs.record import RunRecord
from oma_actors.runs.settle import settle_record
from oma_actors.runs.store import record_put
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import ConditionalStore
from oma_actors.testing import FakeClock, ForwardingStore


async def test_a_lease_shorter_than_a_millisecond_still_holds_for_one(clock: FakeClock) -> None:
    store = InMemoryStore()
    handle = await ledger(store, clock, "a", lease_ttl=0.0004).acquire("run-1", heartbeat=False)
    lease = handle.record.lease
    assert lease is not None
    assert lease.expires_at > lease.acquired_at
    assert lease.is_live(clock.now())
    taker = ledger(store, clock, "b", lease_ttl=0.0004)
    assert await code_of(taker.acquire("run-1", heartbeat=False)) == "RUN_LEASE_HELD"


def test_the_clock_is_read_to_the_nearest_millisecond() -> None:
    # 1.001 s is 1000.999... ms in binary floating point: truncating would lose a millisecond.
    ledger = RunLedger(MemoryStoreRunStore(InMemoryStore()), owner="a", clock=lambda: 1.001)
    assert ledger.now() == from_ms(1001)


async def test_leaving_async_with_after_a_loss_raises_nothing_and_writes_nothing(
    store: ConditionalStore, clock: FakeClock
) -> None:
    async with ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False) as handle:
        clock.advance(5)
        taken = await ledger(store, clock, "b", lease_ttl=1).acquire("run-1", heartbeat=False)
        assert await code_of(handle.renew()) == "RUN_LEASE_LOST"
    assert handle.closed
    assert await MemoryStoreRunStore(store).get("run-1") == taken.record


async def test_an_aborted_run_leaves_its_record_to_the_new_owner(
    store: ConditionalStore, clock: FakeClock
) -> None:
    old = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(5)
    new = await ledger(store, clock, "b", lease_ttl=1).acquire("run-1", heartbeat=False)
    await settle_record(old, "aborted", "lease lost", [])  # neither raises nor writes
    await settle_record(new, "aborted", None, [])  # a held lease is left as it is too
    stored = await MemoryStoreRunStore(store).get("run-1")
    assert stored == new.record
    assert stored is not None
    assert stored.status == "running"
    assert stored.lease is not None
    assert stored.lease.owner == "b"
    assert stored.lease.expires_at > START


class _ContendedOnce(ForwardingStore):
    """The first swap of the run record loses to another worker ("c", a 1 s lease), and the
    clock moves 2 s on before the loser retries: that lease has run out by then."""

    def __init__(self, inner: ConditionalStore, clock: FakeClock) -> None:
        super().__init__(inner)
        self.clock = clock
        self.contended = False

    async def _compare_and_set(self, key: str, *args: Any, **kwargs: Any) -> bool:
        if key == run_record_key("run-1") and not self.contended:
            self.contended = True
            entry = await self.inner.get(key)
            assert entry is not None
            rival = tx.acquired(RunRecord.parse(entry.value), "c", self.clock.now(), 1_000)
            put = record_put(rival)
            await self.inner.set(put.key, put.value, put.metadata)
            self.clock.advance(2)
        return await super()._compare_and_set(key, *args, **kwargs)


async def test_each_acquire_retry_judges_the_lease_at_its_own_time(clock: FakeClock) -> None:
    inner = InMemoryStore()
    await ledger(inner, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(5)
    contended = _ContendedOnce(inner, clock)
    handle = await ledger(contended, clock, "b", lease_ttl=1).acquire("run-1", heartbeat=False)
    assert contended.contended
    assert handle.fencing_token == 3  # a's 1, c's 2, then b's takeover of c's expired lease
    lease = handle.record.lease
    assert lease is not None
    assert lease.acquired_at == clock.now()
