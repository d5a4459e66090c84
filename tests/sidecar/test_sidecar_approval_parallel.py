"""An approval decided while a parallel task still runs resumes the run once it suspends.

Task t1's tool call waits for an approval while task t2 runs on. ``DecideApproval`` lands while
the run is still running: it is recorded and resumes nothing (the run is not suspended yet).
When t2 has drained, the run suspends on t1's approval, which is decided already: nobody would
decide again, and the run stayed ``SUSPENDED`` for good (its pending list naming an approval
``ListApprovals`` no longer shows). The policy ``WHEN_ALL_DECIDED`` resumes it then; ``NEVER``
leaves it to the caller's ``RestoreRun``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sidecar_helpers import ECHO, LOOKUP_SCHEMA, TOKEN
from test_sidecar_approvals import waiting_run

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTool, HostTools, SidecarClient
from sidecar.server import ServerConfig, Sidecar


def call(tool: str, arguments: dict[str, Any]) -> pb.ScriptedTurn:
    return pb.ScriptedTurn(
        tool_calls=[pb.ScriptedToolCall(name=tool, input_json=json.dumps(arguments))]
    )


def gated_and_slow(run_id: str) -> pb.StartRunRequest:
    """t1 calls the gated ``echo`` once; t2 calls the host's ``lookup`` three times."""
    gated = pb.AgentSpec(name="g", provider="scripted", tools=["echo"], scripted=pb.ScriptedModel(
        turns=[call("echo", {"text": "hi"}), pb.ScriptedTurn(text="gated: {{last_tool_result}}")]
    ))  # fmt: skip
    slow = pb.AgentSpec(name="s", provider="scripted", tools=["lookup"], scripted=pb.ScriptedModel(
        turns=[*(call("lookup", {"query": f"q{i}"}) for i in range(3)),
               pb.ScriptedTurn(text="slow: {{last_tool_result}}")]
    ))  # fmt: skip
    request = pb.StartRunRequest(
        run_id=run_id, request_id=f"{run_id}-request",
        team=pb.TeamSpec(name="t", agents=[gated, slow]),
        tasks=pb.TasksMode(tasks=[
            pb.TaskSpec(id="t1", title="T1", description="gated", assignee="g"),
            pb.TaskSpec(id="t2", title="T2", description="slow", assignee="s"),
        ]),
    )  # fmt: skip
    request.approval_gates.tool_calls.append("echo")
    return request


@pytest.fixture
async def client() -> AsyncIterator[tuple[SidecarClient, asyncio.Event]]:
    """A sidecar with ``echo`` and a host whose ``lookup`` waits until the test lets it go."""
    go = asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        await go.wait()
        return f"found {arguments['query']}"

    config = ServerConfig(
        token=TOKEN, listen="127.0.0.1:0", store_uri="memory://",
        python_tools={"echo": ECHO}, heartbeat_s=0.5, grace_s=0.1,
    )  # fmt: skip
    async with Sidecar(config) as server, SidecarClient(server.address, TOKEN) as connected:
        tool = HostTool(name="lookup", description="x", input_schema=LOOKUP_SCHEMA, handler=lookup)
        host = HostTools(connected, "h", [tool])
        serving = asyncio.create_task(host.run())
        await asyncio.wait_for(host.registered.wait(), 10)
        try:
            yield connected, go
        finally:
            host.stop()
            serving.cancel()


async def decide(client: SidecarClient, run_id: str, resume: int) -> pb.DecideApprovalResponse:
    """Approve the run's one approval (pending or approved already) as ``ann``, with ``resume``."""
    states = [pb.APPROVAL_STATE_PENDING, pb.APPROVAL_STATE_APPROVED]
    listed = await client.approvals.ListApprovals(
        pb.ListApprovalsRequest(run_id=run_id, states=states), metadata=client.metadata
    )
    [approval] = listed.approvals
    decided: pb.DecideApprovalResponse = await client.approvals.DecideApproval(
        pb.DecideApprovalRequest(
            id=approval.id, request_hash=approval.request_hash,
            decision=pb.DecideApprovalRequest.DECISION_APPROVE,
            reviewer=pb.Reviewer(id="ann"), resume=resume,  # type: ignore[arg-type]
        ),
        metadata=client.metadata,
    )  # fmt: skip
    return decided


async def decided_while_running(
    client: SidecarClient, go: asyncio.Event, run_id: str, resume: int, patience: float = 20
) -> list[pb.RunEvent]:
    """Decide t1's approval while t2 runs, let t2 finish; the events until the run suspends
    (or, resumed, ends)."""
    await client.start_run(gated_and_slow(run_id))
    run = await waiting_run(client, run_id)
    assert run.status == pb.RUN_STATUS_RUNNING  # t2 still runs
    decided = await decide(client, run_id, resume)
    assert decided.recorded
    assert not decided.HasField("run")  # nothing to resume yet
    go.set()  # t2 finishes; the run then suspends on t1's (decided) approval
    async with asyncio.timeout(patience):  # resumed, the watch follows it to its end
        return [event async for event in client.watch(run_id, follow_suspended=True)]


async def test_the_run_resumes_once_it_suspends_on_decided_approvals(
    client: tuple[SidecarClient, asyncio.Event],
) -> None:
    connected, go = client
    policy = pb.DecideApprovalRequest.RESUME_POLICY_WHEN_ALL_DECIDED
    await decided_while_running(connected, go, "par-1", policy)
    run = await connected.get_run("par-1", full=True)
    assert pb.RunStatus.Name(run.status) == "RUN_STATUS_COMPLETED"
    assert {task.id: task.result for task in run.tasks} == {
        "t1": "gated: echo:hi", "t2": "slow: found q2",
    }  # fmt: skip


async def test_a_decision_that_never_resumes_leaves_it_to_restore_run(
    client: tuple[SidecarClient, asyncio.Event],
) -> None:
    connected, go = client
    policy = pb.DecideApprovalRequest.RESUME_POLICY_NEVER
    with pytest.raises(TimeoutError):  # it stays suspended: the watch never sees an end
        await decided_while_running(connected, go, "par-2", policy, patience=3)
    assert (await connected.get_run("par-2")).status == pb.RUN_STATUS_SUSPENDED
    await connected.restore_run("par-2")
    events = [event async for event in connected.watch("par-2", follow_suspended=True)]
    assert events
    assert (await connected.get_run("par-2")).status == pb.RUN_STATUS_COMPLETED
