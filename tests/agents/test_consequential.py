"""Consequential tools in the runner: the hashed flag, and OMA's confirmation guard."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from oma_actors.agents.config import AgentConfig
from oma_actors.agents.consequential import (
    CONFIRMATION_REJECTED,
    CONFIRMATION_REQUIRED,
    ConfirmationState,
    confirmed,
    consequential_tools,
    guard_tool_gate,
    recording_plan_gate,
)
from oma_actors.agents.tool_calls import (
    STALE,
    CallPolicy,
    Execute,
    Park,
    plan_call,
    verify_approved,
)
from oma_actors.approvals import create_approval_request
from oma_actors.approvals.gates import (
    Allow,
    Deny,
    Gate,
    GateAnswer,
    Suspend,
    ToolCallRequest,
    consult,
)
from oma_actors.domain.approvals import ApprovalDecision, Reviewer
from oma_actors.domain.inflight import PendingCall
from oma_actors.domain.messages import ToolUseBlock
from oma_actors.domain.results import AgentRunResult, RunOutcome
from oma_actors.errors import DurableApprovalError
from oma_actors.tools.base import Tool, ToolContext, define_tool


class Amount(BaseModel):
    amount: int


async def _never(args: Any, ctx: ToolContext) -> str:
    raise AssertionError("no tool runs here")


def charge(*, consequential: bool = True) -> Tool:
    return define_tool(
        name="charge_card",
        description="charge",
        input_model=Amount,
        execute=_never,
        consequential=consequential,
    )


CALL = ToolUseBlock("call-1", "charge_card", {"amount": "7"})
CTX = ToolContext(run_id="run-1", task_id="t1", tool_call_id="call-1", agent_name="worker")


def oma_hash(content: dict[str, Any]) -> str:
    """OMA's requestHash, computed here without our canonical module (ASCII content only)."""
    envelope = {"boundary": "t1:call-1", "content": content, "scope": "tool_call"}
    text = json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


OMA_CONTENT = {
    "kind": "tool_call",
    "toolName": "charge_card",
    "rawInput": {"amount": "7"},
    "input": {"amount": 7},
    "agentName": "worker",
    "taskId": "t1",
    "toolCallId": "call-1",
    "consequential": True,
}


@pytest.mark.parametrize("flag", [True, False])
async def test_a_suspended_call_binds_the_tools_flag_as_oma_hashes_it(flag: bool) -> None:
    policy = CallPolicy(gate=lambda call: Suspend("Finance review"), can_suspend=True)
    plan = await plan_call(
        PendingCall(call=CALL), {"charge_card": charge(consequential=flag)}, CTX, policy
    )
    assert isinstance(plan, Park)
    expected = {**OMA_CONTENT, "consequential": flag}
    assert plan.request.content == expected
    assert plan.request.request_hash == oma_hash(expected)


def approved_by_oma(content: dict[str, Any]) -> PendingCall:
    request = create_approval_request(
        run_id="run-1", scope="tool_call", boundary="t1:call-1", content=content
    )
    assert request.request_hash == oma_hash(content)
    decision = ApprovalDecision(
        request_id=request.id,
        run_id="run-1",
        scope="tool_call",
        request_hash=request.request_hash,
        decision="approved",
        reviewer=Reviewer("finance@example.com"),
        decided_at=datetime(2026, 1, 2, tzinfo=UTC),
    )
    return PendingCall(call=CALL, approval_request=request, approval_decision=decision)


def test_an_oma_approval_of_a_consequential_call_passes_the_hash_check() -> None:
    item = approved_by_oma(OMA_CONTENT)
    verify_approved(item, {"charge_card": charge()}, CTX)  # no error: the call may run once


def test_an_approval_is_stale_once_the_tools_flag_changed_since_review() -> None:
    item = approved_by_oma(OMA_CONTENT)
    with pytest.raises(DurableApprovalError) as info:
        verify_approved(item, {"charge_card": charge(consequential=False)}, CTX)
    assert info.value.code == STALE
    reviewed_benign = approved_by_oma({**OMA_CONTENT, "consequential": False})
    with pytest.raises(DurableApprovalError):
        verify_approved(reviewed_benign, {"charge_card": charge()}, CTX)


# -- the confirmation guard --------------------------------------------------------------------


def request(tool: str = "charge_card", agent: str = "worker") -> ToolCallRequest:
    return ToolCallRequest(
        run_id=None,
        task_id=None,
        agent_name=agent,
        tool_call_id="call-1",
        tool_name=tool,
        input={"amount": 7},
        raw_input={"amount": "7"},
    )


GUARDED = frozenset({("worker", "charge_card")})


def test_consequential_tools_lists_each_agents_flagged_tools() -> None:
    agents = [
        AgentConfig("worker", tools=[charge(), replace(charge(consequential=False), name="quote")]),
        AgentConfig("reader", tools=[replace(charge(consequential=False), name="look")]),
    ]
    assert consequential_tools(agents) == GUARDED


async def test_other_calls_go_to_the_gate_or_run() -> None:
    state = ConfirmationState()
    assert await consult(guard_tool_gate(None, GUARDED, state), request("quote")) == Allow()
    denied = guard_tool_gate(lambda call: Deny("no"), GUARDED, state)
    assert await consult(denied, request("quote")) == Deny("no")
    # The same tool name on another agent is not the guarded grant.
    assert await consult(denied, request(agent="reader")) == Deny("no")
    assert state == ConfirmationState()  # only consequential calls count


@pytest.mark.parametrize(
    ("answer", "rejected"),
    [(Allow(), False), (True, False), (Suspend("review"), False), (Deny(), True), (False, True)],
)
async def test_a_consequential_call_is_handed_to_the_gate(
    answer: GateAnswer, rejected: bool
) -> None:
    asked: list[ToolCallRequest] = []

    async def gate(call: ToolCallRequest) -> GateAnswer:
        asked.append(call)
        return answer

    state = ConfirmationState(plan_approved=True)  # the gate decides even after a plan approval
    guarded: Gate = guard_tool_gate(gate, GUARDED, state)
    verdict = await consult(guarded, request())
    assert asked == [request()]
    assert verdict == (Allow() if answer is True else Deny() if answer is False else answer)
    assert state.confirmation_rejected is rejected
    assert state.confirmation_required is False


async def test_a_raising_gate_counts_as_a_rejection_and_still_fails_the_call() -> None:
    def gate(call: ToolCallRequest) -> bool:
        raise RuntimeError("review service down")

    state = ConfirmationState()
    verdict = await consult(guard_tool_gate(gate, GUARDED, state), request())
    assert type(verdict).__name__ == "GateFailed"
    assert state.confirmation_rejected is True


async def test_without_a_gate_a_consequential_call_needs_an_approved_plan() -> None:
    state = ConfirmationState()
    guarded = guard_tool_gate(None, GUARDED, state)
    assert await consult(guarded, request()) == Deny(CONFIRMATION_REQUIRED)
    assert state.confirmation_required is True
    approved = ConfirmationState(plan_approved=True)
    assert await consult(guard_tool_gate(None, GUARDED, approved), request()) == Allow()
    assert approved.confirmation_required is False


@pytest.mark.parametrize(
    ("answer", "approved"),
    [(True, True), (Allow(), True), (False, False), (Deny(), False), (Suspend(), False)],
)
async def test_only_an_allowed_plan_confirms(answer: GateAnswer, approved: bool) -> None:
    state = ConfirmationState()
    verdict = await consult(recording_plan_gate(lambda tasks: answer, state), ["task"])
    assert state.plan_approved is approved
    assert verdict == (Allow() if answer is True else Deny() if answer is False else answer)


def test_confirmed_rejects_the_run_as_oma_does() -> None:
    result = AgentRunResult(success=True, output="done")
    assert confirmed(result, None) is result
    assert confirmed(result, ConfirmationState(plan_approved=True)) is result
    required = confirmed(result, ConfirmationState(confirmation_required=True))
    assert (required.success, required.confirmation_required) == (False, True)
    assert required.status == RunOutcome("rejected", CONFIRMATION_REQUIRED)
    both = ConfirmationState(confirmation_required=True, confirmation_rejected=True)
    assert confirmed(result, both).status == RunOutcome("rejected", CONFIRMATION_REQUIRED)
    rejected = confirmed(result, ConfirmationState(confirmation_rejected=True))
    assert (rejected.success, rejected.confirmation_required) == (False, False)
    assert rejected.status == RunOutcome("rejected", CONFIRMATION_REJECTED)


async def test_the_guard_works_inside_plan_call() -> None:
    state = ConfirmationState()
    policy = CallPolicy(gate=guard_tool_gate(None, GUARDED, state))
    plan = await plan_call(PendingCall(call=CALL), {"charge_card": charge()}, CTX, policy)
    assert not isinstance(plan, Execute)
    assert "Consequential tool confirmation required" in str(plan.outcome.block.content)  # type: ignore[union-attr]
