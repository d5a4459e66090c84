"""RS-11 (the heartbeat) and the handle's lifetime, with real time and short leases (< 2 s).

No assertion rests on a sleep being long enough: a test that says "no beat happened" first
waits until a control run's heartbeat (same interval) beat twice, counted by ``Beats``, so a
slow machine makes it wait longer, never pass vacuously.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from oma_actors.errors import LeaseError
from oma_actors.keyspace import run_record_key
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.runs.heartbeat import heartbeat_interval
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import ConditionalStore, MemoryEntry
from oma_actors.testing import FakeClock, ForwardingStore


def test_the_interval_is_a_third_of_the_lease_and_at_least_250_ms() -> None:
    assert heartbeat_interval(60_000) == 20.0
    assert heartbeat_interval(750) == 0.25
    assert heartbeat_interval(300) == 0.25
    assert heartbeat_interval(1_000) == 0.333


async def _version(run_store: MemoryStoreRunStore) -> int:
    record = await run_store.get("run-1")
    assert record is not None
    return record.version


class Beats(ForwardingStore):
    """Counts the successful compare-and-sets of each key; a test waits for the n-th one."""

    def __init__(self, inner: ConditionalStore) -> None:
        super().__init__(inner)
        self.writes: Counter[str] = Counter()
        self._changed = asyncio.Condition()

    async def _compare_and_set(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        written = await super()._compare_and_set(*args, **kwargs)
        if written:
            async with self._changed:
                self.writes[args[0]] += 1
                self._changed.notify_all()
        return written

    async def wait_for(self, run_id: str, count: int) -> None:
        """Until ``run_id``'s record was written ``count`` times (the deadline only stops a
        hang; no assertion depends on it)."""
        key = run_record_key(run_id)
        async with asyncio.timeout(30), self._changed:
            await self._changed.wait_for(lambda: self.writes[key] >= count)


async def test_the_heartbeat_renews_while_the_handle_is_open(store: ConditionalStore) -> None:
    beats = Beats(store)
    run_store = MemoryStoreRunStore(beats)
    ledger = RunLedger(run_store, owner="a", lease_ttl=0.3)
    handle = await ledger.acquire("run-1")
    try:
        assert handle.heartbeat_running
        await beats.wait_for("run-1", 3)  # the acquisition, then two beats
        assert await _version(run_store) >= 3
        assert handle.held
    finally:
        await handle.complete()
    assert not handle.heartbeat_running
    done = beats.writes[run_record_key("run-1")]
    control = await ledger.acquire("control")  # beats at the same interval
    await beats.wait_for("control", 3)
    await control.complete()
    assert beats.writes[run_record_key("run-1")] == done, "the heartbeat wrote after completion"


async def test_without_heartbeat_nothing_renews(store: ConditionalStore) -> None:
    beats = Beats(store)
    run_store = MemoryStoreRunStore(beats)
    ledger = RunLedger(run_store, owner="a", lease_ttl=0.3)
    handle = await ledger.acquire("run-1", heartbeat=False)
    control = await ledger.acquire("control")
    await beats.wait_for("control", 3)  # two beats of the same interval have happened
    assert not handle.heartbeat_running
    assert await _version(run_store) == 1
    await handle.release()
    await control.complete()


async def test_a_loss_found_by_the_heartbeat_latches_and_is_reported(
    store: ConditionalStore,
) -> None:
    run_store = MemoryStoreRunStore(store)
    seen: list[LeaseError] = []
    handle = await RunLedger(run_store, owner="a", lease_ttl=0.3).acquire(
        "run-1", on_lost=seen.append
    )
    await RunLedger(run_store, owner="operator").cancel("run-1")
    async with asyncio.timeout(1.5):
        lost = await handle.wait_lost()
    assert lost.code == "RUN_LEASE_LOST"
    assert seen == [lost]
    assert not handle.held
    await asyncio.sleep(0.05)
    assert not handle.heartbeat_running
    with pytest.raises(LeaseError) as caught:
        await handle.renew()
    assert caught.value is lost
    await handle.aclose()


class BrokenReads(ForwardingStore):
    """Every read raises once ``broken`` is set, as an unreachable database would."""

    def __init__(self, inner: ConditionalStore) -> None:
        super().__init__(inner)
        self.broken = False

    async def get(self, key: str) -> MemoryEntry | None:
        if self.broken:
            raise ConnectionError("store unreachable")
        return await self.inner.get(key)


async def test_a_heartbeat_that_cannot_renew_until_expiry_declares_the_lease_lost() -> None:
    """The store keeps failing: once our lease has run out we stop claiming the run."""
    broken = BrokenReads(InMemoryStore())
    run_store = MemoryStoreRunStore(broken)
    handle = await RunLedger(run_store, owner="a", lease_ttl=0.3).acquire("run-1")
    broken.broken = True
    async with asyncio.timeout(1.5):
        lost = await handle.wait_lost()
    assert lost.code == "RUN_LEASE_LOST"
    assert "expired" in lost.message
    await handle.aclose()


class SlowRenewals(ForwardingStore):
    """Holds every compare-and-set for ``delay`` seconds."""

    def __init__(self, inner: ConditionalStore, delay: float) -> None:
        super().__init__(inner)
        self.delay = delay
        self.cancelled = 0
        self.held = asyncio.Event()  # a compare-and-set is inside its delay

    async def _compare_and_set(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            if self.delay:
                self.held.set()
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return await super()._compare_and_set(*args, **kwargs)


async def test_closing_waits_for_a_renewal_in_flight_instead_of_cancelling_it() -> None:
    slow = SlowRenewals(InMemoryStore(), delay=0.0)
    run_store = MemoryStoreRunStore(slow)
    handle = await RunLedger(run_store, owner="a", lease_ttl=0.3).acquire("run-1")
    slow.delay = 0.2
    async with asyncio.timeout(30):  # only against a hang
        await slow.held.wait()  # the first beat is now inside its compare-and-set
    slow.delay = 0.0
    closed = await handle.complete()
    assert closed.status == "completed"
    assert slow.cancelled == 0
    assert handle.lost is None


async def test_async_with_releases_an_open_run_and_stops_renewing(
    store: ConditionalStore,
) -> None:
    run_store = MemoryStoreRunStore(store)
    ledger = RunLedger(run_store, owner="a", lease_ttl=0.3)
    async with ledger.acquire("run-1") as handle:
        assert handle.heartbeat_running
    assert not handle.heartbeat_running
    record = await run_store.get("run-1")
    assert record is not None
    assert (record.status, record.lease) == ("queued", None)


async def test_async_with_leaves_a_closed_run_alone_and_lets_the_body_error_through(
    store: ConditionalStore,
) -> None:
    run_store = MemoryStoreRunStore(store)
    ledger = RunLedger(run_store, owner="a", lease_ttl=0.3)
    async with ledger.acquire("done") as handle:
        await handle.complete()
    assert (await run_store.get("done")).status == "completed"  # type: ignore[union-attr]
    with pytest.raises(RuntimeError, match="body"):
        async with ledger.acquire("crashed"):
            raise RuntimeError("body")
    assert (await run_store.get("crashed")).status == "queued"  # type: ignore[union-attr]

    async def cancelled_then_crashes() -> None:
        async with ledger.acquire("taken"):
            await RunLedger(run_store, owner="op").cancel("taken")
            raise RuntimeError("body")  # the refused release must not hide this error

    with pytest.raises(RuntimeError, match="body"):
        await cancelled_then_crashes()
    assert (await run_store.get("taken")).status == "cancelled"  # type: ignore[union-attr]


async def test_cancelling_the_body_still_releases_and_propagates(store: ConditionalStore) -> None:
    run_store = MemoryStoreRunStore(store)
    ledger = RunLedger(run_store, owner="a", lease_ttl=0.3)
    entered = asyncio.Event()

    async def worker() -> None:
        async with ledger.acquire("run-1"):
            entered.set()
            await asyncio.sleep(10)

    task = asyncio.get_running_loop().create_task(worker())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await run_store.get("run-1")).status == "queued"  # type: ignore[union-attr]


async def test_aclose_stops_renewing_without_writing(store: ConditionalStore) -> None:
    clock = FakeClock()
    run_store = MemoryStoreRunStore(store)
    handle = await RunLedger(run_store, owner="a", lease_ttl=0.3, clock=clock.unix).acquire("r")
    await handle.aclose()
    assert handle.closed
    assert not handle.heartbeat_running
    assert (await run_store.get("r")).version == 1  # type: ignore[union-attr]
    handle.start_heartbeat()
    assert not handle.heartbeat_running, "a closed handle restarted its heartbeat"
    quiet = await RunLedger(run_store, owner="a", clock=clock.unix).acquire("q", heartbeat=False)
    await quiet.aclose()
    quiet.start_heartbeat()
    assert not quiet.heartbeat_running, "a handle closed before its heartbeat started it later"


async def test_a_loss_found_by_a_command_stops_the_heartbeat_at_once(
    store: ConditionalStore,
) -> None:
    run_store = MemoryStoreRunStore(store)
    handle = await RunLedger(run_store, owner="a", lease_ttl=0.3).acquire("run-1")
    await RunLedger(run_store, owner="op").cancel("run-1")
    with pytest.raises(LeaseError):
        await handle.renew()
    # The next beat is due 250 ms after the acquisition: the heartbeat must end well before it.
    await asyncio.sleep(0.1)
    assert not handle.heartbeat_running
