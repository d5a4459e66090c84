"""OMA's in-flight runner fields restored here and written back by every later save.

An OMA checkpoint interrupted mid-task (after a committed tool call) is restored: a delegating
tool's ``delegationUsage`` counts in the task's usage when its committed result is replayed, the
loop warning in ``pendingToolResultText`` follows the results, and the loop flags stay in the
runner state. A restored approved call commits without its approval (spec CK-15), and no save
loses the run's decisions.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    OpenMultiAgent,
    Task,
    Team,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import Reviewer, Suspend, decide_approval
from oma_actors.checkpoint import checkpoint_key, decode
from oma_actors.checkpoint.validate import problem
from oma_actors.domain.messages import (
    LLMResponse,
    Message,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.stores import InMemoryStore
from oma_actors.testing import RecordingStore, ScriptedAdapter

RUN = "oma-in-flight"
TASK = "7a3c1d52-0000-4000-8000-000000000001"
CALL = "toolu_delegate_1"
PROMPT = "# Task: ask\n\nask the specialist"
Raw = dict[str, Any]


def _oma_checkpoint(**entry: Any) -> Raw:
    """A v4 checkpoint as OMA writes it: one task, stopped after its delegating call committed."""
    call = {"type": "tool_use", "id": CALL, "name": "delegate", "input": {"q": "price?"}}
    assistant = {"role": "assistant", "content": [call]}
    commit = {
        "result": {"type": "tool_result", "tool_use_id": CALL, "content": "12 USD"},
        "record": {"toolName": "delegate", "input": {"q": "price?"}, "output": "12 USD", "duration": 4},
        "delegationUsage": {"input_tokens": 5, "output_tokens": 7},
    }  # fmt: skip
    at = "2026-12-01T10:00:00.000Z"
    return {
        "version": 4,
        "mode": "runTasks",
        "createdAt": at,
        "identity": {"runId": RUN, "attempt": 1, "lastTraceId": "a" * 32, "lastRootSpanId": "b" * 16},
        "queue": {
            "version": 1,
            "tasks": [{"id": TASK, "title": "ask", "description": "ask the specialist",
                       "status": "in_progress", "assignee": "worker", "createdAt": at,
                       "updatedAt": at}],
            "pending": [], "inProgress": [TASK], "completed": [], "failed": [], "blocked": [],
            "skipped": [],
        },
        "messageBus": {"version": 1, "messages": [], "readState": []},
        "completedTaskResults": [],
        "inFlightTasks": [
            {
                "taskId": TASK, "assignee": "worker", "phase": "executing_tools",
                "conversationMessages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]},
                                         assistant],
                "messages": [assistant],
                "tokenUsage": {"input_tokens": 1, "output_tokens": 1},
                "toolCalls": [], "turns": 1,
                "pendingToolCalls": [{"call": call, "commit": commit}],
                **entry,
            }
        ],
        "pendingApprovals": [],
        "approvalDecisions": [],
    }  # fmt: skip


async def _restore(raw: Raw) -> tuple[Any, ScriptedAdapter, list[Raw]]:
    store = RecordingStore(InMemoryStore())
    await store.set(checkpoint_key(RUN), json.dumps(raw))
    # The final answer costs nothing, so the task's usage is exactly what was restored + replayed.
    adapter = ScriptedAdapter([LLMResponse([TextBlock("12 USD it is")], usage=TokenUsage(0, 0))])
    team = Team("t", [AgentConfig("worker", adapter=adapter)])  # no tool: a replay never runs it
    options = CheckpointOptions(store=store, run_id=RUN)
    result = await OpenMultiAgent().restore(team, checkpoint=options)
    writes = [json.loads(value) for value in store.values(checkpoint_key(RUN))][1:]
    return result, adapter, writes


async def test_a_replayed_commit_counts_its_delegated_usage() -> None:
    """OMA: 1/1 for the tool turn plus the delegated 5/7 gives 6/8 (spec RN-04 #3)."""
    result, adapter, _ = await _restore(_oma_checkpoint())
    assert result.success, result.status
    assert adapter.call_count == 1
    assert result.task_results[TASK].token_usage == TokenUsage(6, 8)
    assert result.task_results[TASK].turns == 2
    results = adapter.calls[0].messages[-1]
    assert results.content == [ToolResultBlock(CALL, "12 USD")]


async def test_the_loop_warning_follows_the_replayed_results() -> None:
    warning = "You called delegate twice with the same input."
    _, adapter, _ = await _restore(_oma_checkpoint(pendingToolResultText=warning))
    assert adapter.calls[0].messages[-1] == Message(
        "user", [ToolResultBlock(CALL, "12 USD"), TextBlock(warning)]
    )


async def test_loop_flags_survive_the_restore() -> None:
    """We do not detect loops, but a restored runner keeps OMA's flags in what it saves."""
    _, _, writes = await _restore(_oma_checkpoint(loopWarned=True))
    entries = [entry for write in writes for entry in write["inFlightTasks"]]
    assert entries
    assert all(entry.get("loopWarned") is True for entry in entries)
    assert all(problem(write) is None for write in writes)


# -- approvals ----------------------------------------------------------------------------------


class Charge(BaseModel):
    amount: int


def _charge(executions: list[int]) -> Any:
    async def run(args: BaseModel, ctx: ToolContext) -> str:
        executions.append(args.amount)  # type: ignore[attr-defined]
        return f"charged {args.amount}"  # type: ignore[attr-defined]

    return define_tool(name="charge_card", description="charge", input_model=Charge, execute=run)


def _charging_model() -> ScriptedAdapter:
    def reply(messages: Any, options: Any) -> LLMResponse:
        if len(messages) > 1:
            return LLMResponse([TextBlock("paid")], usage=TokenUsage(1, 1))
        call = ToolUseBlock("call-1", "charge_card", {"amount": 7})
        return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(1, 1))

    return ScriptedAdapter(reply)


async def _approved_restore(store: RecordingStore) -> tuple[Any, list[Raw], list[int]]:
    executions: list[int] = []
    team = Team(
        "t", [AgentConfig("worker", adapter=_charging_model(), tools=[_charge(executions)])]
    )
    options = CheckpointOptions(store=store, run_id=RUN)
    first = await OpenMultiAgent(on_tool_call=lambda call: Suspend("review")).run_tasks(
        team, [Task("pay", "pay the invoice")], checkpoint=options
    )
    [request] = first.pending_approvals
    await decide_approval(
        store,
        request_id=request.id,
        request_hash=request.request_hash,
        decision="approve",
        reviewer=Reviewer("finance"),
    )
    before = len(store.values(checkpoint_key(RUN)))
    result = await OpenMultiAgent().restore(team, checkpoint=options)
    writes = [json.loads(value) for value in store.values(checkpoint_key(RUN))[before:]]
    return result, writes, executions


async def test_an_approved_call_commits_without_its_approval() -> None:
    """Spec CK-15: OMA's validator refuses a commit next to an approval request or decision."""
    store = RecordingStore(InMemoryStore())
    result, writes, executions = await _approved_restore(store)
    assert result.success, result.status
    assert executions == [7]
    assert writes
    committed = [
        call
        for write in writes
        for entry in write["inFlightTasks"]
        for call in entry.get("pendingToolCalls", [])
        if "commit" in call
    ]
    assert committed, "the approved call's commit must have been saved"
    for call in committed:
        assert "approvalRequest" not in call
        assert "approvalDecision" not in call
    for write in writes:
        assert problem(write) is None
        # Every decision of the run is listed by every save, the final one included.
        assert [d["requestId"] for d in write["approvalDecisions"]] == [
            d.request_id for d in result.approval_decisions
        ]
        decode(json.dumps(write), key=checkpoint_key(RUN))


PLAN = [{"title": "pay", "description": "pay the invoice", "assignee": "worker"}]


async def test_the_final_synthesis_save_keeps_the_decisions() -> None:
    store = RecordingStore(InMemoryStore())
    executions: list[int] = []
    team = Team(
        "t", [AgentConfig("worker", adapter=_charging_model(), tools=[_charge(executions)])]
    )
    options = CheckpointOptions(store=store, run_id=RUN)
    lead = ScriptedAdapter(
        [LLMResponse([TextBlock(json.dumps(PLAN))]), LLMResponse([TextBlock("all paid")])]
    )
    coordinator = AgentConfig("coordinator", adapter=lead)
    first = await OpenMultiAgent(on_tool_call=lambda call: Suspend("review")).run_team(
        team, "pay the invoice", checkpoint=options, coordinator=coordinator
    )
    [request] = first.pending_approvals
    await decide_approval(
        store,
        request_id=request.id,
        request_hash=request.request_hash,
        decision="approve",
        reviewer=Reviewer("finance"),
    )
    result = await OpenMultiAgent().restore(team, checkpoint=options, coordinator=coordinator)
    assert result.success, result.status
    final = json.loads(store.values(checkpoint_key(RUN))[-1])
    assert "synthesisResult" in final
    assert [d["requestId"] for d in final["approvalDecisions"]] == [request.id]
