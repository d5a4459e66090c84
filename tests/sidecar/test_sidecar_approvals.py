"""Approvals over the wire: a run suspends at a gate; list, get and decide on the reviewed hash."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import grpc
import pytest
from sidecar_helpers import lookup_tool, run_request, tool_turns
from test_sidecar_auth import error_info

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.client import HostTools, SidecarClient, error_reason
from sidecar.record import RunRecordV1
from sidecar.server import Sidecar

Decision = pb.DecideApprovalRequest


async def suspended_run(client: SidecarClient, run_id: str) -> list[pb.RunEvent]:
    request = run_request(run_id, tools=("echo",), arguments={"text": "hi"}, task_ids=("t1",))
    request.approval_gates.tool_calls.append("echo")
    await client.start_run(request)
    return [event async for event in client.watch(run_id)]


async def test_suspend_list_get_decide_and_resume(client: SidecarClient) -> None:
    events = await asyncio.wait_for(suspended_run(client, "apr-1"), 10)
    assert events[-1].run_status.status == pb.RUN_STATUS_SUSPENDED
    run = await client.get_run("apr-1")
    assert run.status == pb.RUN_STATUS_SUSPENDED
    [approval] = await client.list_approvals("apr-1")
    assert list(run.pending_approval_ids) == [approval.id]
    assert hashlib.sha256(approval.canonical_json.encode()).hexdigest() == approval.request_hash
    assert approval.scope == pb.APPROVAL_SCOPE_TOOL_CALL
    assert approval.state == pb.APPROVAL_STATE_PENDING
    [pending_event] = [e for e in events if e.type == "approval_pending"]
    assert pending_event.approval_pending == approval
    fetched = await client.approvals.GetApproval(
        pb.GetApprovalRequest(id=approval.id), metadata=client.metadata
    )
    assert fetched == approval

    stale = pb.Approval()
    stale.CopyFrom(approval)
    stale.request_hash = "0" * 64
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.decide_approval(stale, approve=True, reviewer="ann")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "APPROVAL_STALE_DECISION"

    decided = await client.decide_approval(approval, approve=True, reviewer="ann")
    assert decided.recorded
    assert decided.approval.state == pb.APPROVAL_STATE_APPROVED
    assert decided.approval.decision.reviewer.id == "ann"
    assert decided.run.attempt == 2  # every decision made: the run was restored
    last = max(event.seq for event in events)
    resumed = [event async for event in client.watch("apr-1", after_seq=last)]
    assert resumed[-1].run_status.status == pb.RUN_STATUS_COMPLETED
    done = await client.get_run("apr-1", full=True)
    assert done.tasks[0].result == "done: echo:hi"

    again = await client.decide_approval(approval, approve=True, reviewer="ann")
    assert not again.recorded
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.decide_approval(approval, approve=False, reviewer="bob")
    assert error_reason(caught.value) == "APPROVAL_CONFLICT"
    approved = await client.approvals.ListApprovals(
        pb.ListApprovalsRequest(states=[pb.APPROVAL_STATE_APPROVED]), metadata=client.metadata
    )
    assert [a.id for a in approved.approvals] == [approval.id]
    assert await client.list_approvals() == []  # nothing pending anywhere


@pytest.mark.parametrize(
    ("decide", "state", "edit"),
    [
        (Decision.DECISION_APPROVE, pb.APPROVAL_STATE_APPROVED, ""),
        (Decision.DECISION_REJECT, pb.APPROVAL_STATE_REJECTED, ""),
        (Decision.DECISION_APPROVE, pb.APPROVAL_STATE_APPROVED, '{"text": "edited"}'),
    ],
    ids=["approved", "rejected", "approved-with-edits"],
)
async def test_the_finished_runs_result_carries_its_approval_decisions(
    client: SidecarClient, decide: int, state: int, edit: str
) -> None:
    events = await asyncio.wait_for(suspended_run(client, "apr-dec"), 10)
    [approval] = await client.list_approvals("apr-dec")
    suspended = await client.get_run("apr-dec", full=True)
    assert list(suspended.result.approval_decisions) == []  # nothing decided yet
    decided = await client.approvals.DecideApproval(
        Decision(
            id=approval.id,
            request_hash=approval.request_hash,
            decision=decide,  # type: ignore[arg-type]
            reviewer=pb.Reviewer(id="ann", display_name="Ann"),
            edited_input_json=edit,
        ),
        metadata=client.metadata,
    )
    assert decided.recorded
    last = max(event.seq for event in events)
    resumed = [event async for event in client.watch("apr-dec", after_seq=last)]
    assert resumed[-1].run_status.status in (pb.RUN_STATUS_COMPLETED, pb.RUN_STATUS_FAILED)
    done = await client.get_run("apr-dec", full=True)
    [decision] = done.result.approval_decisions
    assert decision == decided.approval.decision  # as GetApproval shows it
    assert (decision.request_id, decision.run_id) == (approval.id, "apr-dec")
    assert (decision.scope, decision.request_hash) == (approval.scope, approval.request_hash)
    assert decision.decision == state
    assert (decision.reviewer.id, decision.reviewer.display_name) == ("ann", "Ann")
    assert decision.decided_at.seconds > 0
    assert json.loads(decision.edited_input_json or "null") == json.loads(edit or "null")
    listed = await client.runs.GetRun(pb.GetRunRequest(run_id="apr-dec"), metadata=client.metadata)
    assert not listed.HasField("result")  # the summary view leaves the result out


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: setattr(r, "request_hash", ""), "request_hash"),
        (lambda r: setattr(r, "request_hash", "ABC"), "request_hash"),
        (lambda r: setattr(r, "decision", Decision.DECISION_UNSPECIFIED), "decision"),
        (lambda r: r.reviewer.ClearField("id"), "reviewer.id"),
        (lambda r: setattr(r, "id", ""), "id"),
    ],
)
async def test_decide_validates_its_request(client: SidecarClient, change, field: str) -> None:  # type: ignore[no-untyped-def]
    request = Decision(
        id="apr_" + "0" * 32,
        request_hash="0" * 64,
        decision=Decision.DECISION_APPROVE,
        reviewer=pb.Reviewer(id="ann"),
    )
    change(request)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.approvals.DecideApproval(request, metadata=client.metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == field


async def test_unknown_approvals_are_not_found(client: SidecarClient) -> None:
    request = Decision(
        id="apr_" + "1" * 32,
        request_hash="0" * 64,
        decision=Decision.DECISION_REJECT,
        reviewer=pb.Reviewer(id="ann"),
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.approvals.DecideApproval(request, metadata=client.metadata)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_reason(caught.value) == "APPROVAL_NOT_FOUND"


async def test_listing_every_runs_approvals_skips_an_unreachable_store(
    sidecar: Sidecar, client: SidecarClient
) -> None:
    # Issue 24, item 3: one run whose store cannot be reached made ListApprovals without a
    # run_id fail for everyone. Nothing listens on port 1: opening that store fails.
    registry = sidecar.registry
    assert registry is not None
    dead = RunRecordV1(
        run_id="dead-store",
        request_id="q",
        request=run_request("dead-store"),
        store_uri="redis://127.0.0.1:1/0",
    )
    await registry.create(dead)
    await asyncio.wait_for(suspended_run(client, "apr-live"), 10)
    listed = await client.list_approvals()
    assert [approval.run_id for approval in listed] == ["apr-live"]
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # that run's own listing does fail
        await client.list_approvals("dead-store")
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    get = client.approvals.GetApproval(
        pb.GetApprovalRequest(id="no-such-approval"), metadata=client.metadata
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # not found, or in the dead store?
        await get
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "127.0.0.1:1" in (caught.value.details() or "")


def edited(approval: pb.Approval, text: str) -> pb.DecideApprovalRequest:
    return pb.DecideApprovalRequest(
        id=approval.id,
        request_hash=approval.request_hash,
        decision=Decision.DECISION_APPROVE,
        reviewer=pb.Reviewer(id="ann"),
        edited_input_json=text,
    )


@pytest.mark.parametrize(
    ("edit", "result"),
    [
        ('{"text": "edited"}', "done: echo:edited"),  # runs once, on the edited input
        ('{"text": 5}', "APPROVAL_VALIDATION_ERROR"),  # the tool's schema refuses it: no run
    ],
    ids=["valid", "refused-by-schema"],
)
async def test_approve_with_an_edited_input_over_the_wire(
    client: SidecarClient, edit: str, result: str
) -> None:
    events = await asyncio.wait_for(suspended_run(client, "apr-edit"), 10)
    [approval] = await client.list_approvals("apr-edit")
    decided = await client.approvals.DecideApproval(
        edited(approval, edit), metadata=client.metadata
    )
    assert decided.recorded
    last = max(event.seq for event in events)
    resumed = [event async for event in client.watch("apr-edit", after_seq=last)]
    assert resumed[-1].run_status.status in (pb.RUN_STATUS_COMPLETED, pb.RUN_STATUS_FAILED)
    done = await client.get_run("apr-edit", full=True)
    assert result in done.tasks[0].result
    assert "echo:hi" not in done.tasks[0].result  # never on the original input
    # Deciding again with another edit is a conflict: the recorded edit is the one bound.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.approvals.DecideApproval(
            edited(approval, '{"text": "other"}'), metadata=client.metadata
        )
    assert error_reason(caught.value) == "APPROVAL_CONFLICT"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.approvals.GetApproval(pb.GetApprovalRequest(id="  "), metadata=c.metadata),
         "id"),
        (lambda c: c.approvals.ListApprovals(pb.ListApprovalsRequest(page_size=501),
                                             metadata=c.metadata), "page_size"),
        (lambda c: c.approvals.ListApprovals(pb.ListApprovalsRequest(page_token="next"),
                                             metadata=c.metadata), "page_token"),
        (lambda c: c.approvals.DecideApproval(
            Decision(id="apr_" + "0" * 32, request_hash="0" * 64,
                     decision=Decision.DECISION_APPROVE, reviewer=pb.Reviewer(id="ann"),
                     resume=99), metadata=c.metadata), "resume"),
    ],
    ids=["blank-id", "page-size", "page-token", "unknown-resume"],
)  # fmt: skip
async def test_bad_approval_requests_are_refused_naming_the_field(
    client: SidecarClient, call: Any, field: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(client)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == field


async def test_a_run_executing_here_shows_the_approvals_its_tasks_wait_for(
    client: SidecarClient,
) -> None:
    # t1 waits for a decision on its echo call while t2, independent of it, is still busy in
    # a host tool: the run is RUNNING, and GetRun names the approval it will suspend on.
    release = asyncio.Event()

    async def lookup(arguments: dict[str, Any], call: pb.ToolCall) -> str:
        await release.wait()
        return "found"

    request = run_request("apr-wait", tools=("echo",), arguments={"text": "hi"}, task_ids=("t1",))
    request.approval_gates.tool_calls.append("echo")
    request.tasks.tasks[0].assignee = "worker"
    request.team.agents.append(
        pb.AgentSpec(
            name="slow", provider="scripted", tools=["lookup"],
            scripted=tool_turns("lookup", {"query": "q"}, "done"),
        )
    )  # fmt: skip
    request.tasks.tasks.append(
        pb.TaskSpec(id="t2", title="Task t2", description="Do t2.", assignee="slow")
    )
    async with asyncio.TaskGroup() as group:
        host = HostTools(client, "wait-host", [lookup_tool(lookup)])
        hosting = group.create_task(host.run(reconnect_delay=0.05))
        try:
            await asyncio.wait_for(host.registered.wait(), 10)
            await client.start_run(request)
            run = await waiting_run(client, "apr-wait")
            assert run.status == pb.RUN_STATUS_RUNNING
            [approval] = await client.list_approvals("apr-wait")
            assert list(run.pending_approval_ids) == [approval.id]
            release.set()
            events = [event async for event in client.watch("apr-wait")]
        finally:
            host.stop()
            hosting.cancel()
    assert events[-1].run_status.status == pb.RUN_STATUS_SUSPENDED
    suspended = await client.get_run("apr-wait")  # now its run record's suspension says it
    assert list(suspended.pending_approval_ids) == [approval.id]


async def waiting_run(client: SidecarClient, run_id: str) -> pb.Run:
    """The run as soon as it shows an approval it waits for."""
    for _ in range(500):
        run = await client.get_run(run_id)
        if run.pending_approval_ids:
            return run
        await asyncio.sleep(0.01)
    raise AssertionError("the run never showed an approval it waits for")


async def test_a_cancelled_run_s_approval_is_no_longer_pending_nor_decidable(
    client: SidecarClient,
) -> None:
    # A run that ended waits for nothing: its approval is not offered to a reviewer, and a
    # decision is refused rather than recorded and never used.
    await asyncio.wait_for(suspended_run(client, "apr-cancelled"), 10)
    [approval] = await client.list_approvals("apr-cancelled")
    other = "apr-still-waiting"
    await asyncio.wait_for(suspended_run(client, other), 10)
    await client.cancel_run("apr-cancelled", "not needed any more")

    assert await client.list_approvals("apr-cancelled") == []
    assert [a.run_id for a in await client.list_approvals()] == [other]  # others still listed
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.decide_approval(approval, approve=True, reviewer="ann")
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "RUN_ALREADY_TERMINAL"
    fetched = await client.approvals.GetApproval(
        pb.GetApprovalRequest(id=approval.id), metadata=client.metadata
    )
    assert fetched.state == pb.APPROVAL_STATE_PENDING  # nothing was recorded
    assert (await client.get_run("apr-cancelled")).status == pb.RUN_STATUS_CANCELLED


def test_a_reviewer_id_is_blank_as_javascripts_trim_says() -> None:
    # OMA checks reviewer ids with trim(): "\x1c" is an id there (str.strip() would drop it),
    # "\ufeff " is blank (str.strip() would keep the U+FEFF).
    from sidecar.approvals import _reviewer_id
    from sidecar.status import InvalidArgument

    assert _reviewer_id("\x1c", None) == "\x1c"
    with pytest.raises(InvalidArgument):
        _reviewer_id("\ufeff ", None)
