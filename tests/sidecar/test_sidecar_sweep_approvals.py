"""DecideApproval and ListApprovals guards no other test held (helper's mutation sweep).

A request hash is exactly 64 hex digits (a longer one is refused, not looked up); one decision
of two pending restores nothing (the run waits for every approval); an edited input that is no
JSON object is refused naming its field; ListApprovals pages neither skip nor repeat an approval,
and a malformed run id is INVALID_ARGUMENT naming ``run_id``.
"""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from test_sidecar_approvals import suspended_run
from test_sidecar_auth import error_info

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import SidecarClient

Decision = pb.DecideApprovalRequest


def gated_twice(run_id: str) -> pb.StartRunRequest:
    """Two independent tasks of two agents, each calling the gated ``echo`` once."""

    def agent(name: str) -> pb.AgentSpec:
        call = pb.ScriptedToolCall(name="echo", input_json=json.dumps({"text": name}))
        turns = [pb.ScriptedTurn(tool_calls=[call]), pb.ScriptedTurn(text="{{last_tool_result}}")]
        return pb.AgentSpec(
            name=name, provider="scripted", tools=["echo"], scripted=pb.ScriptedModel(turns=turns)
        )

    request = pb.StartRunRequest(
        run_id=run_id,
        team=pb.TeamSpec(name="t", agents=[agent("a"), agent("b")]),
        tasks=pb.TasksMode(
            tasks=[
                pb.TaskSpec(id="t1", title="T1", description="one", assignee="a"),
                pb.TaskSpec(id="t2", title="T2", description="two", assignee="b"),
            ]
        ),
    )
    request.approval_gates.tool_calls.append("echo")
    return request


async def test_a_request_hash_longer_than_a_sha256_is_refused(client: SidecarClient) -> None:
    await asyncio.wait_for(suspended_run(client, "long-hash"), 10)
    [approval] = await client.list_approvals("long-hash")
    request = Decision(
        id=approval.id,
        request_hash=approval.request_hash + "0",
        decision=Decision.DECISION_APPROVE,
        reviewer=pb.Reviewer(id="ann"),
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.approvals.DecideApproval(request, metadata=client.metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == "request_hash"
    [still] = await client.list_approvals("long-hash")
    assert still.state == pb.APPROVAL_STATE_PENDING


async def test_one_decision_of_two_pending_restores_nothing(client: SidecarClient) -> None:
    await client.start_run(gated_twice("two-gates"))
    events = [event async for event in client.watch("two-gates")]
    assert events[-1].run_status.status == pb.RUN_STATUS_SUSPENDED
    first, second = await client.list_approvals("two-gates")
    decided = await client.decide_approval(first, approve=True, reviewer="ann")
    assert decided.recorded
    assert not decided.HasField("run")  # one approval still pending: nothing restored
    run = await client.get_run("two-gates")
    assert (run.status, run.attempt) == (pb.RUN_STATUS_SUSPENDED, 1)
    assert second.id in run.pending_approval_ids
    done = await client.decide_approval(second, approve=True, reviewer="ann")
    assert done.run.attempt == 2  # the last decision restores it


async def all_pages(client: SidecarClient, size: int) -> list[str]:
    ids: list[str] = []
    token = ""
    for _ in range(10):
        request = pb.ListApprovalsRequest(page_size=size, page_token=token)
        page = await client.approvals.ListApprovals(request, metadata=client.metadata)
        ids.extend(approval.id for approval in page.approvals)
        token = page.next_page_token
        if not token:
            return ids
    raise AssertionError("pages never ended")


@pytest.mark.parametrize("size", [1, 2, 3])
async def test_approval_pages_neither_skip_nor_repeat(client: SidecarClient, size: int) -> None:
    for index in range(3):
        await asyncio.wait_for(suspended_run(client, f"paged-{index}"), 10)
    every = [approval.id for approval in await client.list_approvals()]
    assert len(set(every)) == 3
    assert await all_pages(client, size) == every


@pytest.mark.parametrize("text", ["[1]", '"text"', "3"])
async def test_an_edited_input_that_is_no_object_is_refused(
    client: SidecarClient, text: str
) -> None:
    await asyncio.wait_for(suspended_run(client, "edit-kind"), 10)
    [approval] = await client.list_approvals("edit-kind")
    request = Decision(
        id=approval.id,
        request_hash=approval.request_hash,
        decision=Decision.DECISION_APPROVE,
        reviewer=pb.Reviewer(id="ann"),
        edited_input_json=text,
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.approvals.DecideApproval(request, metadata=client.metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == "edited_input_json"
    [still] = await client.list_approvals("edit-kind")
    assert still.state == pb.APPROVAL_STATE_PENDING


async def test_listing_the_approvals_of_a_malformed_run_id_names_the_field(
    client: SidecarClient,
) -> None:
    request = pb.ListApprovalsRequest(run_id="../other")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.approvals.ListApprovals(request, metadata=client.metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == "run_id"


@pytest.mark.parametrize("token", ["²", "٣", "1²", "-1", "1e3", "1234567890"])
async def test_a_page_token_that_is_no_ascii_offset_is_invalid_on_both_lists(
    client: SidecarClient, token: str
) -> None:
    # ``str.isdigit`` takes "²" and "٣", which ``int`` refuses: ListApprovals answered
    # INTERNAL ("internal error: ValueError") where ListRuns already said INVALID_ARGUMENT.
    calls = (
        client.approvals.ListApprovals(
            pb.ListApprovalsRequest(page_token=token), metadata=client.metadata
        ),
        client.runs.ListRuns(pb.ListRunsRequest(page_token=token), metadata=client.metadata),
    )
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(caught.value).metadata["field"] == "page_token"
