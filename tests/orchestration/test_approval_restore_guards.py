"""Restore-time approval guards no other test held (``orchestration.approval_restore``).

Each test edits the stored checkpoint the way a forgery would (or decides a turn's requests
differently) and checks the guard that stands in the way:

* a pending tool call's request must still name the invocation that carries it: the same call
  id, the same tool, the same agent, and the very request the call carries. A checkpoint edited
  in any of these is refused at restore with ``APPROVAL_STALE_DECISION``, before a model is
  called, a tool runs or a new attempt is written (``_recomputed_hash``);
* a decision is attached to the call whose request it decides, and to no other call of the same
  turn (``_attach``): a call a reviewer rejected never runs on its sibling's approval;
* a decision the checkpoint records must be the ledger's own, its run id too (``_same``): a
  checkpoint copied into another run does not adopt the first run's decisions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    DurableApprovalError,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    define_tool,
)
from oma_actors.approvals import (
    ApprovalRequest,
    Reviewer,
    Suspend,
    approval_request_id,
    decide_approval,
    hash_approval_request,
)
from oma_actors.checkpoint import checkpoint_key
from oma_actors.llm import (
    ChatOptions,
    ContentBlock,
    LLMResponse,
    Message,
    TextBlock,
    ToolUseBlock,
)
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "run-restore-guards"
Edit = Callable[[dict[str, Any]], None]


class Amount(BaseModel):
    """The input of the ``charge`` and ``refund`` tools."""

    amount: int


def answer(text: str) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(1, 1))


def tool_turn(*calls: tuple[str, int]) -> LLMResponse:
    blocks: list[ContentBlock] = [
        ToolUseBlock(call_id, "charge", {"amount": amount}) for call_id, amount in calls
    ]
    return LLMResponse(blocks, stop_reason="tool_use", usage=TokenUsage(1, 1))


def options(store: InMemoryStore, run_id: str = RUN) -> CheckpointOptions:
    return CheckpointOptions(store=store, run_id=run_id)


def money_tools(ran: list[tuple[str, int]]) -> list[Any]:
    """``charge`` and ``refund``, each recording ``(name, amount)`` in ``ran`` when it runs."""

    def tool(name: str) -> Any:
        async def execute(args: Amount, ctx: ToolContext) -> str:
            ran.append((name, args.amount))
            return f"{name} {args.amount}"

        return define_tool(name=name, description=name, input_model=Amount, execute=execute)

    return [tool("charge"), tool("refund")]


def script(*calls: tuple[str, int]) -> ScriptedAdapter:
    """The model asks for ``calls`` in its first turn and answers once it has their results."""

    def reply(messages: Sequence[Message], opts: ChatOptions) -> LLMResponse:
        return answer("after") if len(messages) > 1 else tool_turn(*calls)

    return ScriptedAdapter(reply)


async def decide(store: InMemoryStore, request: ApprovalRequest, decision: Any) -> None:
    await decide_approval(
        store, request_id=request.id, request_hash=request.request_hash, decision=decision,
        reviewer=Reviewer("reviewer-1"),
    )  # fmt: skip


async def edit_checkpoint(store: InMemoryStore, edit: Edit) -> str:
    """Apply ``edit`` to the stored checkpoint's JSON; return the text now stored."""
    entry = await store.get(checkpoint_key(RUN))
    assert entry is not None
    raw = json.loads(entry.value)
    edit(raw)
    text = json.dumps(raw)
    await store.set(checkpoint_key(RUN), text)
    return text


def the_call(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Every copy of the pending call ``c1`` in the checkpoint: pending, conversation, messages."""
    [entry] = raw["inFlightTasks"]
    [item] = entry["pendingToolCalls"]
    turn = entry["conversationMessages"][1]["content"][0]
    return [item["call"], turn, entry["messages"][0]["content"][0]]


def renamed_tool(raw: dict[str, Any]) -> None:
    for block in the_call(raw):
        block["name"] = "refund"


def renamed_call(raw: dict[str, Any]) -> None:
    for block in the_call(raw):
        block["id"] = "c2"


def moved_to_another_agent(raw: dict[str, Any]) -> None:
    raw["inFlightTasks"][0]["assignee"] = "other"
    raw["queue"]["tasks"][0]["assignee"] = "other"


def carries_another_request(raw: dict[str, Any]) -> None:
    """The call carries a second, consistent request for itself; the reviewed one stays listed."""
    [entry] = raw["inFlightTasks"]
    [item] = entry["pendingToolCalls"]
    other = json.loads(json.dumps(item["approvalRequest"]))
    other["content"]["input"] = {"amount": 8}
    other["requestHash"] = hash_approval_request(
        other["scope"], other["boundary"], other["content"]
    )
    other["id"] = approval_request_id(
        other["runId"], other["scope"], other["boundary"], other["requestHash"]
    )
    item["approvalRequest"] = other
    raw["pendingApprovals"].append(other)


@pytest.mark.parametrize(
    "edit",
    [renamed_tool, renamed_call, moved_to_another_agent, carries_another_request],
    ids=["tool-name", "call-id", "assignee", "carried-request"],
)
async def test_an_approved_call_the_checkpoint_no_longer_carries_is_refused_up_front(
    edit: Edit,
) -> None:
    """Guards: each clause of the pending-invocation match in ``_recomputed_hash`` (call id,
    carried request id, agent, tool name). Without one, the restore starts a new attempt and
    only the call-time check refuses, after the checkpoint was already rewritten."""
    store = InMemoryStore()
    ran: list[tuple[str, int]] = []
    worker, other = script(("c1", 7)), script(("c1", 7))

    def team() -> Team:
        return Team(
            "t",
            [
                AgentConfig("worker", adapter=worker, tools=money_tools(ran)),
                AgentConfig("other", adapter=other, tools=money_tools(ran)),
            ],
        )

    first = await OpenMultiAgent(on_tool_call=lambda call: Suspend("review")).run_tasks(
        team(), [Task("pay", "pay it", id="A", assignee="worker")], checkpoint=options(store)
    )
    [request] = first.pending_approvals
    await decide(store, request, "approve")
    stored = await edit_checkpoint(store, edit)
    calls_before = (worker.call_count, other.call_count)

    with pytest.raises(DurableApprovalError) as caught:
        await OpenMultiAgent().restore(team(), checkpoint=options(store))
    assert caught.value.code == "APPROVAL_STALE_DECISION"
    assert f"request {request.id} no longer identifies the pending invocation" in str(caught.value)
    assert ran == []
    assert (worker.call_count, other.call_count) == calls_before
    entry = await store.get(checkpoint_key(RUN))
    assert entry is not None
    assert entry.value == stored  # refused before a new attempt was written


async def test_a_rejected_call_never_runs_on_the_approval_of_its_sibling() -> None:
    """Guard: ``_attach`` gives a decision only to the call carrying the request it decides.
    Attached to every call of the turn, the approval of ``c2`` (decided last) also let ``c1``,
    which the reviewer rejected, run."""
    store = InMemoryStore()
    ran: list[tuple[str, int]] = []
    adapter = script(("c1", 1), ("c2", 2))
    team = Team("t", [AgentConfig("worker", adapter=adapter, tools=money_tools(ran))])
    first = await OpenMultiAgent(on_tool_call=lambda call: Suspend("review")).run_tasks(
        team, [Task("pay", "pay both", id="A")], checkpoint=options(store)
    )
    requests = {request.content["toolCallId"]: request for request in first.pending_approvals}
    assert sorted(requests) == ["c1", "c2"]
    await decide(store, requests["c1"], "reject")
    await decide(store, requests["c2"], "approve")

    restored = await OpenMultiAgent().restore(team, checkpoint=options(store))
    assert restored.success, restored.status
    assert ran == [("charge", 2)]


async def test_a_checkpoint_copied_into_another_run_keeps_no_decision_of_the_first() -> None:
    """Guard: ``_same`` compares the run id of a recorded decision with the ledger's. A
    checkpoint of run ``RUN`` rewritten as run ``copy`` (its identity, its decisions and its
    pending request re-issued for ``copy``) must not carry ``RUN``'s decision into ``copy``."""
    store = InMemoryStore()
    adapter = ScriptedAdapter(lambda messages, opts: answer("done"))
    team = Team("t", [AgentConfig("worker", adapter=adapter)])
    gate = OpenMultiAgent(on_task_dispatch=lambda task: Suspend())
    tasks = [Task("a", "x"), Task("b", "y", depends_on=["a"])]
    first = await gate.run_tasks(team, tasks, checkpoint=options(store))
    [request] = first.pending_approvals
    await decide(store, request, "approve")
    second = await gate.restore(team, checkpoint=options(store))
    assert second.status.code == "suspended"
    assert [d.request_id for d in second.approval_decisions] == [request.id]

    entry = await store.get(checkpoint_key(RUN))
    assert entry is not None
    raw = json.loads(entry.value)
    raw["identity"]["runId"] = "copy"
    for decision in raw["approvalDecisions"]:
        decision["runId"] = "copy"
    for pending in raw["pendingApprovals"]:
        pending["runId"] = "copy"
        pending["id"] = approval_request_id(
            "copy", pending["scope"], pending["boundary"], pending["requestHash"]
        )
    await store.set(checkpoint_key("copy"), json.dumps(raw))
    calls_before = adapter.call_count

    with pytest.raises(DurableApprovalError) as caught:
        await gate.restore(team, checkpoint=options(store, "copy"))
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"
    assert f"decision for {request.id} does not match the primary ledger" in str(caught.value)
    assert adapter.call_count == calls_before
