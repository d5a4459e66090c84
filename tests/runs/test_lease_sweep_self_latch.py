"""A loss the handle declares itself: its lease ran out while the store could not renew it.

Then the stored record still names this handle (nobody took the run yet), so only the latch
stops a fenced write queued behind the failing renewal, and only the latch makes
``confirm_lost`` answer "lost". The heartbeat runs on real time (a 0.3 s lease beats every
0.25 s); no assertion rests on a sleep: the test waits for the beat to reach the store.
"""

from __future__ import annotations

import asyncio

import pytest

from oma_actors.errors import LeaseError
from oma_actors.keyspace import checkpoint_key, run_record_key
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import ConditionalStore, Expect, MemoryEntry, Put, Write
from oma_actors.testing import FakeClock, ForwardingStore

SNAPSHOT = checkpoint_key("run-1")


class _StalledReads(ForwardingStore):
    """Once ``armed``, a read waits for ``release`` and then fails, as a store going away."""

    def __init__(self, inner: ConditionalStore) -> None:
        super().__init__(inner)
        self.armed = False
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def get(self, key: str) -> MemoryEntry | None:
        if self.armed:
            self.entered.set()
            await self.release.wait()
            raise ConnectionError("store unreachable")
        return await self.inner.get(key)


async def test_a_self_declared_loss_refuses_the_queued_fenced_write_and_confirms_lost() -> None:
    inner = InMemoryStore()
    stalled = _StalledReads(inner)
    clock = FakeClock()
    ledger = RunLedger(MemoryStoreRunStore(stalled), owner="a", lease_ttl=0.3, clock=clock.unix)
    handle = await ledger.acquire("run-1")  # the heartbeat runs
    stored = await inner.get(run_record_key("run-1"))
    clock.advance(5)  # by the handle's own clock, its lease has run out
    stalled.armed = True
    async with asyncio.timeout(30):  # only against a hang
        await stalled.entered.wait()  # a beat holds the handle's lock, stuck in its read

    async def apply(checks: list[Expect], writes: list[Write]) -> bool:
        return await inner.apply(checks, [*writes, Put(SNAPSHOT, "after the loss")])

    queued = asyncio.get_running_loop().create_task(handle.fenced(apply))
    for _ in range(5):
        await asyncio.sleep(0)  # the fenced write passed its first check and waits for the lock
    assert not queued.done()
    stalled.armed = False
    stalled.release.set()  # the renewal fails; the beat declares the lease lost
    with pytest.raises(LeaseError) as caught:
        await queued
    assert caught.value.code == "RUN_LEASE_LOST"
    assert caught.value is handle.lost
    assert await inner.get(SNAPSHOT) is None
    assert await inner.get(run_record_key("run-1")) == stored  # nobody else wrote meanwhile
    assert await handle.confirm_lost() is True  # the store still names us; the latch decides
    await handle.aclose()
