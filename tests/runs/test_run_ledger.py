"""RS-05 (the ledger), RS-06 (acquire), RS-07 (request_resume) and RS-08 (operator cancel)."""

from __future__ import annotations

import os
import re

import pytest
from run_helpers import START, code_of, code_of_call, ledger

from oma_actors.errors import LeaseError
from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.runs.fields import to_ms
from oma_actors.stores import InMemoryStore
from oma_actors.stores.base import ConditionalStore
from oma_actors.testing import FakeClock, ForwardingStore

# --- RS-05 ----------------------------------------------------------------------------------


def test_the_ledger_refuses_a_blank_owner_or_a_ttl_that_is_not_positive() -> None:
    run_store = MemoryStoreRunStore(InMemoryStore())
    for ttl in (0, -1.0, float("nan"), float("inf"), True):
        assert code_of_call(RunLedger, run_store, lease_ttl=ttl) == "RUN_VALIDATION_ERROR"
    assert code_of_call(RunLedger, run_store, owner="  ") == "RUN_VALIDATION_ERROR"


def test_each_ledger_gets_its_own_default_owner() -> None:
    run_store = MemoryStoreRunStore(InMemoryStore())
    first, second = RunLedger(run_store).owner, RunLedger(run_store).owner
    assert first != second
    assert re.fullmatch(rf"oma-worker-{os.getpid()}-[0-9a-f]{{8}}", first)


async def test_the_default_lease_lasts_sixty_seconds(store: ConditionalStore) -> None:
    clock = FakeClock(START)
    run_store = MemoryStoreRunStore(store)
    handle = await RunLedger(run_store, owner="a", clock=clock.unix).acquire("r", heartbeat=False)
    assert handle.record.lease is not None
    assert to_ms(handle.record.lease.expires_at) - to_ms(START) == 60_000


# --- RS-06 ----------------------------------------------------------------------------------


async def test_a_new_run_is_created_running_with_token_one(
    store: ConditionalStore, clock: FakeClock
) -> None:
    handle = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    got = handle.record
    assert (got.version, got.status, got.attempt, got.fencing_token) == (1, "running", 1, 1)
    assert got.lease is not None
    assert got.lease.owner == "a"
    assert got.lease.acquired_at == START
    assert (handle.run_id, handle.owner, handle.fencing_token) == ("run-1", "a", 1)


@pytest.mark.parametrize("run_id", ["  ", "", None, 7])
async def test_a_blank_run_id_is_refused_before_the_store_is_read(
    clock: FakeClock, run_id: object
) -> None:
    class Untouchable(ForwardingStore):
        async def get(self, key: str) -> None:
            raise AssertionError(f"read {key!r}")

    refusing = ledger(Untouchable(InMemoryStore()), clock, "a")
    assert await code_of(refusing.acquire(run_id)) == "RUN_VALIDATION_ERROR"  # type: ignore[arg-type]


async def test_a_live_lease_of_another_owner_is_held(
    store: ConditionalStore, clock: FakeClock
) -> None:
    await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    clock.advance(59.999)
    with pytest.raises(LeaseError) as caught:
        await ledger(store, clock, "b").acquire("run-1", heartbeat=False)
    assert caught.value.code == "RUN_LEASE_HELD"
    assert caught.value.record is not None
    assert caught.value.record.fencing_token == 1


async def test_an_expired_lease_is_taken_over_with_a_new_token_and_attempt(
    store: ConditionalStore, clock: FakeClock
) -> None:
    first = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    clock.advance(60)
    second = await ledger(store, clock, "b").acquire("run-1", heartbeat=False)
    assert (second.fencing_token, second.attempt) == (first.fencing_token + 1, first.attempt + 1)
    assert second.record.version == 2


async def test_re_acquiring_a_live_own_lease_moves_the_token_but_not_the_attempt(
    store: ConditionalStore, clock: FakeClock
) -> None:
    a = ledger(store, clock, "a")
    first = await a.acquire("run-1", heartbeat=False)
    again = await a.acquire("run-1", heartbeat=False)
    assert (again.fencing_token, again.attempt) == (2, 1)
    assert await code_of(first.renew()) == "RUN_LEASE_LOST"


async def test_an_own_expired_lease_counts_as_a_takeover(
    store: ConditionalStore, clock: FakeClock
) -> None:
    a = ledger(store, clock, "a")
    await a.acquire("run-1", heartbeat=False)
    clock.advance(61)
    assert (await a.acquire("run-1", heartbeat=False)).attempt == 2


async def test_terminal_and_suspended_runs_cannot_be_acquired(
    store: ConditionalStore, clock: FakeClock
) -> None:
    a = ledger(store, clock, "a")
    await (await a.acquire("done", heartbeat=False)).complete()
    await (await a.acquire("waiting", heartbeat=False)).suspend(["apr_1"])
    for run_id, code, status in (
        ("done", "RUN_ALREADY_TERMINAL", "completed"),
        ("waiting", "RUN_SUSPENDED", "suspended"),
    ):
        with pytest.raises(LeaseError) as caught:
            await a.acquire(run_id)
        assert caught.value.code == code
        assert caught.value.record is not None  # the refusal says what it saw
        assert caught.value.record.status == status


class LosingStore(ForwardingStore):
    """Every compare-and-set loses, as if another worker always wrote first."""

    def __init__(self, inner: ConditionalStore) -> None:
        super().__init__(inner)
        self.swaps = 0

    async def _compare_and_set(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.swaps += 1
        return False


async def test_contention_is_retried_five_times_then_refused(clock: FakeClock) -> None:
    inner = InMemoryStore()
    await ledger(inner, clock, "a").acquire("run-1", heartbeat=False)
    clock.advance(61)
    losing = LosingStore(inner)
    assert await code_of(ledger(losing, clock, "b").acquire("run-1")) == "RUN_CONFLICT"
    assert losing.swaps == 6  # the first try and five retries
    assert await code_of(ledger(losing, clock, "b").acquire("new-run")) == "RUN_CONFLICT"


async def test_an_operators_change_that_stays_contended_is_refused(clock: FakeClock) -> None:
    # A cancel and a resume request retry their compare-and-set too, then refuse: never a
    # silent "done" that wrote nothing.
    inner = InMemoryStore()
    await (await ledger(inner, clock, "a").acquire("run-1", heartbeat=False)).suspend(["apr_1"])
    losing = LosingStore(inner)
    operator = ledger(losing, clock, "operator")
    assert await code_of(operator.request_resume("run-1")) == "RUN_CONFLICT"
    assert losing.swaps == 6
    assert await code_of(operator.cancel("run-1")) == "RUN_CONFLICT"
    assert losing.swaps == 12
    stored = await MemoryStoreRunStore(inner).get("run-1")
    assert stored is not None
    assert stored.status == "suspended"


# --- RS-07 ----------------------------------------------------------------------------------


async def test_request_resume_makes_a_suspended_run_queued_once(
    store: ConditionalStore, clock: FakeClock
) -> None:
    a, b = ledger(store, clock, "a"), ledger(store, clock, "b")
    await (await a.acquire("run-1", heartbeat=False)).suspend(["apr_1"])
    resumed = await b.request_resume("run-1")
    assert (resumed.status, resumed.lease, resumed.suspension) == ("queued", None, None)
    assert (await b.request_resume("run-1")).version == resumed.version
    handle = await b.acquire("run-1", heartbeat=False)
    assert (handle.record.status, handle.attempt, handle.fencing_token) == ("running", 1, 2)


async def test_request_resume_refuses_what_it_must(
    store: ConditionalStore, clock: FakeClock
) -> None:
    a, b = ledger(store, clock, "a"), ledger(store, clock, "b")
    assert await code_of(b.request_resume("missing")) == "RUN_NOT_FOUND"
    await a.acquire("run-1", heartbeat=False)
    assert await code_of(b.request_resume("run-1")) == "RUN_LEASE_HELD"
    assert await code_of(a.request_resume("run-1")) == "RUN_LEASE_HELD"
    clock.advance(60)
    assert (await b.request_resume("run-1")).status == "queued"  # abandoned: eligible again
    await (await a.acquire("run-1", heartbeat=False)).fail({"code": "failed"})
    assert await code_of(b.request_resume("run-1")) == "RUN_ALREADY_TERMINAL"


# --- RS-08 ----------------------------------------------------------------------------------


async def test_an_operator_cancel_fences_the_worker(
    store: ConditionalStore, clock: FakeClock
) -> None:
    worker = await ledger(store, clock, "a").acquire("run-1", heartbeat=False)
    operator = ledger(store, clock, "operator")
    cancelled = await operator.cancel("run-1", "operator stop")
    assert (cancelled.status, cancelled.lease, cancelled.fencing_token) == ("cancelled", None, 2)
    assert cancelled.outcome == {"code": "cancelled", "message": "operator stop"}
    assert (await operator.cancel("run-1")).version == cancelled.version  # repeat: no write
    with pytest.raises(LeaseError) as caught:
        await worker.record_checkpoint(
            {"key": "k", "snapshotVersion": 5, "savedAt": "2026-09-01T00:00:00.000Z"}
        )
    assert caught.value.code == "RUN_LEASE_LOST"
    assert caught.value.record is not None
    assert caught.value.record.status == "cancelled"


async def test_a_cancel_unless_held_spares_a_live_lease_only(
    store: ConditionalStore, clock: FakeClock
) -> None:
    worker = await ledger(store, clock, "a", lease_ttl=10.0).acquire("run-1", heartbeat=False)
    operator = ledger(store, clock, "operator")
    assert await code_of(operator.cancel("run-1", unless_held=True)) == "RUN_LEASE_HELD"
    assert (await worker.renew()).status == "running"  # untouched, still the worker's
    clock.advance(11.0)
    cancelled = await operator.cancel("run-1", unless_held=True)  # its lease lapsed
    assert (cancelled.status, cancelled.lease) == ("cancelled", None)


async def test_cancel_without_a_message_and_its_refusals(
    store: ConditionalStore, clock: FakeClock
) -> None:
    operator = ledger(store, clock, "operator")
    assert await code_of(operator.cancel("missing")) == "RUN_NOT_FOUND"
    await (await ledger(store, clock, "a").acquire("q", heartbeat=False)).release()
    assert (await operator.cancel("q")).outcome == {"code": "cancelled"}
    await (await ledger(store, clock, "a").acquire("done", heartbeat=False)).complete()
    assert await code_of(operator.cancel("done")) == "RUN_ALREADY_TERMINAL"
