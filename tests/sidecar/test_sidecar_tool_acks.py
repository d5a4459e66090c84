"""A host's result is acknowledged COMMITTED by the save outcome, never by the order of events."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from sidecar_helpers import answer, eventually, lookup_tool, run_request

from oma_actors import ToolContext
from oma_actors.events import CheckpointSaved, CheckpointSaveFailed, ToolCalled
from oma_actors.stores import InMemoryStore
from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.attempt import Progress, observer
from sidecar.client import HostTools, SidecarClient
from sidecar.record import RunRecordV1
from sidecar.runs import RunRegistry
from sidecar.tool_host import ToolHost

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sidecar.host_calls import HostSession

Ack = pb.ResultAck.Status
LOOKUP = pb.ToolDefinition(name="lookup", input_schema_json='{"type": "object"}')


@pytest.fixture
async def group() -> AsyncIterator[asyncio.TaskGroup]:
    async with asyncio.TaskGroup() as tasks:
        yield tasks


async def answered_call(
    host: ToolHost, group: asyncio.TaskGroup, *, task_id: str = "t1", durable: bool = True
) -> tuple[HostSession, int | None]:
    """Deliver one ``lookup`` call of run r1 to a new session and answer it there."""
    session, _ = host.open_session(pb.Register(host_id="h", tools=[LOOKUP]))
    ctx = ToolContext(run_id="r1", task_id=task_id, tool_call_id="toolu_1", agent_name="a")
    group.create_task(host.call(ctx, "lookup", "{}", run_attempt=1, limit_s=5, durable=durable))
    delivered = await asyncio.wait_for(session.outbox.get(), 5)
    result = pb.ToolResult(call_id=delivered.call.call_id, success=pb.ToolSuccess(output_text="x"))
    return session, host.submit(result, session=session)


def acks(session: HostSession) -> list[int]:
    found: list[int] = []
    while not session.outbox.empty():
        message = session.outbox.get_nowait()
        if message.WhichOneof("msg") == "result_ack":
            found.append(message.result_ack.status)
    return found


async def run_registry(group: asyncio.TaskGroup) -> RunRegistry:
    registry = RunRegistry(InMemoryStore(), spawn=group.create_task)
    await registry.create(run_record())
    return registry


def run_record() -> RunRecordV1:
    request = run_request("r1")
    return RunRecordV1(run_id="r1", request_id=request.request_id, request=request)


async def test_only_a_save_naming_the_call_commits_it(group: asyncio.TaskGroup) -> None:
    host = ToolHost()
    on_progress = observer(await run_registry(group), host, "r1", Progress(run_record()))
    session, status = await answered_call(host, group)
    assert status is None  # waits for a durable save
    # The call returned and saves happened, but none contained this call's commit record.
    on_progress(
        ToolCalled(
            run_id="r1", task_id="t1", agent="a", tool_name="lookup",
            tool_call_id="toolu_1", is_error=False,
        )
    )  # fmt: skip
    on_progress(CheckpointSaved(run_id="r1", revision=1, boundary="tool_commit", task_id="t1"))
    on_progress(CheckpointSaveFailed(run_id="r1", error="disk full", boundary="tool_commit"))
    other_task = CheckpointSaved(
        run_id="r1", revision=2, boundary="tool_commit", task_id="t2", committed=("toolu_1",)
    )
    on_progress(other_task)
    assert acks(session) == []
    # A later durable save of the call's own task that contains its commit record.
    on_progress(
        CheckpointSaved(
            run_id="r1", revision=3, boundary="tool_results", task_id="t1",
            committed=("toolu_0", "toolu_1"),
        )
    )  # fmt: skip
    assert acks(session) == [Ack.STATUS_COMMITTED]
    on_progress(
        CheckpointSaved(
            run_id="r1", revision=4, boundary="terminal", task_id="t1", committed=("toolu_1",)
        )
    )
    assert acks(session) == []  # acknowledged once


async def test_a_result_no_save_contained_is_not_durable_when_the_run_ends(
    group: asyncio.TaskGroup,
) -> None:
    host = ToolHost()
    session, status = await answered_call(host, group)
    assert status is None
    host.forget_run("r1")
    assert acks(session) == [Ack.STATUS_NOT_DURABLE]
    host.on_saved("r1", "t1", ("toolu_1",))
    assert acks(session) == []


async def test_a_run_without_checkpoints_answers_not_durable_at_once(
    group: asyncio.TaskGroup,
) -> None:
    host = ToolHost()
    session, status = await answered_call(host, group, durable=False)
    assert status == Ack.STATUS_NOT_DURABLE
    host.on_saved("r1", "t1", ("toolu_1",))
    host.forget_run("r1")
    assert acks(session) == []  # nothing else is ever sent for it


async def test_over_the_wire_a_run_without_checkpoints_acks_not_durable(
    client: SidecarClient,
) -> None:
    host = HostTools(client, "py-host", [lookup_tool(answer)])
    request = run_request("no-cp", task_ids=("t1",))
    request.checkpoint.disabled = True
    async with asyncio.TaskGroup() as tasks:
        serving = tasks.create_task(host.run(reconnect_delay=0.05))
        await asyncio.wait_for(host.registered.wait(), 5)
        await client.start_run(request)
        events = [event async for event in client.watch("no-cp")]
        await eventually(lambda: bool(host.ledger.acks))
        host.stop()
        serving.cancel()
    assert events[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    assert list(host.ledger.acks.values()) == [Ack.STATUS_NOT_DURABLE]
