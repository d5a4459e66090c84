"""The journal watch across a graceful restart and across an adoption (issue 18 item 5, D15).

The journal is the run's one log: its seqs are durable, so a watcher that resumes after the last
seq it saw is told of no gap when nothing was lost.

- A graceful restart (SIGTERM of the only sidecar, a file store): the watcher resumes with
  ``allow_gap=False`` and gets every later event, seqs contiguous, no ``SEQ_EXPIRED``.
- A kill -9 of the sidecar that executes a run on PostgreSQL, another adopting it (its lease
  expired): a watcher on a *third* sidecar, which never executes the run, follows it from seq 1
  to ``run/end`` as one contiguous stream spanning both attempts, with no gap, equal to the
  journal table.

Every sidecar is a real child process; the host tool ``lookup`` (one host per sidecar, as hosts
connect to every sidecar) stalls t2's first call so the run is mid-flight when its sidecar goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import TOKEN, lookup_tool, run_request
from test_sidecar_crash import SHORT_LEASE, finished, free_port, sidecar_process
from test_sidecar_journal_database import rows_of
from test_sidecar_journal_watch import watch_journal
from test_sidecar_scale_out import shared_store  # noqa: F401 - the fixture
from test_sidecar_scale_out import sidecar_process as shared_sidecar

from oma_actors.journal import PostgresRunJournal
from oma_actors.stores.uri import parse_store_uri
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crash


def assert_one_stream(events: list[pb.RunEvent], first: int) -> None:
    """Seqs ``first``, ``first + 1``, ... with no gap event, ending with a completed run/end."""
    assert [event.type for event in events if event.type == "gap"] == []
    seqs = [event.seq for event in events]
    assert seqs == list(range(first, first + len(seqs))), seqs
    assert events[-1].type == "run/end"
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED


async def test_a_graceful_restart_reports_no_gap_in_the_journal_watch(tmp_path: Path) -> None:
    port = free_port()
    store = tmp_path / "state.json"
    stopped, stalled = asyncio.Event(), asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        if call.task_id == "t2" and not stopped.is_set():
            stalled.set()
            await asyncio.Event().wait()
        return f"result of {call.idempotency_key}"

    seen: list[pb.RunEvent] = []  # the journal's events
    notices: list[pb.RunEvent] = []  # the sidecar's live notices (seq 0)

    async def watch_first(client: SidecarClient) -> None:
        # The stream ends UNAVAILABLE when the sidecar stops: what it yielded counts.
        request = pb.WatchRunRequest(run_id="jg-1", journal=True, allow_gap=False)
        call = client.runs.WatchRun(request, metadata=client.metadata)
        with contextlib.suppress(grpc.aio.AioRpcError):
            async for event in call:
                if event.type != "heartbeat":
                    (seen if event.seq else notices).append(event)

    async with SidecarClient(f"127.0.0.1:{port}", TOKEN) as client, asyncio.TaskGroup() as group:
        host = HostTools(client, "jg-host", [lookup_tool(lookup)])
        serving = group.create_task(host.run(reconnect_delay=0.05))
        try:
            async with sidecar_process(port, store, *SHORT_LEASE) as first:
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                await client.start_run(run_request("jg-1", task_ids=("t1", "t2")))
                watching = group.create_task(watch_first(client))
                await asyncio.wait_for(stalled.wait(), 15)
                first.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(first.wait(), 30) == 0
                stopped.set()
                await watching
            assert seen, "the first watcher saw no event"
            assert_seqs_from_one(seen)
            last = seen[-1].seq
            # The restarted sidecar (a new owner) adopts the run the stop gave up unfinished.
            async with sidecar_process(port, store, *SHORT_LEASE):
                await client.ready()
                await asyncio.wait_for(host.registered.wait(), 10)
                later = await asyncio.wait_for(
                    watch_journal(client, "jg-1", after_seq=last, allow_gap=False), 30
                )
        finally:
            host.stop()
            serving.cancel()

    assert_one_stream(later, last + 1)
    # The stop ended attempt 1's journal (run/end, read INTERRUPTED: nobody cancelled it),
    # whichever watcher got to read it; the adoption continued the numbering.
    first_ends = [e for e in [*seen, *later] if e.attempt == 1 and e.type == "run/end"]
    assert [e.run_status.status for e in first_ends] == [pb.RUN_STATUS_INTERRUPTED]
    assert {e.attempt for e in later if e not in first_ends} == {2}
    # What no journal holds reached the live watcher as notices, outside the seq space.
    dispatched = [e.task_id for e in notices if e.type == "tool_call_dispatched"]
    assert dispatched == ["t1", "t2"], [(e.type, e.task_id) for e in notices]


def assert_seqs_from_one(events: list[pb.RunEvent]) -> None:
    seqs = [event.seq for event in events]
    assert seqs == list(range(1, len(seqs) + 1)), seqs


async def test_a_watcher_on_a_third_sidecar_sees_one_stream_across_kill_9_and_adoption(
    shared_store: str,  # noqa: F811 - the fixture imported above
) -> None:
    killed, stalled = asyncio.Event(), asyncio.Event()
    hosts: list[HostTools] = []

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        if call.task_id == "t2" and not killed.is_set():
            stalled.set()  # outstanding when its sidecar dies
            await asyncio.Event().wait()
        return f"result of {call.idempotency_key}"

    async with contextlib.AsyncExitStack() as stack:
        started = [await stack.enter_async_context(shared_sidecar(shared_store)) for _ in range(3)]
        processes = [process for process, _ in started]
        clients = [
            await stack.enter_async_context(SidecarClient(address, TOKEN)) for _, address in started
        ]
        group = await stack.enter_async_context(asyncio.TaskGroup())
        for index, client in enumerate(clients):
            await client.ready()
            host = HostTools(client, f"jf-host-{index}", [lookup_tool(lookup)])
            hosts.append(host)
            task = group.create_task(host.run(reconnect_delay=0.05))
            stack.callback(task.cancel)
            stack.callback(host.stop)
        for host in hosts:
            await asyncio.wait_for(host.registered.wait(), 10)
        executing, adopter, watcher = clients
        assert (await executing.start_run(run_request("jf-1", task_ids=("t1", "t2", "t3")))).created
        watching = group.create_task(watch_journal(watcher, "jf-1", allow_gap=False))
        await asyncio.wait_for(stalled.wait(), 15)
        processes[0].send_signal(signal.SIGKILL)
        await processes[0].wait()
        killed.set()
        # The lease runs out; a survivor adopts the run (attempt 2) and finishes it.
        await asyncio.wait_for(finished(adopter, "jf-1"), 60)
        watched = await asyncio.wait_for(watching, 30)
        run = await watcher.get_run("jf-1")

    assert run.status == pb.RUN_STATUS_COMPLETED
    assert run.attempt == 2
    assert_one_stream(watched, 1)
    assert {event.attempt for event in watched} == {1, 2}  # both attempts, in one stream
    target = parse_store_uri(shared_store)
    stored = await rows_of(
        PostgresRunJournal(target.location, store_table=target.option or "oma_kv"), "jf-1"
    )
    assert [event.seq for event in watched] == [event.seq for event in stored]
    assert [event.type for event in watched] == [event.type for event in stored]
