"""A graceful restart loses no event, so a watcher is told of no gap (issue 18 item 5).

The sidecar runs as a real child process; it is stopped with SIGTERM (its graceful shutdown)
while a run waits on a host call, started again, and the run restored. A watcher that resumes
after the last seq it saw, with ``allow_gap=False``, must get every later event with no
``SEQ_EXPIRED`` and no jump in seqs: nothing was lost, so nothing may be reported lost. Both
streams: the journal (the default) and the progress events (``progress=True``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import TOKEN, lookup_tool, run_request
from test_sidecar_crash import SHORT_LEASE, free_port, sidecar_process

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crash


@pytest.mark.parametrize("progress", [False, True], ids=["journal", "progress"])
async def test_a_graceful_restart_reports_no_gap(tmp_path: Path, progress: bool) -> None:
    port = free_port()
    store = tmp_path / "state.json"
    stopped = asyncio.Event()
    stalled = asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        if call.task_id == "t2" and not stopped.is_set():
            stalled.set()
            await asyncio.Event().wait()
        return f"result of {call.idempotency_key}"

    seen: list[pb.RunEvent] = []

    async def watch_first(client: SidecarClient) -> None:
        # The stream ends UNAVAILABLE when the first sidecar stops: what it yielded counts.
        with contextlib.suppress(grpc.aio.AioRpcError):
            async for event in client.watch("gap-1", allow_gap=False, progress=progress):
                seen.append(event)

    async with SidecarClient(f"127.0.0.1:{port}", TOKEN) as client, asyncio.TaskGroup() as group:
        host = HostTools(client, "gap-host", [lookup_tool(lookup)])
        serving = group.create_task(host.run(reconnect_delay=0.05))
        try:
            async with sidecar_process(port, store, *SHORT_LEASE) as first:
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                await client.start_run(run_request("gap-1", task_ids=("t1", "t2")))
                watching = group.create_task(watch_first(client))
                await asyncio.wait_for(stalled.wait(), 15)
                first.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(first.wait(), 30) == 0
                stopped.set()
                await watching
            assert seen, "the first watcher saw no event"
            last = max(event.seq for event in seen)
            # The restarted sidecar (a new owner) adopts the run the stop gave up unfinished.
            async with sidecar_process(port, store, *SHORT_LEASE):
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                later = await asyncio.wait_for(
                    collect(
                        client.watch("gap-1", after_seq=last, allow_gap=False, progress=progress)
                    ),
                    20,
                )
        finally:
            host.stop()
            serving.cancel()

    assert [event.type for event in later if event.type == "gap"] == []
    # The journal's live notices (seq 0) stand outside its seq space.
    seqs = [event.seq for event in later if event.seq]
    assert seqs == list(range(last + 1, last + 1 + len(seqs))), (last, seqs)
    assert later[-1].run_status.status == pb.RUN_STATUS_COMPLETED


async def collect(events: Any) -> list[pb.RunEvent]:
    return [event async for event in events]
