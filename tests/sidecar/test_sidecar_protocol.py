"""Protocol edges (issue 12, items 3, 9 and 10): watches that end, runs that never vanish,
gaps with a seq, retries that must be the same request, host calls that say they wait, cancel
reasons, and the providers ServerInfo offers."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN, lookup_tool, run_request
from test_sidecar_auth import error_info

from oma_actors import open_store
from oma_actors.keyspace import sidecar_key
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient
from sidecar.convert import struct_to_dict
from sidecar.plugins import usable_providers
from sidecar.record import RunRecordV1, WireStatus
from sidecar.record_codec import encode, encode_history
from sidecar.run_history import EVENTS_KIND
from sidecar.runs import RUN_KIND
from sidecar.server import ServerConfig, Sidecar

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def config(store_uri: str, **kwargs: Any) -> ServerConfig:
    return ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri=store_uri,
        python_tools={"echo": ECHO},
        heartbeat_s=0.2,
        grace_s=0.1,
        **kwargs,
    )


def status_event(seq: int, status: WireStatus) -> pb.RunEvent:
    event = pb.RunEvent(seq=seq, run_id="r-1", attempt=1, type="run_status")
    event.run_status.status = status
    return event


async def seed(state: str, records: dict[str, str], history: Sequence[pb.RunEvent] = ()) -> None:
    """Write run records (run id -> stored text) and r-1's event history into ``state``."""
    async with open_store(state) as store:
        for run_id, text in records.items():
            await store.set(sidecar_key(RUN_KIND, run_id), text)
        if history:
            await store.set(sidecar_key(EVENTS_KIND, "r-1"), encode_history(history))


def record(status: WireStatus) -> str:
    """r-1's registry record as a sidecar from before D16 left it (with its status, and no run
    record: the status it stored is what it shows)."""
    request = run_request("r-1", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    return encode(
        RunRecordV1(
            run_id="r-1",
            request_id=request.request_id,
            request=request,
            legacy_status=status,
            store_uri="memory://",
            seq_reserved_until=1024,
        )
    )


async def test_a_watch_ends_when_the_final_status_was_saved_but_its_event_was_lost(
    tmp_path: Path,
) -> None:
    # The crash fell between writing COMPLETED into the record and writing the events: the
    # history's last status is RUNNING. The watch used to wait for the end forever.
    state = f"file://{tmp_path}/state.json"
    await seed(
        state, {"r-1": record(pb.RUN_STATUS_COMPLETED)}, [status_event(1, pb.RUN_STATUS_RUNNING)]
    )
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        events = await asyncio.wait_for(_all(client.watch("r-1")), 5)
        again = await asyncio.wait_for(_all(client.watch("r-1", after_seq=events[-1].seq)), 5)
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert events[-1].seq > 1024  # a new seq, above the reservation of the dead process
    assert again == []
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        later = await asyncio.wait_for(_all(client.watch("r-1")), 5)
    assert [event.seq for event in later] == [event.seq for event in events]  # saved, once


async def test_the_gap_event_has_the_last_missing_seq_and_a_true_range(tmp_path: Path) -> None:
    # The sidecar died while r-1 ran: its events above seq 1 are gone, the reservation was 1024.
    state = f"file://{tmp_path}/state.json"
    await seed(
        state,
        {"r-1": record(pb.RUN_STATUS_RUNNING)},
        [status_event(1, pb.RUN_STATUS_QUEUED)],
    )
    async with (
        Sidecar(config(state, lease_ttl_s=1.0)) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        events = await asyncio.wait_for(_all(client.watch("r-1")), 5)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _all(client.watch("r-1", allow_gap=False))
    assert [event.type for event in events[:3]] == ["run_status", "gap", "run_status"]
    first, gap, adopted = events[:3]
    assert (gap.gap.from_seq, gap.gap.to_seq) == (2, 1024)
    assert gap.seq == 1024  # not 0, the heartbeat's seq: resuming after it skips the gap
    assert first.seq < gap.seq < adopted.seq
    # Nobody took its lease for a TTL: this sidecar (a new owner) adopts it.
    assert (adopted.run_status.status, adopted.attempt) == (pb.RUN_STATUS_QUEUED, 2)
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert caught.value.code() == grpc.StatusCode.OUT_OF_RANGE


async def test_an_unreadable_record_is_listed_not_lost(tmp_path: Path) -> None:
    state = f"file://{tmp_path}/state.json"
    deep = "[" * 100_000 + "]" * 100_000  # used to crash the boot with a RecursionError
    await seed(
        state,
        {"r-1": record(pb.RUN_STATUS_COMPLETED), "broken": "{not json", "deep": deep},
        [status_event(1, pb.RUN_STATUS_COMPLETED)],
    )
    async with Sidecar(config(state)) as server, SidecarClient(server.address, TOKEN) as client:
        assert server.unreadable == ["broken", "deep"]
        runs = {run.run_id: run for run in await client.list_runs()}
        only = await client.list_runs(pb.RUN_STATUS_UNREADABLE)
        completed = await client.list_runs(pb.RUN_STATUS_COMPLETED)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.get_run("broken")
        retry = run_request("broken", tools=("echo",), arguments={"text": "x"})
        with pytest.raises(grpc.aio.AioRpcError) as started:
            await client.start_run(retry)
    assert set(runs) == {"r-1", "broken", "deep"}
    assert runs["broken"].status == pb.RUN_STATUS_UNREADABLE
    assert runs["broken"].outcome.code == "unreadable"
    assert "malformed run record" in runs["broken"].outcome.message
    assert [run.run_id for run in only] == ["broken", "deep"]
    assert [run.run_id for run in completed] == ["r-1"]
    for error in (caught.value, started.value):
        assert error.code() == grpc.StatusCode.DATA_LOSS
        assert error_info(error).reason == "RUN_RECORD_UNREADABLE"


async def test_a_retry_with_the_same_request_id_must_be_the_same_request(
    client: SidecarClient,
) -> None:
    request = run_request("same-1", tools=("echo",), arguments={"text": "x"})
    assert (await client.start_run(request)).created
    retry = await client.start_run(request)
    assert (retry.created, retry.run.run_id) == (False, "same-1")
    other = pb.StartRunRequest()
    other.CopyFrom(request)
    other.tasks.tasks[0].description = "Something else entirely."
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(other)
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert error_info(caught.value).reason == "REQUEST_ID_REUSED"
    # The same with a server-assigned run id.
    anonymous = run_request("", tools=("echo",), arguments={"text": "x"})
    first = await client.start_run(anonymous)
    assert (await client.start_run(anonymous)).run.run_id == first.run.run_id
    anonymous.tasks.tasks[0].title = "Another title"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(anonymous)
    assert error_info(caught.value).reason == "REQUEST_ID_REUSED"


async def test_a_request_id_starts_one_run_whatever_run_id_comes_with_it(
    client: SidecarClient,
) -> None:
    # A request_id names one StartRun request: sent again with another run id, it used to
    # start a second run.
    first = run_request("once-1", tools=("echo",), arguments={"text": "x"})
    assert (await client.start_run(first)).created
    anonymous = run_request("", tools=("echo",), arguments={"text": "x"})
    assigned = (await client.start_run(anonymous)).run.run_id
    for earlier, run_id, started in ((first, "once-2", "once-1"), (anonymous, "once-3", assigned)):
        reused = pb.StartRunRequest()
        reused.CopyFrom(earlier)
        reused.run_id = run_id
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.start_run(reused)
        assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
        info = error_info(caught.value)
        assert (info.reason, info.metadata["existing_run_id"]) == ("REQUEST_ID_REUSED", started)
        assert started in caught.value.details()
    assert {run.run_id for run in await client.list_runs()} == {"once-1", assigned}
    # The retries of each request still get its run back.
    assert (await client.start_run(first)).run.run_id == "once-1"
    retry = await client.start_run(anonymous)
    assert (retry.created, retry.run.run_id) == (False, assigned)


async def test_a_call_waiting_for_a_host_says_so_and_its_timeout_shows(tmp_path: Path) -> None:
    request = run_request("wait-1", task_ids=("t1",))
    request.team.host_tools.add(name="lookup", input_schema_json='{"type": "object"}')
    async with (
        Sidecar(config("memory://", host_call_timeout_s=0.3)) as server,
        SidecarClient(server.address, TOKEN) as client,
    ):
        await client.start_run(request)  # no host offers lookup
        events = await asyncio.wait_for(_all(client.watch("wait-1")), 10)
        run = await client.get_run("wait-1")
    kinds = [event.type for event in events]
    assert kinds.index("tool_call_waiting") < kinds.index("tool_call_timed_out")
    waiting = struct_to_dict(events[kinds.index("tool_call_waiting")].data)
    assert waiting["tool_name"] == "lookup"
    assert "no connected host offers" in waiting["reason"]
    assert waiting["timeout_s"] == 0.3
    timed_out = struct_to_dict(events[kinds.index("tool_call_timed_out")].data)
    assert timed_out["delivered"] is False
    assert run.status == pb.RUN_STATUS_COMPLETED
    assert "1 host tool call(s) got no result in time: lookup" in run.outcome.message


async def test_a_cancel_keeps_its_reason_and_ends_the_task_in_progress(
    client: SidecarClient,
) -> None:
    stalled = asyncio.Event()

    async def stall(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        stalled.set()
        await asyncio.Event().wait()
        return "never"

    host = HostTools(client, "stall-host", [lookup_tool(stall)])
    async with asyncio.TaskGroup() as group:
        serving = group.create_task(host.run(reconnect_delay=0.05))
        await asyncio.wait_for(host.registered.wait(), 5)
        await client.start_run(run_request("cancel-1", task_ids=("t1", "t2")))
        await asyncio.wait_for(stalled.wait(), 5)
        live = await client.get_run("cancel-1", full=True)  # its attempt's progress, live
        await client.cancel_run("cancel-1", reason="the user gave up")
        events = await asyncio.wait_for(_all(client.watch("cancel-1")), 5)
        run = await client.get_run("cancel-1", full=True)
        host.stop()
        serving.cancel()
    assert [task.status for task in live.tasks][:1] == [pb.TASK_STATUS_IN_PROGRESS]
    assert live.task_counts.in_progress >= 1
    assert events[-1].run_status.outcome.message == "the user gave up"
    assert (run.status, run.outcome.code) == (pb.RUN_STATUS_CANCELLED, "cancelled")
    assert run.outcome.message == "the user gave up"
    t1, t2 = run.tasks
    assert (t1.status, t1.result) == (pb.TASK_STATUS_FAILED, "cancelled: the user gave up")
    assert t2.status != pb.TASK_STATUS_IN_PROGRESS
    assert run.task_counts.in_progress == 0


async def test_server_info_offers_only_providers_it_can_use(
    client: SidecarClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert list((await client.server_info()).providers) == ["scripted"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert list((await client.server_info()).providers) == ["openai", "scripted"]
    assert usable_providers({"ANTHROPIC_API_KEY": " "}) == ["scripted"]  # blank is missing
    assert usable_providers({"ANTHROPIC_API_KEY": "k"})[-1] == "scripted"


async def _all(events: Any) -> list[pb.RunEvent]:
    return [event async for event in events]
