"""Runs over the wire: start, watch, complete, idempotency, cancel, host tools over Connect."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from sidecar_helpers import ECHO, TOKEN, answer, eventually, lookup_tool, run_request

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient, error_reason
from sidecar.server import ServerConfig, Sidecar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@contextlib.asynccontextmanager
async def hosting(client: SidecarClient, host: HostTools) -> AsyncIterator[HostTools]:
    async with asyncio.TaskGroup() as group:
        task = group.create_task(host.run(reconnect_delay=0.05))
        await asyncio.wait_for(host.registered.wait(), 5)
        try:
            yield host
        finally:
            host.stop()
            task.cancel()


async def events_of(client: SidecarClient, run_id: str, **kwargs: Any) -> list[pb.RunEvent]:
    return [event async for event in client.watch(run_id, **kwargs)]


async def test_start_watch_complete_with_a_host_tool(client: SidecarClient) -> None:
    host = HostTools(client, "py-host", [lookup_tool(answer)])
    async with hosting(client, host):
        started = await client.start_run(run_request("run-1"))
        assert started.created
        events = await asyncio.wait_for(events_of(client, "run-1"), 10)
        run = await client.get_run("run-1", full=True)
    assert run.status == pb.RUN_STATUS_COMPLETED
    assert [task.result for task in run.tasks] == ["done: found q for t1", "done: found q for t2"]
    assert run.task_counts.completed == 2
    seqs = [event.seq for event in events]
    assert seqs == list(range(1, len(seqs) + 1))
    types = [event.type for event in events]
    assert types[0] == types[-1] == "run_status"
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert types.count("tool_call_dispatched") == types.count("tool_called") == 2
    keys = [call.idempotency_key for call in host.ledger.deliveries]
    assert keys == ["run-1:t1:toolu_0_0", "run-1:t2:toolu_0_0"]
    assert not any(call.redelivery for call in host.ledger.deliveries)
    assert host.ledger.committed_keys() == set(keys)


async def test_watch_resumes_after_seq_and_filters_types(client: SidecarClient) -> None:
    request = run_request("run-w", tools=("echo",), arguments={"text": "hi"})
    await client.start_run(request)
    everything = await asyncio.wait_for(events_of(client, "run-w"), 10)
    middle = everything[len(everything) // 2].seq
    tail = await events_of(client, "run-w", after_seq=middle)
    assert [e.seq for e in tail] == [e.seq for e in everything if e.seq > middle]
    call = client.runs.WatchRun(
        pb.WatchRunRequest(run_id="run-w", types=["task_completed"]), metadata=client.metadata
    )
    filtered = [event.type async for event in call if event.type != "heartbeat"]
    assert set(filtered) == {"task_completed", "run_status"}
    run = await client.get_run("run-w", full=True)
    assert run.tasks[0].result == "done: echo:hi"


async def test_start_is_idempotent_on_request_id(client: SidecarClient) -> None:
    request = run_request("run-i", tools=("echo",), arguments={"text": "x"})
    first = await client.start_run(request)
    again = await client.start_run(request)
    assert (first.created, again.created) == (True, False)
    assert (again.run.run_id, again.run.request_id) == ("run-i", request.request_id)
    other = pb.StartRunRequest()
    other.CopyFrom(request)
    other.request_id = "another"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.start_run(other)
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert error_reason(caught.value) == "RUN_ALREADY_EXISTS"
    other.conflict_policy = pb.CONFLICT_POLICY_USE_EXISTING
    attached = await client.start_run(other)
    assert (attached.created, attached.run.request_id) == (False, request.request_id)
    # Without a run id, the request id alone de-duplicates.
    anonymous = run_request("", tools=("echo",), arguments={"text": "x"})
    one = await client.start_run(anonymous)
    two = await client.start_run(anonymous)
    assert (one.created, two.created) == (True, False)
    assert one.run.run_id == two.run.run_id
    assert len(await client.list_runs()) == 2


async def test_invalid_tool_input_goes_back_to_the_model(client: SidecarClient) -> None:
    host = HostTools(client, "py-host", [lookup_tool(answer)])
    async with hosting(client, host):
        request = run_request("run-v", arguments={"query": 42}, task_ids=("t1",))
        await client.start_run(request)
        await asyncio.wait_for(events_of(client, "run-v"), 10)
        run = await client.get_run("run-v", full=True)
    assert run.status == pb.RUN_STATUS_COMPLETED
    assert "$.query: expected string" in run.tasks[0].result
    assert host.ledger.deliveries == []  # the host never saw the invalid call


async def test_host_disconnect_redelivers_with_the_same_key(client: SidecarClient) -> None:
    first_call = asyncio.Event()

    async def stall(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        first_call.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    flaky = HostTools(client, "host-a", [lookup_tool(stall)])
    steady = HostTools(client, "host-a", [lookup_tool(answer)])
    async with hosting(client, flaky):
        await client.start_run(run_request("run-r", task_ids=("t1",)))
        await asyncio.wait_for(first_call.wait(), 5)
    async with hosting(client, steady):
        await asyncio.wait_for(events_of(client, "run-r"), 10)
    run = await client.get_run("run-r", full=True)
    assert run.status == pb.RUN_STATUS_COMPLETED
    [old] = flaky.ledger.deliveries
    [new] = steady.ledger.deliveries
    assert old.idempotency_key == new.idempotency_key == "run-r:t1:toolu_0_0"
    assert (old.redelivery, new.redelivery) == (False, True)
    assert (old.delivery_attempt, new.delivery_attempt) == (1, 2)
    assert old.call_id != new.call_id
    assert steady.ledger.committed_keys() == {"run-r:t1:toolu_0_0"}


async def test_late_result_for_an_old_delivery_wins_once(client: SidecarClient) -> None:
    release = asyncio.Event()

    async def slow(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        await release.wait()
        return "late"

    host = HostTools(client, "host-b", [lookup_tool(slow)])
    async with hosting(client, host):
        await client.start_run(run_request("run-l", task_ids=("t1",)))
        await eventually(lambda: bool(host.ledger.deliveries))
        call = host.ledger.deliveries[0]
        result = pb.ToolResult(
            call_id=call.call_id,
            tool_call_id=call.tool_call_id,
            success=pb.ToolSuccess(output_text="via unary"),
        )
        unary = await client.tools.CompleteToolCall(
            pb.CompleteToolCallRequest(result=result), metadata=client.metadata
        )
        assert unary.ack.status == pb.ResultAck.STATUS_COMMITTED
        release.set()
        await asyncio.wait_for(events_of(client, "run-l"), 10)
        await eventually(lambda: call.call_id in host.ledger.acks)
    assert host.ledger.acks[call.call_id] == pb.ResultAck.STATUS_DUPLICATE
    run = await client.get_run("run-l", full=True)
    assert run.tasks[0].result == "done: via unary"
    unknown = pb.ToolResult(call_id="nope", success=pb.ToolSuccess(output_text="x"))
    response = await client.tools.CompleteToolCall(
        pb.CompleteToolCallRequest(result=unknown), metadata=client.metadata
    )
    assert response.ack.status == pb.ResultAck.STATUS_UNKNOWN_CALL


async def test_cancel_stops_a_run_waiting_for_a_host(client: SidecarClient) -> None:
    request = run_request("run-c", task_ids=("t1",))
    request.team.host_tools.add(name="lookup", input_schema_json='{"type": "object"}')
    await client.start_run(request)  # no host is connected: the call waits
    for _ in range(200):
        if (await client.get_run("run-c")).last_event_seq >= 4:
            break
        await asyncio.sleep(0.01)
    cancelled = await client.cancel_run("run-c")
    assert cancelled.run_id == "run-c"
    events = await asyncio.wait_for(events_of(client, "run-c"), 5)
    assert events[-1].run_status.status == pb.RUN_STATUS_CANCELLED
    assert (await client.cancel_run("run-c")).status == pb.RUN_STATUS_CANCELLED  # no-op
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.restore_run("run-c")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "RUN_ALREADY_TERMINAL"


async def test_a_restarted_sidecar_adopts_the_run_from_the_checkpoint(tmp_path: Path) -> None:
    # The sidecar stops while t2's call is out, so the run stays unsettled in its store; a new
    # sidecar in this process boots on that store (a new owner) and adopts it from the
    # checkpoint: t1, completed before, is not run again; t2's call is redelivered.
    config = ServerConfig(
        token=TOKEN,
        listen="127.0.0.1:0",
        store_uri=f"file://{tmp_path / 'state.json'}",
        python_tools={"echo": ECHO},
        heartbeat_s=0.5,
        grace_s=0.1,
        owner_id="owner-x",
        lease_ttl_s=1.0,
    )
    stalled = asyncio.Event()
    calls: list[str] = []

    async def stall_t2(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        calls.append(call.idempotency_key)
        if call.task_id == "t2" and not stalled.is_set():
            stalled.set()
            await asyncio.Event().wait()
        return f"ok {call.task_id}"

    async with (
        Sidecar(config) as first,
        SidecarClient(first.address, TOKEN) as client,
        hosting(client, HostTools(client, "host-1", [lookup_tool(stall_t2)])),
    ):
        await client.start_run(run_request("run-x"))
        await asyncio.wait_for(stalled.wait(), 5)
    assert calls == ["run-x:t1:toolu_0_0", "run-x:t2:toolu_0_0"]

    # The first start released the lease when it stopped: the second (a new owner) adopts
    # the run on its own once the record has been still for a lease TTL.
    async with (
        Sidecar(config) as second,
        SidecarClient(second.address, TOKEN) as client,
        hosting(client, HostTools(client, "host-2", [lookup_tool(stall_t2)])),
    ):
        events = await asyncio.wait_for(events_of(client, "run-x"), 10)
        run = await client.get_run("run-x", full=True)
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert run.status == pb.RUN_STATUS_COMPLETED
    assert run.attempt == 2
    assert [task.result for task in run.tasks] == ["done: ok t1", "done: ok t2"]
    # Only t2's call ran again, under the same idempotency key: t1 came from the checkpoint.
    assert calls == ["run-x:t1:toolu_0_0", "run-x:t2:toolu_0_0", "run-x:t2:toolu_0_0"]


async def test_server_info_and_errors_for_unknown_runs(client: SidecarClient) -> None:
    info = await client.server_info()
    assert "oma.v1" in info.api_versions
    assert {"tool_host", "watch_resume", "restore"} <= set(info.capabilities)
    assert "scripted" in info.providers
    assert info.python_tools == ["echo"]
    for call in (client.get_run("missing"), client.restore_run("missing")):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert error_reason(caught.value) == "RUN_NOT_FOUND"


async def test_token_is_required_for_streams_too(sidecar: Sidecar) -> None:
    async with SidecarClient(sidecar.address, TOKEN + "-wrong") as intruder:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await events_of(intruder, "run-1")
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        host = HostTools(intruder, "bad", [lookup_tool(answer)])
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await host._session()
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_goal_mode_with_a_scripted_coordinator(client: SidecarClient) -> None:
    plan = '[{"title": "Look", "description": "Look it up.", "assignee": "worker"}]'
    coordinator = pb.AgentSpec(
        name="lead",
        provider="scripted",
        scripted=pb.ScriptedModel(
            turns=[
                pb.ScriptedTurn(text=plan, when="Break the goal"),
                pb.ScriptedTurn(text="synthesis done", when="Original Goal"),
            ]
        ),
    )
    request = run_request("goal-1", tools=("echo",), arguments={"text": "g"})
    request.goal.goal = "Find things out."
    request.goal.coordinator.CopyFrom(coordinator)
    await client.start_run(request)
    events = await asyncio.wait_for(events_of(client, "goal-1"), 10)
    run = await client.get_run("goal-1", full=True)
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert run.mode == pb.RUN_MODE_TEAM
    assert [task.title for task in run.tasks] == ["Look"]
    assert run.tasks[0].result == "done: echo:g"
    assert run.result.synthesis == "synthesis done"
