"""A restore with decided approvals, as OMA v1.16.1 restores it.

* An approved dispatch runs before the gate is asked about any other ready task
  (``task-execution.ts``: ``approvedDispatchTaskId``): another task's denial or suspension must
  not stop the work a reviewer let through. It was asked in scheduler order, so a denial of a
  higher-ranked task skipped the approved one.
* A rejection stays final: with a tool call's request also pending (approved), the rejected
  restore kept that request without its invocation, and the next restore refused it as stale
  (``APPROVAL_STALE_DECISION``) instead of rejecting again.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import Deny, Reviewer, Suspend, decide_approval
from oma_actors.domain.approvals import ApprovalRequest
from oma_actors.llm import LLMResponse, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "approvals-order"


def answer(text: str) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(1, 1))


def checkpoint(store: InMemoryStore) -> CheckpointOptions:
    return CheckpointOptions(store=store, run_id=RUN)


async def decide(store: InMemoryStore, request: ApprovalRequest, decision: Any) -> None:
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision=decision,
        reviewer=Reviewer("reviewer-1"),
    )  # fmt: skip


async def test_an_approved_dispatch_runs_before_the_gate_is_asked_about_another_task() -> None:
    store = InMemoryStore()
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter(lambda m, o: answer("done")))])
    tasks = [
        Task("A", "a", id="A"),
        Task("B", "b", id="B"),
        Task("C", "c", id="C", depends_on=["B"]),
        Task("D", "d", id="D", depends_on=["C"]),
    ]
    # B ranks first (two tasks wait for it) and runs; A waits for a reviewer.
    fresh = await OpenMultiAgent(
        on_task_dispatch=lambda task: Suspend("review A") if task.id == "A" else True
    ).run_tasks(team, tasks, checkpoint=checkpoint(store))
    [request] = fresh.pending_approvals
    await decide(store, request, "approve")
    asked: list[str] = []

    def deny(task: Any) -> bool:
        asked.append(task.id)
        return False

    # C ranks above A now; the gate denies it. A was approved: it runs first, unasked.
    restored = await OpenMultiAgent(on_task_dispatch=deny).restore(
        team, checkpoint=checkpoint(store)
    )
    statuses = {task.id: task.status for task in restored.tasks}
    assert statuses == {"A": "completed", "B": "completed", "C": "skipped", "D": "skipped"}
    assert asked == ["C"]
    assert restored.status.code == "rejected"


class Amount(BaseModel):
    amount: int


async def test_a_rejection_with_an_approved_tool_call_pending_rejects_again() -> None:
    store, charged = InMemoryStore(), []

    async def charge(args: Amount, ctx: ToolContext) -> str:
        charged.append(args.amount)
        return "charged"

    tool = define_tool(
        name="charge", description="c", input_model=Amount, execute=charge, effect="unsafe"
    )
    call = LLMResponse(
        [ToolUseBlock("c1", "charge", {"amount": 7})], stop_reason="tool_use",
        usage=TokenUsage(1, 1),
    )  # fmt: skip

    def team() -> Team:
        payer = AgentConfig("w1", adapter=ScriptedAdapter([call, answer("A done")]), tools=[tool])
        other = AgentConfig("w2", adapter=ScriptedAdapter(lambda m, o: answer("B done")))
        return Team("t", [payer, other])

    tasks = [Task("A", "a", id="A", assignee="w1"), Task("B", "b", id="B", assignee="w2")]
    fresh = await OpenMultiAgent(
        on_tool_call=lambda call: Suspend("tool review"),
        on_task_dispatch=lambda task: Suspend("dispatch review") if task.id == "B" else True,
    ).run_tasks(team(), tasks, checkpoint=checkpoint(store))
    requests = {request.scope: request for request in fresh.pending_approvals}
    await decide(store, requests["tool_call"], "approve")
    await decide(store, requests["task_dispatch"], "reject")
    for _ in range(2):  # the second restore reads the rejection the first one saved
        restored = await OpenMultiAgent(
            on_tool_call=lambda call: Deny(), on_task_dispatch=lambda task: False
        ).restore(team(), checkpoint=checkpoint(store))
        assert restored.status.code == "rejected"
        assert {task.id: task.status for task in restored.tasks} == {
            "A": "skipped", "B": "skipped",
        }  # fmt: skip
    assert charged == []


async def test_a_run_a_tool_approval_suspends_says_so_in_omas_words() -> None:
    store = InMemoryStore()

    async def charge(args: Amount, ctx: ToolContext) -> str:
        return "charged"

    tool = define_tool(name="charge", description="c", input_model=Amount, execute=charge)
    call = LLMResponse(
        [ToolUseBlock("c1", "charge", {"amount": 7})], stop_reason="tool_use",
        usage=TokenUsage(1, 1),
    )  # fmt: skip
    team = Team("t", [AgentConfig("w", adapter=ScriptedAdapter([call]), tools=[tool])])
    result = await OpenMultiAgent(on_tool_call=lambda call: Suspend("review")).run_tasks(
        team, [Task("A", "a", id="A")], checkpoint=checkpoint(store)
    )
    assert result.status.code == "suspended"
    assert result.status.message == "Durable approval required before task execution can continue."
