"""Durable approvals end to end: gates, suspension, decisions, restore (spec 13, T-34..T-45)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from acceptance_helpers import answer, calls
from pydantic import BaseModel, Field

from oma_actors import (
    AgentConfig,
    Allow,
    ApprovalPending,
    CheckpointError,
    CheckpointOptions,
    Deny,
    DurableApprovalError,
    InMemoryStore,
    OpenMultiAgent,
    ProgressEvent,
    RedactingStore,
    Reviewer,
    Suspend,
    Task,
    Team,
    ToolContext,
    ToolResultBlock,
    define_tool,
)
from oma_actors.approvals import decide_approval, get_approval_record
from oma_actors.approvals.gates import ToolCallRequest
from oma_actors.checkpoint import checkpoint_key
from oma_actors.testing import ScriptedAdapter

RUN = "run-approvals"


def options(store: object) -> CheckpointOptions:
    return CheckpointOptions(store=store, run_id=RUN)  # type: ignore[arg-type]


def worker_team(adapter: ScriptedAdapter, *, tools: Sequence[object] = ()) -> Team:
    return Team("t", [AgentConfig("worker", adapter=adapter, tools=tools)])  # type: ignore[arg-type]


def never(*args: object) -> bool:
    raise AssertionError("the gate must not be asked again")


async def approve(
    store: object, request_id: str, request_hash: str, who: str = "reviewer-1"
) -> None:
    await decide_approval(
        store,  # type: ignore[arg-type]
        request_id=request_id,
        request_hash=request_hash,
        decision="approve",
        reviewer=Reviewer(who),
    )


async def reject(store: object, request_id: str, request_hash: str) -> None:
    await decide_approval(
        store,  # type: ignore[arg-type]
        request_id=request_id,
        request_hash=request_hash,
        decision="reject",
        reviewer=Reviewer("reviewer-2"),
    )


# -- task dispatch --------------------------------------------------------------------------------


async def test_t34_suspend_without_compare_and_set_fails_closed() -> None:
    inner = InMemoryStore()
    adapter = ScriptedAdapter([answer("done")])
    result = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend("review")).run_tasks(
        worker_team(adapter), [Task("a", "x")], checkpoint=options(RedactingStore(inner))
    )
    assert not result.success
    assert result.status.code == "error"
    assert "APPROVAL_ATOMIC_STORE_REQUIRED" in (result.status.message or "")
    assert result.pending_approvals == []
    assert adapter.call_count == 0
    assert not [e.key for e in await inner.list() if e.key.startswith("__oma_approval__/")]


async def test_t38_dispatch_suspend_approve_restore_runs_once_without_asking_again() -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter([answer("done")])
    events: list[ProgressEvent] = []
    first = await OpenMultiAgent(
        on_task_dispatch=lambda task: Suspend("needs a human"), on_progress=events.append
    ).run_tasks(worker_team(adapter), [Task("a", "x")], checkpoint=options(store))
    assert first.status.code == "suspended"
    assert not first.success
    [request] = first.pending_approvals
    assert request.scope == "task_dispatch"
    assert request.reason == "needs a human"
    assert adapter.call_count == 0
    assert [type(e).__name__ for e in events if isinstance(e, ApprovalPending)] == [
        "ApprovalPending"
    ]
    assert first.tasks[0].status == "pending"

    # Restoring before anyone decided does nothing at all, however often.
    for _ in range(2):
        waiting = await OpenMultiAgent(on_task_dispatch=never).restore(
            worker_team(adapter), checkpoint=options(store)
        )
        assert waiting.status.code == "suspended"
        assert [r.id for r in waiting.pending_approvals] == [request.id]
    assert adapter.call_count == 0

    await approve(store, request.id, request.request_hash)
    done = await OpenMultiAgent(on_task_dispatch=lambda task: False).restore(
        worker_team(adapter), checkpoint=options(store)
    )
    assert done.success, done.status
    assert [t.status for t in done.tasks] == ["completed"]
    assert adapter.call_count == 1
    assert [d.decision for d in done.approval_decisions] == ["approved"]
    assert done.pending_approvals == []


async def test_t39_rejected_dispatch_is_terminal_across_restores() -> None:
    store = InMemoryStore()
    adapter = ScriptedAdapter([answer("never")])
    first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend()).run_tasks(
        worker_team(adapter), [Task("a", "x")], checkpoint=options(store)
    )
    [request] = first.pending_approvals
    await reject(store, request.id, request.request_hash)
    for _ in range(2):
        result = await OpenMultiAgent(on_task_dispatch=lambda task: True).restore(
            worker_team(adapter), checkpoint=options(store)
        )
        assert result.status.code == "rejected"
        assert [t.status for t in result.tasks] == ["skipped"]
    assert adapter.call_count == 0


async def test_dispatch_deny_and_gate_error_skip_the_rest() -> None:
    adapter = ScriptedAdapter([answer("a done")])
    tasks = [Task("a", "x"), Task("b", "y", depends_on=["a"])]
    denied = await OpenMultiAgent(
        on_task_dispatch=lambda task: Deny("no") if task.title == "b" else Allow()
    ).run_tasks(worker_team(adapter), tasks)
    assert denied.status.code == "rejected"
    assert [t.status for t in denied.tasks] == ["completed", "skipped"]
    assert denied.tasks[1].result == "Skipped: task dispatch approval rejected."

    def broken(task: object) -> bool:
        raise RuntimeError("gate bug")

    errored = await OpenMultiAgent(on_task_dispatch=broken).run_tasks(
        worker_team(ScriptedAdapter([])), [Task("a", "x")]
    )
    assert errored.status.code == "error"
    assert "gate bug" in (errored.tasks[0].result or "")


# -- plan -----------------------------------------------------------------------------------------

PLAN = json.dumps([{"title": "Research", "description": "find", "assignee": "worker"}])


async def test_t35_plan_suspend_approve_restore_runs_and_synthesizes() -> None:
    store = InMemoryStore()
    workers = ScriptedAdapter([answer("facts")])
    lead = ScriptedAdapter([answer(PLAN)])
    first = await OpenMultiAgent(on_plan_ready=lambda tasks: Suspend("Human review")).run_team(
        worker_team(workers), "goal", coordinator=AgentConfig("coordinator", adapter=lead),
        checkpoint=options(store),
    )  # fmt: skip
    assert first.status.code == "suspended"
    [request] = first.pending_approvals
    assert (request.scope, request.content["kind"], request.content["continuation"]) == (
        "plan", "plan", "execute",
    )  # fmt: skip
    assert request.reason == "Human review"
    assert workers.call_count == 0
    await approve(store, request.id, request.request_hash)

    synth = ScriptedAdapter([answer("SYNTHESIZED")])
    result = await OpenMultiAgent(on_plan_ready=never).restore(
        worker_team(workers), checkpoint=options(store),
        coordinator=AgentConfig("coordinator", adapter=synth),
    )  # fmt: skip
    assert result.success, result.status
    assert [(t.title, t.status) for t in result.tasks] == [("Research", "completed")]
    assert result.agent_results["coordinator"].output == "SYNTHESIZED"
    assert result.approval_decisions[0].reviewer.id == "reviewer-1"
    assert (workers.call_count, synth.call_count, lead.call_count) == (1, 1, 1)


async def test_t36_approved_plan_only_restores_to_the_plan_every_time() -> None:
    store = InMemoryStore()
    workers = ScriptedAdapter([])
    lead = ScriptedAdapter([answer(PLAN)])
    first = await OpenMultiAgent(on_plan_ready=lambda tasks: Suspend()).run_team(
        worker_team(workers), "goal", coordinator=AgentConfig("coordinator", adapter=lead),
        checkpoint=options(store), plan_only=True,
    )  # fmt: skip
    [request] = first.pending_approvals
    assert request.content["continuation"] == "plan_only"
    await approve(store, request.id, request.request_hash)
    for _ in range(2):
        result = await OpenMultiAgent(on_plan_ready=never).restore(
            worker_team(workers), checkpoint=options(store)
        )
        assert (result.success, result.plan_only, result.status.code) == (True, True, "ok")
        assert [t.status for t in result.tasks] == ["pending"]
    assert workers.call_count == 0


async def test_plan_deny_runs_nothing() -> None:
    workers = ScriptedAdapter([])
    result = await OpenMultiAgent(on_plan_ready=lambda tasks: False).run_team(
        worker_team(workers), "goal",
        coordinator=AgentConfig("coordinator", adapter=ScriptedAdapter([answer(PLAN)])),
    )  # fmt: skip
    assert result.status.code == "rejected"
    assert workers.call_count == 0


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


async def test_ledger_row_matches_the_checkpoint_request() -> None:
    store = InMemoryStore()
    first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend()).run_tasks(
        worker_team(ScriptedAdapter([])), [Task("a", "x")], checkpoint=options(store)
    )
    [request] = first.pending_approvals
    record = await get_approval_record(store, request.id)
    assert record is not None
    assert record.request == request
    assert record.decision is None


async def test_a_rejection_keeps_the_embedded_shared_memory() -> None:
    shared, store = InMemoryStore(), InMemoryStore()
    await shared.set("seed/note", "keep me", {"agent": "seed"})
    adapter = ScriptedAdapter([])
    team = Team("t", [AgentConfig("worker", adapter=adapter)], shared_memory_store=shared)
    first = await OpenMultiAgent(on_task_dispatch=lambda task: Suspend()).run_tasks(
        team, [Task("a", "x")], checkpoint=options(store)
    )
    [request] = first.pending_approvals
    await reject(store, request.id, request.request_hash)
    result = await OpenMultiAgent().restore(team, checkpoint=options(store))
    assert result.status.code == "rejected"
    saved = json.loads((await store.get(checkpoint_key(RUN))).value)  # type: ignore[union-attr]
    assert [e["key"] for e in saved["sharedMemory"]["entries"]] == ["seed/note"]
    assert saved["identity"]["attempt"] == 2
    assert [d["decision"] for d in saved["approvalDecisions"]] == ["rejected"]
    assert saved["pendingApprovals"] == []
