"""A stopping sidecar starts no run: the RPCs it received go on in its grace period, but a
``StartRun`` or ``RestoreRun`` among them is refused ``UNAVAILABLE`` / ``DRAINING`` (retryable
on another sidecar, or once it is back) instead of being told it started a run whose attempt
the stop cancels at once; its failover sweep adopts nothing more.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN, eventually, run_request
from test_sidecar_outcomes import executor, seed

import sidecar.execution
from oma_actors.stores import InMemoryStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient, error_reason
from sidecar.record import UnknownRunError
from sidecar.server import ServerConfig, Sidecar
from sidecar.status import Unavailable
from sidecar.stores import StoreRegistry

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

HANG_GUARD = 30  # seconds: only against a hang, never the assertion


@pytest.fixture
async def stores() -> AsyncIterator[StoreRegistry]:
    async with StoreRegistry() as registry:
        yield registry


async def test_a_start_received_before_the_stop_is_refused_draining(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checking, checked = asyncio.Event(), asyncio.Event()

    async def held(*args: Any) -> None:  # the StartRun is inside its handler when the stop comes
        checking.set()
        await checked.wait()

    monkeypatch.setattr(sidecar.execution, "check_off_loop_schemas", held)
    config = ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri="memory://",
        python_tools={"echo": ECHO},
        grace_s=HANG_GUARD,  # the grace lets the StartRun finish: it is refused, not cut off
    )
    server = Sidecar(config)
    await server.__aenter__()
    stopping: asyncio.Task[None] | None = None
    try:
        async with SidecarClient(server.address, TOKEN) as client:
            request = run_request("late", tools=("echo",), arguments={"text": "x"})
            starting = asyncio.create_task(client.start_run(request))
            await asyncio.wait_for(checking.wait(), HANG_GUARD)
            stopping = asyncio.create_task(server.__aexit__(None, None, None))
            assert server.executor is not None
            executor = server.executor
            await eventually(lambda: executor.draining)
            checked.set()
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await asyncio.wait_for(starting, HANG_GUARD)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert error_reason(caught.value) == "DRAINING"
        assert server.registry is not None
        with pytest.raises(UnknownRunError):  # nothing registered: a retry elsewhere starts it
            await server.registry.get("late")
    finally:
        checked.set()
        if stopping is None:
            await server.__aexit__(None, None, None)
        else:
            await asyncio.wait_for(stopping, HANG_GUARD)


async def test_a_draining_sidecar_neither_restores_nor_adopts(stores: StoreRegistry) -> None:
    store = InMemoryStore()
    me = executor(store, stores, shared=False)
    await seed(store, "suspended-run", "suspended", shared=False)
    await seed(store, "orphan", "interrupted", shared=False)
    me.drain()
    with pytest.raises(Unavailable) as caught:
        await me.restore(pb.RestoreRunRequest(run_id="suspended-run"))
    assert caught.value.reason == "DRAINING"
    assert await me.adopt("orphan") is None
    # Nothing was claimed: a sidecar that is not stopping resumes and adopts them.
    assert (await me._registry.get("suspended-run")).attempt == 1
    assert (await me.current("suspended-run")).status == pb.RUN_STATUS_SUSPENDED
    assert (await me.current("orphan")).status == pb.RUN_STATUS_INTERRUPTED
    other = executor(store, stores, shared=False, owner="other")
    restored, _ = await other.restore(pb.RestoreRunRequest(run_id="suspended-run"))
    assert restored.record.attempt == 2
    adopted = await other.adopt("orphan")
    assert adopted is not None
    assert adopted.attempt == 2
