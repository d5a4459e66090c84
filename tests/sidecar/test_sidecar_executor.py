"""The executor's checks hold at the write: a restore or cancel racing another writer loses."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from sidecar_helpers import ECHO, SiblingWritesFirst, run_request

from oma_actors.keyspace import sidecar_key
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.execution import RunExecutor
from sidecar.record import RunRecordV1
from sidecar.record_codec import decode
from sidecar.runs import RunRegistry
from sidecar.status import FailedPrecondition
from sidecar.stores import StoreRegistry
from sidecar.tool_host import ToolHost

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
async def parts() -> AsyncIterator[tuple[SiblingWritesFirst, RunExecutor]]:
    """An executor of owner-a on a store where a sibling can write first."""
    store = SiblingWritesFirst()
    async with StoreRegistry() as stores, asyncio.TaskGroup() as group:
        registry = RunRegistry(store, owner_id="owner-a", spawn=group.create_task)
        executor = RunExecutor(
            registry=registry,
            tool_host=ToolHost(),
            stores=stores,
            python_tools={"echo": ECHO},
            spawn=group.create_task,
            default_store_uri="memory://",
        )
        request = run_request("r1", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
        record = RunRecordV1(
            run_id="r1", request_id="q", owner_id="", request=request, store_uri="memory://"
        )
        await registry.create(record)
        await registry.set_status("r1", pb.RUN_STATUS_INTERRUPTED)
        yield store, executor


async def stored(store: SiblingWritesFirst) -> RunRecordV1:
    entry = await store.get(sidecar_key("run", "r1"))
    assert entry is not None
    return decode(entry.value)


def sibling_restores(record: RunRecordV1) -> RunRecordV1:
    return replace(record, owner_id="owner-b", status=pb.RUN_STATUS_RUNNING, attempt=2)


async def test_a_restore_racing_a_sibling_restore_finds_the_run_active(
    parts: tuple[SiblingWritesFirst, RunExecutor],
) -> None:
    store, executor = parts
    store.sibling_change = sibling_restores
    with pytest.raises(FailedPrecondition) as caught:
        await executor.restore(pb.RestoreRunRequest(run_id="r1"))
    assert caught.value.reason == "RUN_ACTIVE"
    after = await stored(store)
    assert (after.owner_id, after.status, after.attempt) == ("owner-b", pb.RUN_STATUS_RUNNING, 2)
    assert not executor.running("r1")


async def test_a_cancel_racing_a_sibling_restore_does_not_mark_its_run(
    parts: tuple[SiblingWritesFirst, RunExecutor],
) -> None:
    store, executor = parts
    store.sibling_change = sibling_restores
    with pytest.raises(FailedPrecondition) as caught:
        await executor.cancel("r1")
    assert caught.value.reason == "RUN_OWNED_ELSEWHERE"
    assert (await stored(store)).status == pb.RUN_STATUS_RUNNING


async def test_a_restore_claims_the_run_for_this_owner(
    parts: tuple[SiblingWritesFirst, RunExecutor],
) -> None:
    store, executor = parts
    claimed, resumed = await executor.restore(pb.RestoreRunRequest(run_id="r1"))
    assert not resumed
    assert (claimed.owner_id, claimed.attempt) == ("owner-a", 2)
    for _ in range(500):
        if (await stored(store)).status == pb.RUN_STATUS_COMPLETED:
            break
        await asyncio.sleep(0.01)
    assert (await stored(store)).status == pb.RUN_STATUS_COMPLETED
