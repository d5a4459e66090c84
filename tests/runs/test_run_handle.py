"""RS-09 (the owner's handle: fenced commands, the latched loss) and RS-10 (repeats converge)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest
from run_helpers import START, code_of, ledger

from oma_actors.errors import LeaseError
from oma_actors.keyspace import run_record_key
from oma_actors.runs import MemoryStoreRunStore
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import ConditionalStore, MemoryEntry
from oma_actors.testing import FakeClock, ForwardingStore

REF = {"key": "__oma_checkpoint__/run-1/latest", "snapshotVersion": 5, "savedAt": "2026-09-01T00:00:00.500Z"}  # fmt: skip


class CountingStore(ForwardingStore):
    """Counts every call that reaches the store (reads included)."""

    def __init__(self, inner: ConditionalStore) -> None:
        super().__init__(inner)
        self.calls = 0

    async def get(self, key: str) -> MemoryEntry | None:
        self.calls += 1
        return await self.inner.get(key)

    async def _compare_and_set(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls += 1
        return await super()._compare_and_set(*args, **kwargs)


async def test_renew_extends_the_lease_from_now(store: ConditionalStore, clock: FakeClock) -> None:
    handle = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(0.5)
    renewed = await handle.renew()
    assert renewed.lease is not None
    assert renewed.lease.expires_at == START + timedelta(seconds=1.5)
    assert (renewed.version, renewed.fencing_token) == (2, 1)


async def test_record_checkpoint_points_at_it_and_renews_in_one_write(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(0.5)
    updated = await handle.record_checkpoint(REF)
    assert updated.checkpoint_ref == REF
    assert updated.version == 2
    assert updated.lease is not None
    assert updated.lease.expires_at == START + timedelta(seconds=1.5)
    bad = handle.record_checkpoint({"key": "k", "snapshotVersion": "5", "savedAt": "x"})
    assert await code_of(bad) == "RUN_VALIDATION_ERROR"


async def test_suspend_records_the_approvals_and_drops_the_lease(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    suspended = await handle.suspend(["apr_a", "apr_b"])
    assert (suspended.status, suspended.lease) == ("suspended", None)
    assert suspended.suspension == {
        "suspendedAt": "2026-09-01T00:00:00.000Z", "pendingApprovalIds": ["apr_a", "apr_b"],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("command", "status", "outcome"),
    [
        ("complete", "completed", {"code": "ok"}),
        ("cancel", "cancelled", {"code": "cancelled"}),
    ],
)
async def test_default_outcomes(
    store: ConditionalStore, clock: FakeClock, command: str, status: str, outcome: object
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    closed = await getattr(handle, command)()
    assert (closed.status, closed.outcome, closed.lease) == (status, outcome, None)


async def test_fail_keeps_the_outcome_given(store: ConditionalStore, clock: FakeClock) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    failed = await handle.fail({"code": "failed", "message": "boom"})
    assert failed.outcome == {"code": "failed", "message": "boom"}
    again = await ledger(store, clock, "a").acquire("run-2", heartbeat=False)
    assert await code_of(again.fail({"message": "no code"})) == "RUN_VALIDATION_ERROR"


@pytest.mark.parametrize("command", ["fail", "suspend", "cancel"])
async def test_a_refused_closing_command_leaves_the_handle_holding_the_run(
    store: ConditionalStore, clock: FakeClock, command: str
) -> None:
    # Bad input is refused before the command ends the handle's ownership: a handle that
    # stopped renewing on a typo would let its run's lease lapse while the run goes on.
    handle = await ledger(store, clock, "a").acquire("run-1")  # renewing
    refused = {
        "fail": lambda: handle.fail({"code": 5}),
        "suspend": lambda: handle.suspend([1]),  # type: ignore[list-item]
        "cancel": lambda: handle.cancel({"code": "cancelled", "message": ["no"]}),
    }[command]()
    assert await code_of(refused) == "RUN_VALIDATION_ERROR"
    assert not handle.closed
    assert handle.heartbeat_running
    stored = await MemoryStoreRunStore(store).get("run-1")
    assert stored is not None
    assert (stored.status, stored.version) == ("running", 1)
    assert (await handle.complete()).status == "completed"


async def test_release_queues_the_run_and_the_next_owner_keeps_the_attempt(
    store: ConditionalStore, clock: FakeClock
) -> None:
    first = await ledger(store, clock, "a", lease_ttl=600).acquire("run-1", heartbeat=False)
    released = await first.release()
    assert (released.status, released.lease) == ("queued", None)
    second = await ledger(store, clock, "b", lease_ttl=600).acquire("run-1", heartbeat=False)
    assert (second.record.status, second.attempt, second.fencing_token) == ("running", 1, 2)


async def test_a_taken_over_handle_is_refused_and_the_first_loss_latches(
    clock: FakeClock,
) -> None:
    store = CountingStore(InMemoryStore())
    first = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(5)
    await ledger(store, clock, "b", lease_ttl=1).acquire("run-1", heartbeat=False)
    assert first.held
    assert first.lost is None
    with pytest.raises(LeaseError) as caught:
        await first.renew()
    lost = caught.value
    assert lost.code == "RUN_LEASE_LOST"
    assert first.lost is lost
    assert not first.held
    assert lost.record is not None
    assert lost.record.fencing_token == 2
    before = store.calls
    for command in (first.renew(), first.record_checkpoint(REF), first.complete(),
                    first.fail({"code": "failed"}), first.cancel(), first.release(),
                    first.suspend([])):  # fmt: skip
        with pytest.raises(LeaseError) as again:
            await command
        assert again.value is lost
    assert store.calls == before, "a latched handle touched the store"
    assert (await store.get(run_record_key("run-1"))) is not None
    stored = await ledger(store, clock, "b").get("run-1")
    assert stored is not None
    assert (stored.status, stored.lease.owner) == ("running", "b")


async def test_a_deleted_record_is_a_loss(store: ConditionalStore, clock: FakeClock) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    await store.delete(run_record_key("run-1"))
    with pytest.raises(LeaseError) as caught:
        await handle.renew()
    assert (caught.value.code, caught.value.record) == ("RUN_LEASE_LOST", None)


async def test_expiry_alone_does_not_stop_a_write(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(10)  # expired, but nobody took it over: the token still matches
    assert (await handle.renew()).version == 2


@pytest.mark.parametrize(
    ("command", "args"),
    [("suspend", (["apr_a"],)), ("complete", ()), ("fail", ({"code": "failed"},)),
     ("cancel", ()), ("release", ())],
)  # fmt: skip
async def test_a_repeated_closing_command_converges_without_writing(
    clock: FakeClock, command: str, args: tuple[object, ...]
) -> None:
    store = CountingStore(InMemoryStore())
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    first = await getattr(handle, command)(*args)
    clock.advance(1)
    second = await getattr(handle, command)(*args)
    assert second == first
    assert handle.lost is None
    stored = await ledger(store, clock, "a").get("run-1")
    assert stored is not None
    assert stored.version == first.version


async def test_a_closing_command_after_another_closed_the_run_is_a_loss(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    await handle.complete()
    assert await code_of(handle.fail({"code": "failed"})) == "RUN_LEASE_LOST"
    stored = await ledger(store, clock, "a").get("run-1")
    assert stored is not None
    assert stored.status == "completed"


async def test_a_closing_command_after_a_takeover_does_not_converge(
    store: ConditionalStore, clock: FakeClock
) -> None:
    """The same status under another token is someone else's command: still a loss."""
    first = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(5)
    second = await ledger(store, clock, "b", lease_ttl=1).acquire("run-1", heartbeat=False)
    await second.release()
    assert await code_of(first.release()) == "RUN_LEASE_LOST"


async def test_on_lost_is_called_once_and_wait_lost_returns_the_error(
    store: ConditionalStore, clock: FakeClock
) -> None:
    seen: list[LeaseError] = []
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False, on_lost=seen.append)
    await ledger(store, clock, "op").cancel("run-1")
    assert await code_of(handle.renew()) == "RUN_LEASE_LOST"
    assert await code_of(handle.renew()) == "RUN_LEASE_LOST"
    assert len(seen) == 1
    assert seen[0] is handle.lost
    assert await handle.wait_lost() is handle.lost


async def test_a_raising_on_lost_callback_does_not_undo_the_loss(
    store: ConditionalStore, clock: FakeClock
) -> None:
    def explode(error: LeaseError) -> None:
        raise RuntimeError("observer bug")

    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False, on_lost=explode)
    await ledger(store, clock, "op").cancel("run-1")
    assert await code_of(handle.renew()) == "RUN_LEASE_LOST"
    assert handle.lost is not None


class SlowReads(ForwardingStore):
    """Every read takes a moment, so a second command queues behind the first."""

    async def get(self, key: str) -> MemoryEntry | None:
        await asyncio.sleep(0.01)
        return await self.inner.get(key)


async def test_a_loss_seen_twice_at_once_is_latched_and_reported_once(clock: FakeClock) -> None:
    store = SlowReads(InMemoryStore())
    seen: list[LeaseError] = []
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False, on_lost=seen.append)
    await ledger(store, clock, "op").cancel("run-1")
    renewed, confirmed = await asyncio.gather(
        handle.renew(), handle.confirm_lost(), return_exceptions=True
    )
    assert confirmed is True
    assert renewed is handle.lost
    assert seen == [handle.lost]


class TakeoverBeforeSwap(ForwardingStore):
    """Runs ``before`` once, just before the next compare-and-set reaches the store."""

    def __init__(self, inner: ConditionalStore) -> None:
        super().__init__(inner)
        self.before: Callable[[], Awaitable[object]] | None = None
        self.swaps = 0

    async def _compare_and_set(
        self, key: str, expected: str | None, value: str, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        self.swaps += 1
        before, self.before = self.before, None
        if before is not None:
            await before()
        return await super()._compare_and_set(key, expected, value, metadata)


async def test_a_takeover_between_read_and_swap_is_found_on_the_retry(clock: FakeClock) -> None:
    store = TakeoverBeforeSwap(InMemoryStore())
    handle = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(5)
    store.before = lambda: ledger(store, clock, "b", lease_ttl=1).acquire("run-1", heartbeat=False)
    with pytest.raises(LeaseError) as caught:
        await handle.renew()
    assert caught.value.code == "RUN_LEASE_LOST"
    stored = await ledger(store, clock, "b").get("run-1")
    assert stored is not None
    assert stored.lease is not None
    assert stored.lease.owner == "b"


async def test_a_handle_write_that_stays_contended_is_refused(clock: FakeClock) -> None:
    class AlwaysLoses(TakeoverBeforeSwap):
        losing = False

        async def _compare_and_set(
            self,
            key: str,
            expected: str | None,
            value: str,
            metadata: Mapping[str, Any] | None = None,
        ) -> bool:
            if self.losing:
                self.swaps += 1
                return False
            return await super()._compare_and_set(key, expected, value, metadata)

    store = AlwaysLoses(InMemoryStore())
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    store.losing, store.swaps = True, 0
    assert await code_of(handle.renew()) == "RUN_CONFLICT"
    assert store.swaps == 6
    assert handle.held  # contention is not a loss
    assert handle.record.version == 1
