"""A ``RESUME_POLICY_NEVER`` decision holds on every sidecar of a shared store.

Two sidecars share one PostgreSQL store. Sidecar A executes a run whose task t1 waits for an
approval while task t2 still runs; the reviewer decides on sidecar B with ``NEVER`` (the caller
will restore the run itself). When t2 has drained, the run suspends on A on an approval already
decided: A must not resume it, as it would not had the decision reached A. The policy is kept
in the run's registry record (``resume_held``), not in the process that took the decision.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from sidecar_helpers import ECHO, LOOKUP_SCHEMA, TOKEN
from test_sidecar_approval_parallel import decide, gated_and_slow
from test_sidecar_approvals import waiting_run

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTool, HostTools, SidecarClient
from sidecar.server import ServerConfig, Sidecar

if TYPE_CHECKING:
    from service_kit import FreshStores

Pair = tuple[SidecarClient, SidecarClient, asyncio.Event]


@pytest.fixture
async def pair(fresh_stores: FreshStores) -> AsyncIterator[Pair]:
    """Clients of sidecars A (its host serves ``lookup``, held until the test lets it go) and
    B, on one fresh PostgreSQL table."""
    dsn, table = fresh_stores.postgres_table()  # skips locally, fails under CI=true if down
    go = asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        await go.wait()
        return f"found {arguments['query']}"

    def config(label: str) -> ServerConfig:
        return ServerConfig(
            token=TOKEN, listen="127.0.0.1:0", store_uri=f"{dsn}?table={table}",
            python_tools={"echo": ECHO}, heartbeat_s=0.5, grace_s=0.1, owner_id=label,
        )  # fmt: skip

    async with (
        Sidecar(config("a")) as a,
        Sidecar(config("b")) as b,
        SidecarClient(a.address, TOKEN) as on_a,
        SidecarClient(b.address, TOKEN) as on_b,
    ):
        tool = HostTool(name="lookup", description="x", input_schema=LOOKUP_SCHEMA, handler=lookup)
        host = HostTools(on_a, "h", [tool])
        serving = asyncio.create_task(host.run())
        await asyncio.wait_for(host.registered.wait(), 10)
        try:
            yield on_a, on_b, go
        finally:
            host.stop()
            serving.cancel()


async def settled(client: SidecarClient, run_id: str, seconds: float) -> pb.Run:
    """The run once it stops running, or as it is after ``seconds``."""
    run = await client.get_run(run_id)
    for _ in range(int(seconds / 0.05)):
        if run.status not in (pb.RUN_STATUS_RUNNING, pb.RUN_STATUS_QUEUED):
            break
        await asyncio.sleep(0.05)
        run = await client.get_run(run_id)
    return run


async def test_a_never_decision_on_another_sidecar_is_not_resumed_where_the_run_executes(
    pair: Pair,
) -> None:
    on_a, on_b, go = pair
    await on_a.start_run(gated_and_slow("held"))
    assert (await waiting_run(on_a, "held")).status == pb.RUN_STATUS_RUNNING  # t2 still runs
    decided = await decide(on_b, "held", pb.DecideApprovalRequest.RESUME_POLICY_NEVER)
    assert decided.recorded
    go.set()  # t2 finishes on A; the run then suspends on t1's decided approval
    run = await settled(on_a, "held", 10)
    await asyncio.sleep(1.5)  # time for A to resume it, were it to
    assert (await on_a.get_run("held")).status == pb.RUN_STATUS_SUSPENDED, run
    # The caller restores it, as it said it would: it completes.
    await on_b.restore_run("held")
    async with asyncio.timeout(20):
        _ = [event async for event in on_b.watch("held", follow_suspended=True)]
    assert (await on_b.get_run("held")).status == pb.RUN_STATUS_COMPLETED


async def test_a_later_decision_that_resumes_lifts_the_hold_on_every_sidecar(pair: Pair) -> None:
    on_a, on_b, go = pair
    await on_a.start_run(gated_and_slow("lifted"))
    await waiting_run(on_a, "lifted")
    await decide(on_b, "lifted", pb.DecideApprovalRequest.RESUME_POLICY_NEVER)
    # The reviewer changes their mind before the run suspends: the last decision's policy holds.
    again = await decide(on_b, "lifted", pb.DecideApprovalRequest.RESUME_POLICY_WHEN_ALL_DECIDED)
    assert not again.recorded  # the decision stands; only the resume policy changed
    go.set()
    async with asyncio.timeout(20):
        _ = [event async for event in on_a.watch("lifted", follow_suspended=True)]
    assert (await on_a.get_run("lifted")).status == pb.RUN_STATUS_COMPLETED
