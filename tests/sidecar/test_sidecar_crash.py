"""kill -9 the sidecar mid-run, start a new one, restore: the run completes, no committed call repeats.

The sidecar runs as a real child process (``python -m sidecar``) on a FileStore. A Python host
serves the tool ``lookup`` over Connect; its ledger records every delivery and every ack.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sidecar_helpers import TOKEN, lookup_tool, run_request

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.cli import LISTEN_LINE
from sidecar.client import HostTools, SidecarClient

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.crash


SHORT_LEASE = ("--lease-ttl", "2")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def sidecar_process(
    port: int, store: Path, *options: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m sidecar`` on ``port`` and ``store`` (and ``options``); killed (-9) on exit
    if still alive."""
    env = {**os.environ, "OMA_SIDECAR_TOKEN": TOKEN}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sidecar", "--listen", f"127.0.0.1:{port}",
        "--store", f"file://{store}", "--heartbeat", "0.5", *options,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            while True:
                line = (await process.stdout.readline()).decode()
                assert line, "the sidecar exited before listening"
                if line.startswith(LISTEN_LINE):
                    assert line.strip().endswith(f":{port}")
                    break
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
        await process.wait()


async def finished(client: SidecarClient, run_id: str, **fields: bool) -> list[pb.RunEvent]:
    """Every event of ``WatchRun`` (the journal of a run that keeps one; ``progress=True`` for
    the progress events) until the run ends."""
    return [event async for event in client.watch(run_id, allow_gap=True, **fields)]


async def test_kill_9_then_restart_adopts_without_repeating_committed_calls(
    tmp_path: Path,
) -> None:
    port = free_port()
    store = tmp_path / "state.json"
    address = f"127.0.0.1:{port}"
    killed = asyncio.Event()
    stalled = asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        if call.task_id == "t2" and not killed.is_set():
            stalled.set()  # t2's call is outstanding when the sidecar dies
            await asyncio.Event().wait()
        return f"result of {call.idempotency_key}"

    async with SidecarClient(address, TOKEN) as client, asyncio.TaskGroup() as group:
        host = HostTools(client, "crash-host", [lookup_tool(lookup)])
        serving = group.create_task(host.run(reconnect_delay=0.05))
        try:
            async with sidecar_process(port, store, *SHORT_LEASE) as first:
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                started = await client.start_run(
                    run_request("crash-1", task_ids=("t1", "t2", "t3"))
                )
                assert started.created
                await asyncio.wait_for(stalled.wait(), 15)
                first.send_signal(signal.SIGKILL)
                await first.wait()
                killed.set()
            committed_before = host.ledger.committed_keys()
            assert committed_before == {"crash-1:t1:toolu_0_0"}

            # The restarted sidecar is a new owner: once the dead one's lease expired, it
            # adopts the run from its checkpoint (attempt 2), no RestoreRun needed.
            async with sidecar_process(port, store, *SHORT_LEASE):
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                events = await asyncio.wait_for(finished(client, "crash-1"), 20)
                run = await client.get_run("crash-1", full=True)
        finally:
            host.stop()
            serving.cancel()

    assert run.status == pb.RUN_STATUS_COMPLETED, run
    assert run.attempt == 2, run
    assert [task.status for task in run.tasks] == [pb.TASK_STATUS_COMPLETED] * 3
    assert run.tasks[1].result == "done: result of crash-1:t2:toolu_0_0"
    keys = [call.idempotency_key for call in host.ledger.deliveries]
    # t1 committed before the crash and was never delivered again; t2's outstanding call came
    # back once with the same key, flagged as a redelivery; t3 ran once after the restore.
    assert keys == [
        "crash-1:t1:toolu_0_0",
        "crash-1:t2:toolu_0_0",
        "crash-1:t2:toolu_0_0",
        "crash-1:t3:toolu_0_0",
    ]
    # t3 was first issued after the restore: not a redelivery, though attempt 2 (issue 24, 9).
    assert [call.redelivery for call in host.ledger.deliveries] == [False, False, True, False]
    assert [call.run_attempt for call in host.ledger.deliveries] == [1, 1, 2, 2]
    for index, call in enumerate(host.ledger.deliveries):
        earlier = {c.call_id for c in host.ledger.deliveries[:index]}
        committed_earlier = {
            host.ledger.sent[c]
            for c in earlier
            if c in host.ledger.acks and host.ledger.acks[c] == pb.ResultAck.STATUS_COMMITTED
        }
        assert call.idempotency_key not in committed_earlier
    assert host.ledger.committed_keys() == set(keys)
    # The journal's seqs never repeat across the two processes (the live notices, seq 0, stand
    # outside the seq space). A kill -9 between a compaction's snapshot and the release of its
    # held-back events (C06: they reach the journal only once the snapshot is durable) loses
    # those events from the journal, not from the run (the snapshot holds their facts): the
    # watcher is told, as a gap inside the killed attempt's seqs, never one into attempt 2.
    seqs = [event.seq for event in events if event.seq]
    assert seqs == sorted(set(seqs))
    second = min(event.seq for event in events if event.seq and event.attempt == 2)
    for gap in (event for event in events if event.type == "gap"):
        assert 0 < gap.gap.from_seq <= gap.gap.to_seq < second, gap
    assert {event.attempt for event in events if event.seq} == {1, 2}
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED


async def test_a_second_boot_keeps_finished_history_and_numbering(tmp_path: Path) -> None:
    port = free_port()
    store = tmp_path / "state.json"
    async with SidecarClient(f"127.0.0.1:{port}", TOKEN) as client:
        async with sidecar_process(port, store) as process:
            await client.ready()
            request = run_request("done-1", tools=("lookup",), task_ids=("t1",))
            request.team.host_tools.add(name="lookup", input_schema_json='{"type": "object"}')
            request.team.agents[0].scripted.turns[0].ClearField("tool_calls")
            await client.start_run(request)
            first = await asyncio.wait_for(finished(client, "done-1"), 10)
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
        async with sidecar_process(port, store):
            await client.ready()
            again = await asyncio.wait_for(finished(client, "done-1"), 10)
            run = await client.get_run("done-1")
    assert run.status == pb.RUN_STATUS_COMPLETED
    # The journal, read again by the second process: the same events, the same seqs (the first
    # watch also had the live notices, seq 0, which are never replayed).
    assert [e.seq for e in again] == [e.seq for e in first if e.seq]
