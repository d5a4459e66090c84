"""D11: a fenced write and the fence are one store operation; a superseded owner's write never lands."""

from __future__ import annotations

import asyncio

import pytest
from run_helpers import code_of, ledger

from oma_actors.errors import LeaseError
from oma_actors.keyspace import checkpoint_key, run_record_key
from oma_actors.runs import MemoryStoreRunStore, RunLedger, RunRecord
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import ConditionalStore, Expect, Put, Write
from oma_actors.testing import FakeClock, ForwardingStore

SNAPSHOT = checkpoint_key("run-1")
REF = {"key": SNAPSHOT, "snapshotVersion": 4, "savedAt": "2026-09-01T00:00:01.000Z"}


def snapshot_writer(store: ConditionalStore, text: str, *, also: list[Expect] | None = None):  # type: ignore[no-untyped-def]
    """The orchestrator's side: the handle's checks and writes plus the snapshot, in one apply."""

    async def apply(checks: list[Expect], writes: list[Write]) -> bool:
        return await store.apply([*checks, *(also or [])], [*writes, Put(SNAPSHOT, text)])

    return apply


async def _value(store: ConditionalStore, key: str) -> str | None:
    entry = await store.get(key)
    return None if entry is None else entry.value


async def test_a_fenced_write_lands_with_the_record_pointing_at_it(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    assert handle.fence_store is store
    assert handle.fence_checks() == [Expect(run_record_key("run-1"), handle.record.to_json())]
    clock.advance(1)
    assert await handle.fenced(snapshot_writer(store, "rev 1"), checkpoint_ref=REF)
    assert await _value(store, SNAPSHOT) == "rev 1"
    stored = RunRecord.parse(await _value(store, run_record_key("run-1")) or "")
    assert stored == handle.record
    assert stored.checkpoint_ref == REF
    assert stored.version == 2
    assert await handle.fenced(snapshot_writer(store, "rev 2"))  # no ref: record untouched
    assert await _value(store, SNAPSHOT) == "rev 2"
    assert handle.record.version == 2


async def test_after_a_takeover_the_old_owners_fenced_write_never_lands(
    store: ConditionalStore, clock: FakeClock
) -> None:
    old = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    assert await old.fenced(snapshot_writer(store, "old rev 1"))
    clock.advance(5)
    new = await ledger(store, clock, "b", lease_ttl=1).acquire("run-1", heartbeat=False)
    assert await new.fenced(snapshot_writer(store, "new rev 2"), checkpoint_ref=REF)
    with pytest.raises(LeaseError) as caught:
        await old.fenced(snapshot_writer(store, "old rev 2"), checkpoint_ref=REF)
    assert caught.value.code == "RUN_LEASE_LOST"
    assert old.lost is caught.value
    assert await _value(store, SNAPSHOT) == "new rev 2"
    assert (await new.renew()).lease.owner == "b"  # type: ignore[union-attr]
    with pytest.raises(LeaseError) as again:
        old.fence_checks()
    assert again.value is caught.value


async def test_an_operator_cancel_fences_the_snapshot_too(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    await ledger(store, clock, "op").cancel("run-1", "stop")
    assert await code_of(handle.fenced(snapshot_writer(store, "late"))) == "RUN_LEASE_LOST"
    assert await _value(store, SNAPSHOT) is None


async def test_a_failing_check_of_the_caller_is_false_not_a_loss(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    mismatch = [Expect(SNAPSHOT, "something else")]
    assert not await handle.fenced(snapshot_writer(store, "x", also=mismatch), checkpoint_ref=REF)
    assert handle.held
    assert await _value(store, SNAPSHOT) is None
    assert handle.record.version == 1
    assert handle.record.checkpoint_ref is None


async def test_fenced_writes_and_heartbeats_never_make_a_false_alarm(
    store: ConditionalStore,
) -> None:
    """Renewals rewrite the record; the handle's lock keeps every check current."""
    run_store = MemoryStoreRunStore(store)
    handle = await RunLedger(run_store, owner="a", lease_ttl=0.3).acquire("run-1")

    async def renew_often() -> None:
        for _ in range(20):
            await handle.renew()
            await asyncio.sleep(0)

    async def write_often() -> list[bool]:
        results = []
        for i in range(20):
            results.append(await handle.fenced(snapshot_writer(store, f"rev {i}")))
            await asyncio.sleep(0)
        return results

    _, results = await asyncio.gather(renew_often(), write_often())
    assert all(results)
    assert handle.held
    assert await _value(store, SNAPSHOT) == "rev 19"
    await handle.complete()


class SlowApply(ForwardingStore):
    """Every apply takes a while, as a database round trip does."""

    async def _apply(self, checks, writes):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.01)
        return await super()._apply(checks, writes)


async def test_a_renewal_cannot_slip_between_a_fenced_check_and_its_write(
    clock: FakeClock,
) -> None:
    """Without the handle's lock, renewals during a slow apply would fail every check."""
    store = SlowApply(InMemoryStore())
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    done = asyncio.Event()

    async def renew_constantly() -> int:
        renewals = 0
        while not done.is_set():
            await handle.renew()
            renewals += 1
            await asyncio.sleep(0)
        return renewals

    async def write_five() -> list[bool]:
        try:
            return [await handle.fenced(snapshot_writer(store, f"rev {i}")) for i in range(5)]
        finally:
            done.set()

    renewals, results = await asyncio.gather(renew_constantly(), write_five())
    assert results == [True] * 5
    assert renewals >= 5
    assert handle.held


class LandsThenRaises(ForwardingStore):
    """The first apply lands, then raises: the caller never learns it succeeded."""

    def __init__(self, inner: ConditionalStore) -> None:
        super().__init__(inner)
        self.armed = True

    async def _apply(self, checks, writes):  # type: ignore[no-untyped-def]
        landed = await super()._apply(checks, writes)
        if self.armed:
            self.armed = False
            raise ConnectionError("connection lost after commit")
        return landed


async def test_a_write_of_unknown_outcome_does_not_wedge_the_fence(clock: FakeClock) -> None:
    store = LandsThenRaises(InMemoryStore())
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    with pytest.raises(ConnectionError):
        await handle.fenced(snapshot_writer(store, "rev 1"), checkpoint_ref=REF)
    # The record moved but the handle's copy did not: the next write re-reads and goes on.
    assert await handle.fenced(snapshot_writer(store, "rev 2"), checkpoint_ref=REF)
    assert handle.held
    assert await _value(store, SNAPSHOT) == "rev 2"
    assert handle.record.version == 3


async def test_confirm_lost_tells_a_self_serialised_caller(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    assert not await handle.confirm_lost()
    await ledger(store, clock, "op").cancel("run-1")
    assert not await store.apply(handle.fence_checks(), [Put(SNAPSHOT, "late")])
    assert await handle.confirm_lost()
    assert handle.lost is not None
    assert await handle.confirm_lost()


async def test_only_a_memory_store_run_store_over_a_conditional_store_can_fence(
    clock: FakeClock,
) -> None:
    class PlainRunStore:
        atomicity = "process"

        def __init__(self) -> None:
            self.inner = MemoryStoreRunStore(InMemoryStore())

        async def get(self, run_id):  # type: ignore[no-untyped-def]
            return await self.inner.get(run_id)

        async def create(self, record):  # type: ignore[no-untyped-def]
            return await self.inner.create(record)

        async def compare_and_set(self, run_id, expected_version, next):  # type: ignore[no-untyped-def]
            return await self.inner.compare_and_set(run_id, expected_version, next)

    ledger_ = RunLedger(PlainRunStore(), owner="a", clock=clock.unix)  # type: ignore[arg-type]
    handle = await ledger_.acquire("run-1", heartbeat=False)
    assert handle.fence_store is None
    await handle.release()


async def test_after_closing_the_run_a_fenced_write_is_refused(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    assert await handle.fenced(snapshot_writer(store, "final"))
    await handle.complete()
    late = handle.fenced(snapshot_writer(store, "after completion"), checkpoint_ref=REF)
    assert await code_of(late) == "RUN_LEASE_LOST"
    assert await _value(store, SNAPSHOT) == "final"
    stored = await ledger(store, clock, "a").get("run-1")
    assert stored is not None
    assert (stored.status, stored.lease, stored.checkpoint_ref) == ("completed", None, None)
