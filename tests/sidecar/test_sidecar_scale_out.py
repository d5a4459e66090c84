"""Three sidecars on one PostgreSQL: kill -9 one mid-run, a survivor adopts its runs.

Each sidecar is a real child process (``python -m sidecar``) on a fresh table of the test
database, all three started with identical flags (``--listen 127.0.0.1:0``, no ``--owner-id``,
the way identical pods are deployed) and a 2 s lease TTL: each process start is its own owner.
One Python host per sidecar serves the
tool ``lookup`` (hosts connect to every sidecar); together their ledgers are the external
ledger keyed by idempotency key, which must never see a committed call delivered again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import TOKEN, lookup_tool, run_request
from test_sidecar_crash import finished
from test_sidecar_journal_watch import watch_journal

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.cli import LISTEN_LINE
from sidecar.client import HostTools, SidecarClient

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.crash
LEASE_TTL = 2.0


@contextlib.asynccontextmanager
async def sidecar_process(
    store_uri: str, *flags: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``python -m sidecar`` on a free port sharing ``store_uri``, and the address it bound;
    killed (-9) on exit. Every process gets the same flags."""
    env = {**os.environ, "OMA_SIDECAR_TOKEN": TOKEN}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sidecar", "--listen", "127.0.0.1:0",
        "--store", store_uri, "--lease-ttl", str(LEASE_TTL), "--heartbeat", "0.5", *flags,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            while True:
                line = (await process.stdout.readline()).decode()
                assert line, "the sidecar exited before listening"
                if line.startswith(LISTEN_LINE):
                    address = line.removeprefix(LISTEN_LINE).strip()
                    break
        yield process, address
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
        await process.wait()


@pytest.fixture
async def shared_store(postgres_dsn: str) -> AsyncIterator[str]:
    """A ``postgresql://`` URI on a fresh table, dropped after the test."""
    import asyncpg

    table = f"oma_test_scale_{uuid.uuid4().hex[:12]}"
    yield f"{postgres_dsn}?table={table}"
    connection = await asyncpg.connect(postgres_dsn)
    try:
        for name in (table, f"{table}_journal"):  # the store's table and its runs' journal
            await connection.execute(f'DROP TABLE IF EXISTS "{name}"')
    finally:
        await connection.close()


async def watch_live(client: SidecarClient, run_id: str, seen: asyncio.Event) -> list[pb.RunEvent]:
    """Every journal event of ``run_id`` until it finishes; sets ``seen`` at t1's completion."""
    events: list[pb.RunEvent] = []
    async for event in client.watch(run_id, allow_gap=True, journal=True):
        if not event.seq and event.type != "gap":
            continue  # a live notice: outside the journal's seqs
        events.append(event)
        if event.task_id == "t1" and event.task_status.status == pb.TASK_STATUS_COMPLETED:
            seen.set()
    return events


async def test_kill_9_one_of_three_sidecars_a_survivor_adopts_its_runs(
    shared_store: str,
) -> None:
    killed = asyncio.Event()
    stalled: set[str] = set()
    all_stalled = asyncio.Event()
    repeats: list[str] = []
    hosts: list[HostTools] = []

    def committed_keys() -> set[str]:
        keys: set[str] = set()
        for host in hosts:
            keys |= host.ledger.committed_keys()
        return keys

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        if call.idempotency_key in committed_keys():
            repeats.append(call.idempotency_key)  # a committed effect delivered again
        if call.run_id.startswith("victim") and call.task_id == "t2" and not killed.is_set():
            stalled.add(call.run_id)  # outstanding when its sidecar dies
            if len(stalled) == 2:
                all_stalled.set()
            await asyncio.Event().wait()
        return f"result of {call.idempotency_key}"

    victims = ["victim-1", "victim-2"]
    others = ["calm-b", "calm-c"]
    async with contextlib.AsyncExitStack() as stack:
        started = [await stack.enter_async_context(sidecar_process(shared_store)) for _ in range(3)]
        processes = [process for process, _ in started]
        clients = [
            await stack.enter_async_context(SidecarClient(address, TOKEN)) for _, address in started
        ]
        group = await stack.enter_async_context(asyncio.TaskGroup())
        for index, client in enumerate(clients):
            await client.ready()
            host = HostTools(client, f"host-{index}", [lookup_tool(lookup)])
            hosts.append(host)
            task = group.create_task(host.run(reconnect_delay=0.05))
            stack.callback(task.cancel)
            stack.callback(host.stop)
        for host in hosts:
            await asyncio.wait_for(host.registered.wait(), 10)
        for run_id in victims:
            request = run_request(run_id, task_ids=("t1", "t2", "t3"))
            assert (await clients[0].start_run(request)).created
        live = {run_id: asyncio.Event() for run_id in victims}
        victim_watches = {
            run_id: group.create_task(watch_live(clients[1], run_id, live[run_id]))
            for run_id in victims
        }
        for run_id, client in zip(others, clients[1:], strict=True):
            assert (await client.start_run(run_request(run_id, task_ids=("t1", "t2")))).created
        # Each calm run is watched live from the *other* survivor: the run's journal.
        remote_watches = {
            run_id: group.create_task(watch_journal(client, run_id, allow_gap=True))
            for run_id, client in zip(others, [clients[2], clients[1]], strict=True)
        }
        await asyncio.wait_for(all_stalled.wait(), 15)
        # A survivor follows the victims live from their journals: it sees t1 completed by
        # side-a before side-a dies (the journal is durable as events happen).
        await asyncio.wait_for(asyncio.gather(*(seen.wait() for seen in live.values())), 10)
        # A sidecar that does not execute a victim shows its tasks as they are: t1 is done.
        elsewhere = await clients[2].get_run("victim-1", full=True)
        assert [task.status for task in elsewhere.tasks][:1] == [pb.TASK_STATUS_COMPLETED]
        assert elsewhere.status == pb.RUN_STATUS_RUNNING
        processes[0].send_signal(signal.SIGKILL)
        await processes[0].wait()
        killed.set()

        survivor = clients[1]
        terminal: dict[str, pb.RunEvent] = {}
        for run_id in victims + others:
            events = await asyncio.wait_for(finished(survivor, run_id), 30)
            terminal[run_id] = events[-1]
        runs = {run_id: await clients[2].get_run(run_id, full=True) for run_id in terminal}
        watched = {
            run_id: await asyncio.wait_for(task, 30) for run_id, task in remote_watches.items()
        }
        followed = {
            run_id: await asyncio.wait_for(task, 30) for run_id, task in victim_watches.items()
        }
        # A finished run is deleted on one sidecar and is gone from every sidecar.
        assert await clients[1].delete_run("victim-1") > 0
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await clients[2].get_run("victim-1")
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND

    for run_id, event in terminal.items():
        # The journal's run/end, or the status notice of the sidecar that executed the run.
        assert event.type in ("run/end", "run_status"), (run_id, event)
        assert event.run_status.status == pb.RUN_STATUS_COMPLETED, (run_id, event)
    for run_id, run in runs.items():
        assert run.status == pb.RUN_STATUS_COMPLETED, run
        assert [task.status for task in run.tasks] == [pb.TASK_STATUS_COMPLETED] * len(run.tasks)
        assert run.attempt == (2 if run_id in victims else 1), run
    assert repeats == []
    for run_id, events in watched.items():
        # Every event was durably journaled as it happened: no gap, seqs 1..n, run/end last.
        assert [event.type for event in events if event.type == "gap"] == [], run_id
        assert [event.seq for event in events] == list(range(1, len(events) + 1)), run_id
        assert events[-1].type == "run/end", run_id
        assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED, run_id
        assert "tool/result" in {event.type for event in events}, run_id
    for run_id, events in followed.items():
        # One journal across the kill and the adoption: side-a's events, then the adopter's,
        # seqs 1..n with no gap (nothing side-a journaled was lost).
        assert [event.type for event in events if event.type == "gap"] == [], run_id
        assert [event.seq for event in events] == list(range(1, len(events) + 1)), run_id
        assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED, run_id
        assert {e.attempt for e in events} == {1, 2}
    deliveries = [call for host in hosts for call in host.ledger.deliveries]
    per_key = Counter(call.idempotency_key for call in deliveries)
    for run_id in victims:
        # t1 was committed before the kill (never delivered again); t2 was outstanding: it is
        # delivered twice, the second time by the adopting sidecar marked as a redelivery.
        assert per_key[f"{run_id}:t1:toolu_0_0"] == 1, per_key
        assert per_key[f"{run_id}:t2:toolu_0_0"] == 2, per_key
        assert per_key[f"{run_id}:t3:toolu_0_0"] == 1, per_key
        again = [c for c in deliveries if c.idempotency_key == f"{run_id}:t2:toolu_0_0"]
        assert [(c.run_attempt, c.redelivery) for c in again] == [(1, False), (2, True)]
    for run_id in others:
        assert all(per_key[f"{run_id}:{task}:toolu_0_0"] == 1 for task in ("t1", "t2"))
    for run_id in victims:
        adopted = [c for c in deliveries if c.run_id == run_id and c.run_attempt == 2]
        # The adopting sidecar's hosts got t2's outstanding call again (same key) and t3.
        assert {c.idempotency_key for c in adopted} == {
            f"{run_id}:t2:toolu_0_0",
            f"{run_id}:t3:toolu_0_0",
        }
        assert not [c for c in adopted if c.task_id == "t1"]
