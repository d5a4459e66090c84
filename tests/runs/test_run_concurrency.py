"""Concurrent acquisitions of one run in one process: exactly one owner, every time."""

from __future__ import annotations

import asyncio

import pytest
from run_helpers import ledger

from oma_actors.errors import LeaseError
from oma_actors.runs import RunLeaseHandle
from oma_actors.stores.base import ConditionalStore
from oma_actors.testing import FakeClock, RendezvousStore

WORKERS = 10


async def _race(
    store: ConditionalStore, clock: FakeClock
) -> tuple[list[RunLeaseHandle], list[str]]:
    ledgers = [ledger(store, clock, f"worker-{i}") for i in range(WORKERS)]
    results = await asyncio.gather(
        *(one.acquire("run-1", heartbeat=False) for one in ledgers), return_exceptions=True
    )
    winners = [r for r in results if isinstance(r, RunLeaseHandle)]
    codes = [r.code for r in results if isinstance(r, LeaseError)]
    assert len(winners) + len(codes) == WORKERS, f"unexpected results: {results!r}"
    return winners, codes


@pytest.mark.parametrize("round_", range(3))
async def test_ten_workers_creating_one_run_give_one_owner(
    store: ConditionalStore, clock: FakeClock, round_: int
) -> None:
    rendezvous = RendezvousStore(store, parties=WORKERS)
    rendezvous.armed = True  # every worker reads "no record" before any of them writes
    winners, codes = await _race(rendezvous, clock)
    assert len(winners) == 1
    assert codes == ["RUN_LEASE_HELD"] * (WORKERS - 1)
    stored = await winners[0].renew()
    assert stored.lease is not None
    assert stored.lease.owner == winners[0].owner
    assert (stored.fencing_token, stored.attempt) == (1, 1)


async def test_ten_workers_taking_over_an_expired_run_give_one_owner(
    store: ConditionalStore, clock: FakeClock
) -> None:
    await ledger(store, clock, "crashed").acquire("run-1", heartbeat=False)
    clock.advance(61)
    rendezvous = RendezvousStore(store, parties=WORKERS)
    rendezvous.armed = True  # every worker sees the same expired lease before any swap
    winners, codes = await _race(rendezvous, clock)
    assert len(winners) == 1
    assert codes == ["RUN_LEASE_HELD"] * (WORKERS - 1)
    assert (winners[0].fencing_token, winners[0].attempt) == (2, 2)
    assert winners[0].held
    assert (await winners[0].renew()).version == 3
