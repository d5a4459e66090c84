"""Durable approvals of tool calls end to end: suspend, approve, reject, tamper (T-41..T-45)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from acceptance_helpers import answer, calls
from approvals_flow_helpers import RUN, approve, options, reject, worker_team
from pydantic import BaseModel, Field

from oma_actors import (
    AgentConfig,
    CheckpointError,
    DurableApprovalError,
    OpenMultiAgent,
    Task,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import Allow, Deny, Suspend
from oma_actors.approvals.gates import ToolCallRequest
from oma_actors.checkpoint import checkpoint_key
from oma_actors.llm import ToolResultBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import FailingStore, ScriptedAdapter

# -- tool calls -----------------------------------------------------------------------------------


class Charge(BaseModel):
    amount: int = Field(le=10_000)


def charge_tool(executions: list[int], *, cap: int | None = None):  # type: ignore[no-untyped-def]
    model = Charge
    if cap is not None:

        class Capped(BaseModel):
            amount: int = Field(le=cap)

        model = Capped  # type: ignore[assignment]

    async def run(args: BaseModel, ctx: ToolContext) -> str:
        executions.append(args.amount)  # type: ignore[attr-defined]
        return f"charged {args.amount}"  # type: ignore[attr-defined]

    return define_tool(name="charge_card", description="charge", input_model=model, execute=run)


def charge_script() -> ScriptedAdapter:
    return ScriptedAdapter(
        lambda messages, opts: (
            answer("after")
            if len(messages) > 1
            else calls(("call-1", "charge_card", {"amount": "7"}))
        )
    )


async def suspended_charge(store: InMemoryStore, executions: list[int]):  # type: ignore[no-untyped-def]
    seen: list[ToolCallRequest] = []

    def gate(call: ToolCallRequest) -> Suspend:
        seen.append(call)
        return Suspend("Finance review")

    adapter = charge_script()
    team = worker_team(adapter, tools=[charge_tool(executions)])
    first = await OpenMultiAgent(on_tool_call=gate).run_tasks(
        team, [Task("pay", "pay the invoice", max_retries=2)], checkpoint=options(store)
    )
    assert len(seen) == 1
    return first, adapter


async def test_t41_approved_tool_call_runs_exactly_once_after_restore() -> None:
    store = InMemoryStore()
    executions: list[int] = []
    first, adapter = await suspended_charge(store, executions)
    assert first.status.code == "suspended"
    assert executions == []
    [request] = first.pending_approvals
    content = request.content
    assert (content["toolName"], content["rawInput"], content["input"]) == (
        "charge_card", {"amount": "7"}, {"amount": 7},
    )  # fmt: skip
    assert first.tasks[0].status == "in_progress"
    await approve(store, request.id, request.request_hash, "finance@example.com")

    result = await OpenMultiAgent(on_tool_call=lambda call: Deny("no")).restore(
        worker_team(adapter, tools=[charge_tool(executions)]), checkpoint=options(store)
    )
    assert result.success, result.status
    assert executions == [7]
    assert result.approval_decisions[0].reviewer.id == "finance@example.com"
    again = await OpenMultiAgent().restore(
        worker_team(adapter, tools=[charge_tool(executions)]), checkpoint=options(store)
    )
    assert again.success
    assert executions == [7]  # never twice


async def test_t42_rejected_tool_call_reaches_the_model_as_a_denial() -> None:
    store = InMemoryStore()
    executions: list[int] = []
    first, adapter = await suspended_charge(store, executions)
    [request] = first.pending_approvals
    await reject(store, request.id, request.request_hash)
    before = adapter.call_count
    result = await OpenMultiAgent(on_tool_call=lambda call: True).restore(
        worker_team(adapter, tools=[charge_tool(executions)]), checkpoint=options(store)
    )
    assert result.success
    assert executions == []
    denial = adapter.calls[before].messages[-1].content[0]
    assert isinstance(denial, ToolResultBlock)
    assert "denied by durable approval" in str(denial.content)
    assert result.approval_decisions[0].decision == "rejected"


async def test_t43_changed_schema_refuses_the_reviewed_input() -> None:
    store = InMemoryStore()
    executions: list[int] = []
    first, adapter = await suspended_charge(store, executions)
    [request] = first.pending_approvals
    await approve(store, request.id, request.request_hash)
    calls_before = adapter.call_count
    with pytest.raises(DurableApprovalError) as info:
        await OpenMultiAgent().restore(
            worker_team(adapter, tools=[charge_tool(executions, cap=5)]), checkpoint=options(store)
        )
    assert info.value.code == "APPROVAL_STALE_DECISION"
    assert executions == []
    assert adapter.call_count == calls_before


async def test_t44_tampered_pending_input_is_refused() -> None:
    store = InMemoryStore()
    executions: list[int] = []
    first, adapter = await suspended_charge(store, executions)
    [request] = first.pending_approvals
    await approve(store, request.id, request.request_hash)
    key = checkpoint_key(RUN)
    raw = json.loads((await store.get(key)).value)  # type: ignore[union-attr]
    raw["inFlightTasks"][0]["pendingToolCalls"][0]["call"]["input"]["amount"] = "7000"
    await store.set(key, json.dumps(raw))
    with pytest.raises(DurableApprovalError) as info:
        await OpenMultiAgent().restore(
            worker_team(adapter, tools=[charge_tool(executions)]), checkpoint=options(store)
        )
    assert info.value.code == "APPROVAL_STALE_DECISION"
    assert executions == []


async def test_t45_hiding_the_pending_request_is_not_a_checkpoint() -> None:
    store = InMemoryStore()
    executions: list[int] = []
    _, adapter = await suspended_charge(store, executions)
    key = checkpoint_key(RUN)
    raw = json.loads((await store.get(key)).value)  # type: ignore[union-attr]
    raw["pendingApprovals"] = []
    await store.set(key, json.dumps(raw))
    with pytest.raises(CheckpointError, match="not a checkpoint snapshot"):
        await OpenMultiAgent().restore(
            worker_team(adapter, tools=[charge_tool(executions)]), checkpoint=options(store)
        )
    assert executions == []


async def test_sibling_calls_commit_while_one_call_suspends() -> None:
    store = InMemoryStore()
    executions: list[int] = []
    script = ScriptedAdapter(
        lambda messages, opts: (
            answer("after")
            if len(messages) > 1
            else calls(
                ("c-small", "charge_card", {"amount": 1}), ("c-big", "charge_card", {"amount": 900})
            )
        )
    )
    team = worker_team(script, tools=[charge_tool(executions)])
    first = await OpenMultiAgent(
        on_tool_call=lambda call: Suspend() if call.input["amount"] > 100 else Allow()
    ).run_tasks(team, [Task("pay", "x")], checkpoint=options(store))
    assert first.status.code == "suspended"
    assert executions == [1]
    raw = json.loads((await store.get(checkpoint_key(RUN))).value)  # type: ignore[union-attr]
    pending = raw["inFlightTasks"][0]["pendingToolCalls"]
    assert ["commit" in item for item in pending] == [True, False]
    assert "approvalRequest" in pending[1]
    [request] = first.pending_approvals
    await approve(store, request.id, request.request_hash)
    done = await OpenMultiAgent().restore(team, checkpoint=options(store))
    assert done.success
    assert executions == [1, 900]


async def test_tool_deny_and_gate_error_are_results_the_model_sees() -> None:
    executions: list[int] = []
    adapter = charge_script()
    result = await OpenMultiAgent(on_tool_call=lambda call: Deny("too much")).run_agent(
        AgentConfig("w", adapter=adapter, tools=[charge_tool(executions)]), "pay"
    )
    assert result.success
    assert executions == []
    block = adapter.calls[1].messages[-1].content[0]
    assert isinstance(block, ToolResultBlock)
    assert block.content == 'Tool "charge_card" denied by onToolCall: too much'


async def test_tool_suspend_outside_a_checkpointed_task_fails_closed() -> None:
    executions: list[int] = []
    adapter = charge_script()
    result = await OpenMultiAgent(on_tool_call=lambda call: Suspend()).run_agent(
        AgentConfig("w", adapter=adapter, tools=[charge_tool(executions)]), "pay"
    )
    assert result.success
    assert executions == []
    block = adapter.calls[1].messages[-1].content[0]
    assert isinstance(block, ToolResultBlock)
    assert "requested suspension" in str(block.content)


async def test_a_tool_call_suspension_that_cannot_be_checkpointed_is_never_reported() -> None:
    # AP-19/AP-25: a reviewer must never see a request a restore would not know about. Every
    # save holding the parked call fails: the run raises instead of reporting it suspended.
    inner = InMemoryStore()

    def holds_the_request(key: str, value: Any) -> bool:
        return "approvalRequest" in json.dumps(value)

    store = FailingStore(inner, op="set", times=None, predicate=holds_the_request)
    executions: list[int] = []
    with pytest.raises(DurableApprovalError) as caught:
        await OpenMultiAgent(on_tool_call=lambda call: Suspend("review")).run_tasks(
            worker_team(charge_script(), tools=[charge_tool(executions)]),
            [Task("pay", "pay the invoice")], checkpoint=options(store),
        )  # fmt: skip
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"
    assert "'call-1' could not be checkpointed" in str(caught.value)
    assert executions == []
    keys = [entry.key for entry in await inner.list()]
    assert not [key for key in keys if key.startswith("__oma_approval__/")]  # no ledger row
    saved = await inner.get(checkpoint_key(RUN))
    assert saved is None or not json.loads(saved.value)["pendingApprovals"]
