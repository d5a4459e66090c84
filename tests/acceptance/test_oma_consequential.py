"""Consequential tools end to end: OMA's approval hash (T-41) and confirmation of calls.

An approval OMA recorded for a consequential tool binds ``consequential: true`` in its hash;
restoring such a checkpoint here runs the approved call exactly once. With
``require_consequential_confirmation`` a consequential call in ``run_agent`` / ``run_team``
needs an ``on_tool_call`` decision (or an approved plan); otherwise it is denied and the run ends
``rejected`` with ``confirmation_required``, as OMA reports it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from acceptance_helpers import answer, calls
from approvals_flow_helpers import RUN, approve, options, worker_team
from pydantic import BaseModel, Field

from oma_actors import (
    AgentConfig,
    ConfigurationError,
    DurableApprovalError,
    OpenMultiAgent,
    Task,
    Team,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import Allow, Deny, Suspend
from oma_actors.approvals.gates import ToolCallRequest
from oma_actors.checkpoint import checkpoint_key
from oma_actors.llm import ToolResultBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

TASK = "8f14e45f-ceea-4e7a-9b6f-1b2c3d4e5f60"
DENIAL = "Consequential tool confirmation required before execution."


class Charge(BaseModel):
    amount: int = Field(le=10_000)


def charge_tool(executions: list[int], *, consequential: bool = True):  # type: ignore[no-untyped-def]
    async def run(args: BaseModel, ctx: ToolContext) -> str:
        executions.append(args.amount)  # type: ignore[attr-defined]
        return f"charged {args.amount}"  # type: ignore[attr-defined]

    return define_tool(
        name="charge_card",
        description="charge",
        input_model=Charge,
        execute=run,
        consequential=consequential,
    )


def charge_script() -> ScriptedAdapter:
    return ScriptedAdapter(
        lambda messages, opts: (
            answer("after")
            if len(messages) > 1
            else calls(("call-1", "charge_card", {"amount": "7"}))
        )
    )


def stable(value: Any) -> str:
    """OMA's stableJson for ASCII data: sorted keys, no spaces (written here, not imported)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def oma_request(task_id: str, *, consequential: bool = True) -> dict[str, Any]:
    """The request OMA 1.16.1 writes for T-41's suspended charge, hashed the OMA way."""
    content = {
        "kind": "tool_call",
        "toolName": "charge_card",
        "rawInput": {"amount": "7"},
        "input": {"amount": 7},
        "agentName": "worker",
        "taskId": task_id,
        "toolCallId": "call-1",
        "consequential": consequential,
    }
    boundary = f"{task_id}:call-1"
    request_hash = sha256(stable({"scope": "tool_call", "boundary": boundary, "content": content}))
    request_id = "apr_" + sha256(f"{RUN}\ntool_call\n{boundary}\n{request_hash}")[:32]
    return {
        "version": 1,
        "id": request_id,
        "runId": RUN,
        "scope": "tool_call",
        "boundary": boundary,
        "requestHash": request_hash,
        "requestedAt": "2026-01-02T03:04:05.678Z",
        "reason": "Finance review",
        "content": content,
    }


# -- T-41 with a consequential tool ------------------------------------------------------------


async def test_t41_the_request_binds_consequential_and_runs_once_after_approval() -> None:
    store = InMemoryStore()
    executions: list[int] = []
    adapter = charge_script()
    seen: list[ToolCallRequest] = []

    def gate(call: ToolCallRequest) -> Suspend:
        seen.append(call)
        return Suspend("Finance review")

    first = await OpenMultiAgent(on_tool_call=gate).run_tasks(
        worker_team(adapter, tools=[charge_tool(executions)]),
        [Task("pay", "pay the invoice", id=TASK, max_retries=2)],
        checkpoint=options(store),
    )
    assert first.status.code == "suspended"
    assert (len(seen), executions) == (1, [])
    [request] = first.pending_approvals
    expected = oma_request(TASK)
    assert request.content == expected["content"]
    assert (request.id, request.request_hash) == (expected["id"], expected["requestHash"])
    await approve(store, request.id, request.request_hash, "finance@example.com")
    result = await OpenMultiAgent(on_tool_call=lambda call: Deny("no")).restore(
        worker_team(adapter, tools=[charge_tool(executions)]), checkpoint=options(store)
    )
    assert result.success, result.status
    assert executions == [7]
    assert result.approval_decisions[0].reviewer.id == "finance@example.com"


# -- a checkpoint and ledger row written by the TypeScript OMA ---------------------------------


def oma_checkpoint(request: dict[str, Any]) -> dict[str, Any]:
    """OMA's v4 snapshot of T-41 suspended: the charge pending on its approval request."""
    at = "2026-01-02T03:04:05.600Z"
    prompt = {"role": "user", "content": [{"type": "text", "text": "# Task: pay\n\npay it"}]}
    call = {"type": "tool_use", "id": "call-1", "name": "charge_card", "input": {"amount": "7"}}
    assistant = {"role": "assistant", "content": [call]}
    return {
        "version": 4,
        "mode": "runTasks",
        "createdAt": at,
        "identity": {
            "runId": RUN,
            "attempt": 1,
            "lastTraceId": "4bf92f3577b34da6a3ce929d0e0e4736",
            "lastRootSpanId": "00f067aa0ba902b7",
        },
        "queue": {
            "version": 1,
            "tasks": [
                {
                    "id": TASK,
                    "title": "pay",
                    "description": "pay it",
                    "status": "in_progress",
                    "assignee": "worker",
                    "createdAt": at,
                    "updatedAt": at,
                    "maxRetries": 2,
                }
            ],
            "pending": [],
            "inProgress": [TASK],
            "completed": [],
            "failed": [],
            "blocked": [],
            "skipped": [],
        },
        "messageBus": {"version": 1, "messages": [], "readState": []},
        "completedTaskResults": [],
        "inFlightTasks": [
            {
                "taskId": TASK,
                "assignee": "worker",
                "phase": "executing_tools",
                "conversationMessages": [prompt, assistant],
                "messages": [assistant],
                "tokenUsage": {"input_tokens": 1, "output_tokens": 1},
                "toolCalls": [],
                "turns": 1,
                "pendingToolCalls": [{"call": call, "approvalRequest": request}],
            }
        ],
        "pendingApprovals": [request],
        "approvalDecisions": [],
    }


async def oma_store(*, approved: bool) -> InMemoryStore:
    """A store as OMA left it: the checkpoint, and the ledger row with the reviewer's decision."""
    request = oma_request(TASK)
    store = InMemoryStore()
    await store.set(checkpoint_key(RUN), json.dumps(oma_checkpoint(request)))
    decision = {
        "version": 1,
        "requestId": request["id"],
        "runId": RUN,
        "scope": "tool_call",
        "requestHash": request["requestHash"],
        "decision": "approved" if approved else "rejected",
        "reviewer": {"id": "finance@example.com"},
        "decidedAt": "2026-01-02T04:00:00.000Z",
    }
    row = {"version": 1, "request": request, "decision": decision}
    await store.set(f"__oma_approval__/{request['id']}", json.dumps(row))
    return store


async def test_an_oma_approval_of_a_consequential_call_runs_it_once_here() -> None:
    store = await oma_store(approved=True)
    executions: list[int] = []
    adapter = ScriptedAdapter([answer("paid")])
    team = worker_team(adapter, tools=[charge_tool(executions)])
    result = await OpenMultiAgent(on_tool_call=lambda call: Deny("gate not asked")).restore(
        team, checkpoint=options(store)
    )
    assert result.success, result.status
    assert executions == [7]
    assert adapter.call_count == 1
    result_block = adapter.calls[0].messages[-1].content[0]
    assert isinstance(result_block, ToolResultBlock)
    assert result_block.content == "charged 7"
    assert [d.decision for d in result.approval_decisions] == ["approved"]
    again = await OpenMultiAgent().restore(team, checkpoint=options(store))
    assert again.success
    assert executions == [7]  # never twice


async def test_the_same_approval_is_stale_for_a_tool_no_longer_consequential() -> None:
    # The flag is part of what was reviewed: a deployment that dropped it runs nothing.
    store = await oma_store(approved=True)
    executions: list[int] = []
    adapter = ScriptedAdapter([answer("paid")])
    with pytest.raises(DurableApprovalError) as info:
        await OpenMultiAgent().restore(
            worker_team(adapter, tools=[charge_tool(executions, consequential=False)]),
            checkpoint=options(store),
        )
    assert info.value.code == "APPROVAL_STALE_DECISION"
    assert (executions, adapter.call_count) == ([], 0)


# -- require_consequential_confirmation: run_agent ---------------------------------------------


def solo(executions: list[int], adapter: ScriptedAdapter, **tool: Any) -> AgentConfig:
    return AgentConfig("worker", adapter=adapter, tools=[charge_tool(executions, **tool)])


def seen_by_model(adapter: ScriptedAdapter) -> str:
    block = adapter.calls[1].messages[-1].content[0]
    assert isinstance(block, ToolResultBlock)
    return str(block.content)


def test_the_option_must_be_a_bool() -> None:
    with pytest.raises(ConfigurationError, match="require_consequential_confirmation"):
        OpenMultiAgent(require_consequential_confirmation="yes")  # type: ignore[arg-type]


async def test_run_agent_without_a_gate_refuses_and_reports_confirmation_required() -> None:
    executions: list[int] = []
    adapter = charge_script()
    result = await OpenMultiAgent(require_consequential_confirmation=True).run_agent(
        solo(executions, adapter), "pay"
    )
    assert executions == []
    assert seen_by_model(adapter) == f'Tool "charge_card" denied by onToolCall: {DENIAL}'
    assert result.output == "after"  # the model saw the denial and continued
    assert (result.success, result.confirmation_required) == (False, True)
    assert result.status is not None
    assert (result.status.code, result.status.message) == ("rejected", DENIAL)


async def test_run_agent_hands_consequential_calls_to_the_gate() -> None:
    executions: list[int] = []
    asked: list[str] = []

    def gate(call: ToolCallRequest) -> Allow | Deny:
        asked.append(call.tool_name)
        return Allow() if call.input["amount"] < 10 else Deny("too much")

    orchestrator = OpenMultiAgent(on_tool_call=gate, require_consequential_confirmation=True)
    allowed = await orchestrator.run_agent(solo(executions, charge_script()), "pay")
    assert (allowed.success, allowed.status, executions, asked) == (
        True,
        None,
        [7],
        ["charge_card"],
    )

    big = ScriptedAdapter(
        lambda messages, opts: (
            answer("after")
            if len(messages) > 1
            else calls(("call-1", "charge_card", {"amount": 900}))
        )
    )
    denied = await orchestrator.run_agent(solo(executions, big), "pay")
    assert executions == [7]
    assert seen_by_model(big) == 'Tool "charge_card" denied by onToolCall: too much'
    assert (denied.success, denied.confirmation_required) == (False, False)
    assert denied.status is not None
    assert denied.status.message == "Consequential tool confirmation rejected."


@pytest.mark.parametrize(
    ("confirm", "consequential"), [(False, True), (True, False)], ids=["option-off", "benign-tool"]
)
async def test_nothing_changes_without_the_option_or_a_consequential_tool(
    confirm: bool, consequential: bool
) -> None:
    executions: list[int] = []
    result = await OpenMultiAgent(require_consequential_confirmation=confirm).run_agent(
        solo(executions, charge_script(), consequential=consequential), "pay"
    )
    assert (result.success, result.status, result.confirmation_required) == (True, None, False)
    assert executions == [7]


# -- require_consequential_confirmation: run_team and run_tasks --------------------------------

PLAN = [{"title": "Pay", "description": "pay the invoice", "assignee": "worker"}]


def squad(executions: list[int]) -> tuple[Team, AgentConfig]:
    team = Team(
        "t", [AgentConfig("worker", adapter=charge_script(), tools=[charge_tool(executions)])]
    )
    lead = ScriptedAdapter([answer(json.dumps(PLAN)), answer("final answer")])
    return team, AgentConfig("coordinator", adapter=lead)


async def test_run_team_without_any_confirmation_is_rejected() -> None:
    executions: list[int] = []
    team, lead = squad(executions)
    result = await OpenMultiAgent(require_consequential_confirmation=True).run_team(
        team, "pay the invoice", coordinator=lead
    )
    assert executions == []
    assert [task.status for task in result.tasks] == ["completed"]  # the model took the denial
    assert (result.success, result.confirmation_required) == (False, True)
    assert (result.status.code, result.status.message) == ("rejected", DENIAL)


async def test_run_team_an_approved_plan_confirms_consequential_calls() -> None:
    executions: list[int] = []
    team, lead = squad(executions)
    planned: list[object] = []

    def plan_ready(tasks: object) -> bool:
        planned.append(tasks)
        return True

    result = await OpenMultiAgent(
        on_plan_ready=plan_ready, require_consequential_confirmation=True
    ).run_team(team, "pay the invoice", coordinator=lead)
    assert len(planned) == 1
    assert result.success, result.status
    assert executions == [7]


async def test_run_team_a_denying_gate_rejects_the_run() -> None:
    executions: list[int] = []
    team, lead = squad(executions)
    result = await OpenMultiAgent(
        on_plan_ready=lambda tasks: True,  # the per-call gate still decides when there is one
        on_tool_call=lambda call: Deny("not today"),
        require_consequential_confirmation=True,
    ).run_team(team, "pay the invoice", coordinator=lead)
    assert executions == []
    assert (result.success, result.confirmation_required) == (False, False)
    assert result.status.message == "Consequential tool confirmation rejected."


async def test_run_tasks_is_not_guarded_its_structure_was_declared() -> None:
    executions: list[int] = []
    team, _ = squad(executions)
    result = await OpenMultiAgent(require_consequential_confirmation=True).run_tasks(
        team, [Task("pay", "pay the invoice", assignee="worker")]
    )
    assert result.success
    assert executions == [7]
