"""A PostgreSQL outage under a sidecar: a TCP proxy between the two is cut, then mended.

Shorter than the lease, the outage changes nothing visible: the run goes on (from its last
checkpoint) and completes, never interrupted nor queued again. Longer (3x the TTL), the lease lapses and the attempt stops writing; when the store
answers again the run is adopted (here by the same sidecar: it is the only one) and completes.
Never does a run end CANCELLED or FAILED because its store was unreachable, and no committed
tool call is delivered twice.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import grpc
import pytest
from sidecar_helpers import TOKEN, lookup_tool, run_request
from tcp_proxy import CuttableProxy
from test_sidecar_runs import hosting

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient
from sidecar.server import ServerConfig, Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.crash
ENDED = {pb.RUN_STATUS_COMPLETED, pb.RUN_STATUS_CANCELLED, pb.RUN_STATUS_FAILED}


@pytest.fixture
async def proxied(postgres_dsn: str) -> AsyncIterator[tuple[CuttableProxy, str]]:
    """A proxy to the test PostgreSQL and a store URI through it on a fresh table."""
    import asyncpg

    parts = urlsplit(postgres_dsn)
    table = f"oma_test_outage_{uuid.uuid4().hex[:12]}"
    async with CuttableProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as proxy:
        netloc = (
            f"{parts.username}@127.0.0.1:{proxy.port}"
            if parts.username
            else (f"127.0.0.1:{proxy.port}")
        )
        yield proxy, f"postgresql://{netloc}{parts.path}?table={table}"
    connection = await asyncpg.connect(postgres_dsn)
    try:
        for name in (table, f"{table}_journal"):
            await connection.execute(f'DROP TABLE IF EXISTS "{name}"')
    finally:
        await connection.close()


async def statuses_until_ended(client: SidecarClient, run_id: str, seen: list[int]) -> pb.Run:
    """Poll ``GetRun`` (through the outage: its errors are skipped) until the run ends."""
    while True:
        try:
            run = await client.get_run(run_id, full=True)
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.1)
            continue
        if not seen or seen[-1] != run.status:
            seen.append(run.status)
        if run.status in ENDED:
            return run
        await asyncio.sleep(0.1)


@pytest.mark.parametrize(
    ("ttl", "outage", "answered_during"),
    [(6.0, 1.0, True), (2.0, 6.0, True), (2.0, 6.0, False)],
    ids=["short", "3x-ttl", "3x-ttl-lease-lost-mid-call"],
)
async def test_a_store_outage_neither_cancels_nor_fails_nor_strands_a_run(
    proxied: tuple[CuttableProxy, str], ttl: float, outage: float, answered_during: bool
) -> None:
    # answered_during: the held call's result comes back during the outage (the attempt's
    # saves fail), or only after it (the attempt waits and loses its lease: "aborted").
    proxy, store_uri = proxied
    held, release = asyncio.Event(), asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        if call.task_id == "t2" and not release.is_set():
            held.set()  # the result is given back during the outage
            await release.wait()
        return f"result of {call.idempotency_key}"

    config = ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri=store_uri,
        heartbeat_s=0.5,
        grace_s=0.1,
        lease_ttl_s=ttl,
    )
    seen: list[int] = []
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        host = HostTools(client, "outage-host", [lookup_tool(lookup)])
        async with hosting(client, host):
            await client.start_run(run_request("o-1", task_ids=("t1", "t2", "t3")))
            await asyncio.wait_for(held.wait(), 15)
            proxy.cut()
            await asyncio.sleep(0.2)
            if answered_during:
                release.set()  # the attempt goes on and finds its store away
            await asyncio.sleep(outage)
            proxy.mend()
            release.set()
            run = await asyncio.wait_for(statuses_until_ended(client, "o-1", seen), 60)
            deliveries = list(host.ledger.deliveries)
            committed = host.ledger.committed_keys()
    assert run.status == pb.RUN_STATUS_COMPLETED, (run, seen)
    assert [task.status for task in run.tasks] == [pb.TASK_STATUS_COMPLETED] * 3
    assert not {pb.RUN_STATUS_CANCELLED, pb.RUN_STATUS_FAILED} & set(seen), seen
    keys = [call.idempotency_key for call in deliveries]
    assert keys.count("o-1:t1:toolu_0_0") == 1  # committed before the outage: never again
    assert committed == set(keys)
    assert_no_committed_call_delivered_again(host)
    if outage < ttl:
        # Nothing visible changed: never interrupted, queued again or adopted. (The attempt
        # whose saves failed goes on from its last checkpoint: the core counts that restore.)
        assert seen == [pb.RUN_STATUS_RUNNING, pb.RUN_STATUS_COMPLETED], seen


def assert_no_committed_call_delivered_again(host: HostTools) -> None:
    """No delivery repeats a key whose result the sidecar had acknowledged committed."""
    ledger = host.ledger
    for index, call in enumerate(ledger.deliveries):
        committed_earlier = {
            ledger.sent[earlier.call_id]
            for earlier in ledger.deliveries[:index]
            if ledger.acks.get(earlier.call_id) == pb.ResultAck.STATUS_COMMITTED
        }
        assert call.idempotency_key not in committed_earlier, call
