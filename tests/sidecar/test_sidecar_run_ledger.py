"""The registry and the ledger's run record agree: restore of a failed run, cancel, settings."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

import pytest
from test_sidecar_cli import serve
from test_sidecar_failover import URI, dead_run, leased

from oma_actors.runs import MemoryStoreRunStore, RunLedger, RunStoreOptions
from oma_actors.stores import InMemoryStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.execution import RunExecutor
from sidecar.failover import Failover
from sidecar.record import Outcome
from sidecar.runs import RunRegistry
from sidecar.status import FailedPrecondition
from sidecar.stores import StoreRegistry
from sidecar.tool_host import ToolHost

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Coroutine


@pytest.fixture
async def stores() -> AsyncIterator[StoreRegistry]:
    async with StoreRegistry() as registry:
        yield registry


def leased_executor(store: InMemoryStore, stores: StoreRegistry, owner: str) -> RunExecutor:
    def spawn(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        coro.close()  # no attempt runs here: only what restore and cancel decide
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return cast("asyncio.Task[None]", done)

    return RunExecutor(
        registry=RunRegistry(store, spawn=spawn),
        tool_host=ToolHost(),
        stores=stores,
        python_tools={},
        spawn=spawn,
        default_store_uri=URI,
        run_store=RunStoreOptions(MemoryStoreRunStore(store), owner=owner, lease_ttl=5),
    )


async def test_restore_of_a_failed_run_with_a_terminal_run_record_is_refused(
    stores: StoreRegistry,
) -> None:
    store = await stores.get(URI)
    assert isinstance(store, InMemoryStore)
    await dead_run(store, "r-failed")
    handle = await RunLedger(MemoryStoreRunStore(store), owner="a").acquire(
        "r-failed", heartbeat=False
    )
    await handle.fail({"code": "boom"})
    registry = RunRegistry(store, spawn=lambda coro: coro.close())
    await registry.announce("r-failed", pb.RUN_STATUS_FAILED, Outcome(code="boom"))
    survivor = leased_executor(store, stores, "b")
    with pytest.raises(FailedPrecondition) as caught:
        await survivor.restore(pb.RestoreRunRequest(run_id="r-failed"))
    assert caught.value.reason == "RUN_ALREADY_TERMINAL"
    assert (await registry.get("r-failed")).attempt == 1  # nothing claimed
    failed = await MemoryStoreRunStore(store).get("r-failed")
    assert failed is not None
    assert (failed.status, failed.attempt, failed.lease) == ("failed", 1, None)
    assert (await survivor.current("r-failed")).status == pb.RUN_STATUS_FAILED


async def test_cancel_also_cancels_the_run_record_so_no_sidecar_adopts_it(
    stores: StoreRegistry,
) -> None:
    store = await stores.get(URI)
    assert isinstance(store, InMemoryStore)
    await dead_run(store, "r-cancel")
    await leased(store, "r-cancel", "dead", ago=60)  # the dead sidecar's lease, expired
    survivor = leased_executor(store, stores, "b")
    assert (await survivor.current("r-cancel")).status == pb.RUN_STATUS_INTERRUPTED
    cancelled = await survivor.cancel("r-cancel", "not wanted")
    assert cancelled.status == pb.RUN_STATUS_CANCELLED
    record = await RunLedger(MemoryStoreRunStore(store)).get("r-cancel")
    assert record is not None
    assert record.status == "cancelled"
    sweep = Failover(executor=survivor, registry=survivor._registry, lease_ttl=5)
    assert await sweep.sweep() == []


@pytest.mark.parametrize("ttl", ["0", "-1", "3601"])
def test_lease_ttl_out_of_range_exits_2(ttl: str) -> None:
    process = serve("--store", "memory://", "--lease-ttl", ttl, env={"OMA_SIDECAR_TOKEN": "t"})
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2, err
    assert "--lease-ttl must be in (0, 3600] seconds" in err


@pytest.mark.parametrize("args", [["--retain-runs", "-1"], ["--retain-seconds", "0"]])
def test_retention_settings_out_of_range_exit_2(args: list[str]) -> None:
    process = serve("--store", "memory://", *args, env={"OMA_SIDECAR_TOKEN": "t"})
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2, err
    assert "--retain-runs must be >= 0" in err
