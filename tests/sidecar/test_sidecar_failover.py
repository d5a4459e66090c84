"""Failover in one process: the sweep adopts expired leases only, one adopter wins, fencing."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import pytest
from sidecar_helpers import run_request

from oma_actors.runs import MemoryStoreRunStore, RunLedger
from oma_actors.stores import InMemoryStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.execution import RunExecutor
from sidecar.failover import Failover
from sidecar.fencing import NotMine, still_mine
from sidecar.record import Outcome, RunRecordV1
from sidecar.runs import RunRegistry
from sidecar.stores import StoreRegistry
from sidecar.tool_host import ToolHost

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Coroutine

URI = "memory://failover"


@pytest.fixture
async def stores() -> AsyncIterator[StoreRegistry]:
    async with StoreRegistry() as registry:
        yield registry


def executor(store: InMemoryStore, stores: StoreRegistry, owner: str) -> RunExecutor:
    def spawn(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        coro.close()  # the attempt itself is not run here: only who claims it
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return cast("asyncio.Task[None]", done)

    registry = RunRegistry(store, owner_id=owner, spawn=spawn)
    return RunExecutor(
        registry=registry,
        tool_host=ToolHost(),
        stores=stores,
        python_tools={},
        spawn=spawn,
        default_store_uri=URI,
    )


async def dead_run(store: InMemoryStore, run_id: str, owner: str = "dead") -> None:
    """A run record of ``owner``, running, as a sidecar that died leaves it."""
    dead = RunRegistry(store, owner_id=owner, spawn=lambda coro: coro.close())
    request = run_request(run_id)
    record = RunRecordV1(
        run_id=run_id, request_id="r", owner_id=owner, request=request, store_uri=URI
    )
    await dead.create(record)
    await dead.set_status(run_id, pb.RUN_STATUS_RUNNING, Outcome())


async def test_only_one_of_two_survivors_adopts(stores: StoreRegistry) -> None:
    store = await stores.get(URI)
    assert isinstance(store, InMemoryStore)
    await dead_run(store, "run-1")
    b, c = executor(store, stores, "b"), executor(store, stores, "c")
    stale = await RunRegistry(store, owner_id="x", spawn=lambda c: c.close()).get("run-1")
    assert await b.adopt("run-1", "dead") is not None

    fresh_read = c._registry.get

    async def stale_read(run_id: str) -> RunRecordV1:
        await fresh_read(run_id)
        return stale  # as if c read the run before b's claim landed

    c._registry.get = stale_read  # type: ignore[method-assign]
    assert await c.adopt("run-1", "dead") is None  # the claim's compare-and-set decides
    stored = await RunRegistry(store, owner_id="x", spawn=lambda c: c.close()).get("run-1")
    assert (stored.owner_id, stored.attempt) == ("b", 2)


async def test_the_sweep_adopts_expired_leases_only(stores: StoreRegistry) -> None:
    store = await stores.get(URI)
    assert isinstance(store, InMemoryStore)
    now = [1_000_000.0]
    ledger = RunLedger(MemoryStoreRunStore(store), owner="dead", lease_ttl=5, clock=lambda: now[0])
    for run_id in ("expired", "live"):
        await dead_run(store, run_id)
        await ledger.acquire(run_id, heartbeat=False)
    now[0] += 3
    live_ledger = RunLedger(
        MemoryStoreRunStore(store), owner="dead", lease_ttl=5, clock=lambda: now[0]
    )
    await (await live_ledger.acquire("live", heartbeat=False)).renew()
    survivor = executor(store, stores, "b")
    sweep = Failover(
        executor=survivor, store=store, owner_id="b", lease_ttl=5, clock=lambda: now[0] + 3
    )
    assert await sweep.sweep() == ["expired"]
    mine = Failover(
        executor=survivor, store=store, owner_id="dead", lease_ttl=5, clock=lambda: now[0] + 99
    )
    assert await mine.sweep() == []  # a sidecar never adopts runs leased in its own name


async def test_a_fenced_sidecar_marks_nothing(stores: StoreRegistry) -> None:
    store = await stores.get(URI)
    assert isinstance(store, InMemoryStore)
    await dead_run(store, "run-2", owner="a")
    old = RunRegistry(store, owner_id="a", spawn=lambda coro: coro.close())
    assert await executor(store, stores, "b").adopt("run-2", "a") is not None
    with pytest.raises(NotMine):
        await old.set_status(
            "run-2", pb.RUN_STATUS_COMPLETED, Outcome(code="ok"), change=still_mine("a", 1)
        )
    stored = await old.get("run-2")
    assert (stored.owner_id, stored.attempt, stored.status) == ("b", 2, pb.RUN_STATUS_QUEUED)


async def test_a_stale_attempt_of_the_same_owner_marks_nothing(stores: StoreRegistry) -> None:
    # The fence compares attempts too: a restore on the same sidecar keeps the owner but starts
    # a new attempt, and the old attempt's late "completed" must not overwrite the new one's.
    store = await stores.get(URI)
    assert isinstance(store, InMemoryStore)
    await dead_run(store, "run-3", owner="a")
    registry = RunRegistry(store, owner_id="a", spawn=lambda coro: coro.close())
    await registry.set_status(
        "run-3",
        pb.RUN_STATUS_QUEUED,
        Outcome(),
        change=lambda record: replace(record, attempt=record.attempt + 1),  # RestoreRun's claim
    )
    with pytest.raises(NotMine):
        await registry.set_status(
            "run-3", pb.RUN_STATUS_COMPLETED, Outcome(code="ok"), change=still_mine("a", 1)
        )
    stored = await registry.get("run-3")
    assert (stored.owner_id, stored.attempt, stored.status) == ("a", 2, pb.RUN_STATUS_QUEUED)
