"""GetRunTimeline: a run's timeline from its checkpoint, as text, HTML and JSON."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import answer, lookup_tool, run_request

from oma_actors.keyspace import checkpoint_key
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar._pb.oma.v1 import sidecar_pb2_grpc as pb_grpc
from sidecar.client import HostTools, SidecarClient, error_reason

if TYPE_CHECKING:
    from sidecar.server import Sidecar

TASKS = ("t1", "t2", "t3")


async def timeline(client: SidecarClient, run_id: str, width: int = 0) -> Any:
    request = pb.GetRunTimelineRequest(run_id=run_id, width=width)
    return await client.runs.GetRunTimeline(request, metadata=client.metadata)


async def finish(client: SidecarClient, request: pb.StartRunRequest) -> None:
    """Start ``request`` and wait until its run ends."""
    await client.start_run(request)
    async with asyncio.timeout(10):
        async for _ in client.watch(request.run_id):
            pass


async def completed_run(client: SidecarClient, run_id: str) -> None:
    """A run of three tasks whose agent calls the host tool ``lookup`` once in each."""
    host = HostTools(client, "py-host", [lookup_tool(answer)])
    async with asyncio.TaskGroup() as group:
        task = group.create_task(host.run(reconnect_delay=0.05))
        await asyncio.wait_for(host.registered.wait(), 5)
        try:
            await finish(client, run_request(run_id, task_ids=TASKS))
        finally:
            host.stop()
            task.cancel()
    run = await client.get_run(run_id)
    assert run.status == pb.RUN_STATUS_COMPLETED


async def test_a_completed_run_has_every_task_and_executed_call(client: SidecarClient) -> None:
    await completed_run(client, "run-tl")
    response = await timeline(client, "run-tl")
    for task_id in TASKS:
        assert f"Task {task_id}" in response.text
    assert "\x1b[" not in response.text  # plain text: no colour codes for a host to strip
    data = json.loads(response.timeline_json)
    assert (data["run_id"], data["status"], data["from_journal"]) == ("run-tl", "completed", False)
    assert [lane["task_id"] for lane in data["lanes"]] == list(TASKS)
    calls = [
        (lane["task_id"], call["tool_name"], call["call_id"], call["mark"])
        for lane in data["lanes"]
        for turn in lane["turns"]
        for call in turn["calls"]
    ]
    assert calls == [(task_id, "lookup", "toolu_0_0", "executed") for task_id in TASKS]
    results = [turn["calls"][0]["result"] for lane in data["lanes"] for turn in lane["turns"][:1]]
    assert results == [f"found q for {task_id}" for task_id in TASKS]
    assert response.html.startswith("<!DOCTYPE html>")
    assert 'data-run="run-tl"' in response.html
    assert all(f"Task {task_id}" in response.html for task_id in TASKS)


async def test_the_text_wraps_at_the_width(client: SidecarClient) -> None:
    await completed_run(client, "run-w")
    narrow = (await timeline(client, "run-w", width=60)).text
    assert max(len(line) for line in narrow.splitlines()) <= 60
    default = (await timeline(client, "run-w")).text
    assert max(len(line) for line in default.splitlines()) <= 80
    for width in (59, 401, -1):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await timeline(client, "run-w", width=width)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_an_unknown_run_is_not_found(client: SidecarClient) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await timeline(client, "no-such-run")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_reason(caught.value) == "RUN_NOT_FOUND"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await timeline(client, "../bad id")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_run_without_a_checkpoint_is_a_failed_precondition(
    sidecar: Sidecar, client: SidecarClient
) -> None:
    request = run_request("run-off", tools=("echo",), arguments={"text": "x"})
    request.checkpoint.disabled = True
    await finish(client, request)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await timeline(client, "run-off")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "NO_CHECKPOINT"
    # A run that checkpoints but whose checkpoint is not (or no longer) there.
    await finish(client, run_request("run-gone", tools=("echo",), arguments={"text": "y"}))
    assert (await timeline(client, "run-gone")).text
    await sidecar.state.delete(checkpoint_key("run-gone"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await timeline(client, "run-gone")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "NO_CHECKPOINT"


async def test_the_timeline_needs_the_token(sidecar: Sidecar) -> None:
    async with grpc.aio.insecure_channel(sidecar.address) as channel:
        runs = pb_grpc.RunServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await runs.GetRunTimeline(pb.GetRunTimelineRequest(run_id="run-tl"))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_suspended_run_cancelled_shows_cancelled(client: SidecarClient) -> None:
    # CancelRun of a suspended run: no attempt ran, so no run/end tells it; the run record
    # does. The timeline read the snapshot alone and said "suspended".
    request = run_request(
        "run-tl-cancel", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",)
    )
    request.approval_gates.tool_calls.append("echo")
    await finish(client, request)
    assert (await client.get_run("run-tl-cancel")).status == pb.RUN_STATUS_SUSPENDED
    await client.cancel_run("run-tl-cancel", reason="not today")
    data = json.loads((await timeline(client, "run-tl-cancel")).timeline_json)
    assert data["status"] == "cancelled"
