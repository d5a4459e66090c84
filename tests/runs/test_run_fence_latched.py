"""A latched lease loss refuses a fenced write before the caller's ``apply`` touches the store."""

from __future__ import annotations

import pytest
from run_helpers import ledger

from oma_actors.errors import LeaseError
from oma_actors.stores.base import ConditionalStore, Expect, Write
from oma_actors.testing import FakeClock


async def test_a_latched_loss_never_calls_apply_again(
    store: ConditionalStore, clock: FakeClock
) -> None:
    old = await ledger(store, clock, "a", lease_ttl=1).acquire("run-1", heartbeat=False)
    clock.advance(5)
    await ledger(store, clock, "b", lease_ttl=1).acquire("run-1", heartbeat=False)
    with pytest.raises(LeaseError) as first:
        await old.renew()
    assert first.value.code == "RUN_LEASE_LOST"
    calls: list[int] = []

    async def apply(checks: list[Expect], writes: list[Write]) -> bool:
        calls.append(len(writes))
        return await store.apply(checks, writes)

    with pytest.raises(LeaseError) as again:
        await old.fenced(apply)
    assert again.value is first.value
    assert calls == []  # the loss is latched: the store is not touched again
