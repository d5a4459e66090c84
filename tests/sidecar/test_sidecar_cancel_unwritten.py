"""GetRun of a cancelled run whose attempt died before writing its end shows its real tasks.

``CancelRun`` of a run executing here writes the run record cancelled, then the attempt writes
its end (tasks, outcome) into the registry. A sidecar killed in between left the registry's
tasks as the attempt's claim saw them: every task showed ``PENDING``, the completed ones too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sidecar_helpers import ECHO, TOKEN, lookup_tool, run_request, tool_turns

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient
from sidecar.record import RunRecordV1, WireStatus
from sidecar.server import ServerConfig, Sidecar


@pytest.fixture
async def sidecar() -> AsyncIterator[tuple[Sidecar, SidecarClient]]:
    config = ServerConfig(
        token=TOKEN, listen="127.0.0.1:0", store_uri="memory://",
        python_tools={"echo": ECHO}, heartbeat_s=0.5, grace_s=0.1,
    )  # fmt: skip
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as client:
        yield server, client


async def test_tasks_of_a_cancel_whose_end_was_never_written(
    sidecar: tuple[Sidecar, SidecarClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, client = sidecar
    registry = server.registry
    assert registry is not None
    announce = registry.announce

    async def dies_before_its_end(run_id: str, status: WireStatus, *a: Any, **kw: Any) -> Any:
        if status == pb.RUN_STATUS_CANCELLED:  # the process is gone before this write
            return await registry.get(run_id)
        return await announce(run_id, status, *a, **kw)

    monkeypatch.setattr(registry, "announce", dies_before_its_end)
    stuck = asyncio.Event()

    async def never(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        stuck.set()
        await asyncio.Event().wait()
        return "never"

    request = run_request("c-1", tools=("echo",), arguments={"text": "x"}, task_ids=("t1",))
    waiter = pb.AgentSpec(
        name="waiter", provider="scripted", tools=["lookup"],
        scripted=tool_turns("lookup", {"query": "q"}, "unused"),
    )  # fmt: skip
    request.team.agents.append(waiter)
    t2 = pb.TaskSpec(id="t2", title="Task t2", description="Do t2.", assignee="waiter")
    t2.depends_on.append("t1")
    request.tasks.tasks.append(t2)
    host = HostTools(client, "h", [lookup_tool(never)])
    async with asyncio.TaskGroup() as group:
        hosting = group.create_task(host.run(reconnect_delay=0.05))
        await asyncio.wait_for(host.registered.wait(), 10)
        await client.start_run(request)
        await asyncio.wait_for(stuck.wait(), 10)
        await client.cancel_run("c-1", "stop")
        host.stop()
        hosting.cancel()
    stored: RunRecordV1 = await registry.get("c-1")
    assert not stored.outcome.code  # the attempt's end was never written
    run = await client.get_run("c-1", full=True)
    assert run.status == pb.RUN_STATUS_CANCELLED
    assert {t.id: (pb.TaskStatus.Name(t.status), t.result) for t in run.tasks} == {
        "t1": ("TASK_STATUS_COMPLETED", "done: echo:x"),
        "t2": ("TASK_STATUS_FAILED", "cancelled: stop"),
    }
