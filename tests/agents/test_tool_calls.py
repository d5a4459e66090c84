"""The decision before a pending tool call runs (``oma_actors.agents.tool_calls``), case by case."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from oma_actors.agents.tool_calls import (
    OUTCOME_UNKNOWN,
    STALE,
    Answer,
    CallPolicy,
    Execute,
    Park,
    error_outcome,
    plan_call,
    reconcile,
    verify_approved,
)
from oma_actors.approvals import (
    create_approval_request,
    hash_approval_request,
    tool_call_boundary,
    tool_call_content,
)
from oma_actors.approvals.gates import Allow, Deny, Suspend, ToolCallRequest
from oma_actors.domain.approvals import ApprovalDecision, Reviewer
from oma_actors.domain.inflight import PendingCall
from oma_actors.domain.messages import ToolUseBlock
from oma_actors.errors import DurableApprovalError
from oma_actors.testing.clock import FakeClock
from oma_actors.tools.base import Tool, ToolContext, ToolResult, define_tool


class WriteInput(BaseModel):
    name: str
    overwrite: bool = False


async def _never(args: Any, ctx: ToolContext) -> ToolResult:
    raise AssertionError("plan_call never runs a tool")


def write_tool(**changes: Any) -> Tool:
    tool = define_tool(
        name="write", description="write a file", input_model=WriteInput, execute=_never
    )
    return replace(tool, **changes)


TOOLS = {"write": write_tool()}
CALL = ToolUseBlock("c1", "write", {"name": "a.md"})
CTX = ToolContext(run_id="run-1", task_id="t1", tool_call_id="c1", agent_name="writer")
ALLOW_SUSPEND = CallPolicy(can_suspend=True)


def content(call: ToolUseBlock = CALL, *, input: dict[str, Any] | None = None) -> dict[str, Any]:
    return tool_call_content(
        tool_name=call.name,
        raw_input=call.input,
        input=input or {"name": "a.md", "overwrite": False},
        agent_name="writer",
        task_id="t1",
        tool_call_id=call.id,
    )


def approved(decision: str = "approved", **request_changes: Any) -> PendingCall:
    request = create_approval_request(
        run_id="run-1", scope="tool_call", boundary="t1:c1", content=content()
    )
    request = replace(request, **request_changes)
    verdict = ApprovalDecision(
        request_id=request.id,
        run_id="run-1",
        scope="tool_call",
        request_hash=request.request_hash,
        decision=decision,  # type: ignore[arg-type]
        reviewer=Reviewer("ada"),
        decided_at=datetime(2025, 1, 2, tzinfo=UTC),
    )
    return PendingCall(call=CALL, approval_request=request, approval_decision=verdict)


class Gate:
    """Answers ``answer`` (or raises it) and records what it was asked."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.asked: list[ToolCallRequest] = []

    def __call__(self, request: ToolCallRequest) -> Any:
        self.asked.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def error_text(plan: object) -> str:
    assert isinstance(plan, Answer)
    assert plan.outcome.block.is_error
    assert plan.outcome.record.is_error
    return str(plan.outcome.block.content)


async def test_without_a_gate_a_call_executes() -> None:
    assert await plan_call(PendingCall(call=CALL), TOOLS, CTX, CallPolicy()) == Execute()


async def test_the_gate_sees_the_validated_and_the_raw_input() -> None:
    gate = Gate(Allow())
    plan = await plan_call(PendingCall(call=CALL), TOOLS, CTX, CallPolicy(gate=gate))
    assert plan == Execute()
    [asked] = gate.asked
    assert asked.input == {"name": "a.md", "overwrite": False}  # defaults filled in
    assert asked.raw_input == {"name": "a.md"}
    assert (asked.run_id, asked.task_id, asked.agent_name) == ("run-1", "t1", "writer")
    assert (asked.tool_call_id, asked.tool_name) == ("c1", "write")


async def test_the_gate_is_not_asked_about_an_unknown_tool() -> None:
    gate = Gate(Deny("never"))
    call = ToolUseBlock("c1", "unknown_tool", {})  # the executor answers "not available"
    assert await plan_call(PendingCall(call=call), TOOLS, CTX, CallPolicy(gate=gate)) == Execute()
    assert gate.asked == []


@pytest.mark.parametrize(
    ("gate", "effect"), [(Gate(Deny("never")), "idempotent"), (None, "unsafe")]
)
async def test_input_the_tool_refuses_is_answered_before_anything_is_dispatched(
    gate: Gate | None, effect: str
) -> None:
    # An Answer, not an Execute: no dispatch record is written (an unsafe tool's) for a call
    # that cannot run, so a crash cannot leave it "outcome unknown"; the gate is not asked.
    call = ToolUseBlock("c1", "write", {"name": 3})
    tools = {"write": write_tool(effect=effect)}
    plan = await plan_call(PendingCall(call=call), tools, CTX, CallPolicy(gate=gate))
    assert error_text(plan).startswith("Error: invalid input for tool 'write': name:")
    assert gate is None or gate.asked == []


async def test_an_idempotent_call_without_a_gate_is_validated_once_by_the_executor() -> None:
    # Nothing is dispatched for it: planning leaves the input to the executor (one parse).
    call = ToolUseBlock("c1", "write", {"name": 3})
    assert await plan_call(PendingCall(call=call), TOOLS, CTX, CallPolicy()) == Execute()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (Deny("too risky"), 'Tool "write" denied by onToolCall: too risky'),
        (Deny(), 'Tool "write" denied by onToolCall'),
        (False, 'Tool "write" denied by onToolCall'),
        (ValueError("boom"), 'Tool "write" onToolCall hook threw an error: ValueError: boom'),
        ("yes", 'Tool "write" onToolCall hook threw an error: gate answered'),
    ],
)
async def test_a_refusing_or_failing_gate_answers_an_error_without_running(
    answer: object, expected: str
) -> None:
    plan = await plan_call(PendingCall(call=CALL), TOOLS, CTX, CallPolicy(gate=Gate(answer)))
    text = error_text(plan)
    assert text.startswith(expected)
    if expected.endswith("onToolCall"):
        assert text == expected  # no reason, no dangling suffix


@pytest.mark.parametrize(
    ("policy", "ctx"),
    [
        (CallPolicy(can_suspend=False), CTX),
        (ALLOW_SUSPEND, replace(CTX, run_id=None)),
        (ALLOW_SUSPEND, replace(CTX, task_id=None)),
    ],
)
async def test_suspension_fails_closed_where_it_cannot_be_durable(
    policy: CallPolicy, ctx: ToolContext
) -> None:
    gated = replace(policy, gate=Gate(Suspend("review")))
    plan = await plan_call(PendingCall(call=CALL), TOOLS, ctx, gated)
    assert "requested suspension, but durable tool approval requires" in error_text(plan)


async def test_suspension_parks_the_call_on_a_request_binding_the_reviewed_content() -> None:
    clock = FakeClock(datetime(2025, 3, 4, 5, 6, 7, 891234, tzinfo=UTC))
    policy = CallPolicy(gate=Gate(Suspend("needs a human")), can_suspend=True, clock=clock)
    plan = await plan_call(PendingCall(call=CALL), TOOLS, CTX, policy)
    assert isinstance(plan, Park)
    request = plan.request
    assert (request.run_id, request.scope, request.reason) == (
        "run-1",
        "tool_call",
        "needs a human",
    )
    assert request.boundary == tool_call_boundary("t1", "c1") == "t1:c1"
    assert request.content == content()
    assert request.request_hash == hash_approval_request("tool_call", "t1:c1", content())
    assert request.requested_at == datetime(2025, 3, 4, 5, 6, 7, 891000, tzinfo=UTC)


async def test_a_call_already_parked_stays_parked_without_asking_the_gate() -> None:
    parked = replace(approved(), approval_decision=None)
    gate = Gate(Allow())
    plan = await plan_call(parked, TOOLS, CTX, CallPolicy(gate=gate))
    assert plan == Park(parked.approval_request)  # type: ignore[arg-type]
    assert gate.asked == []


async def test_a_rejected_call_answers_an_error_and_never_runs() -> None:
    plan = await plan_call(approved("rejected"), TOOLS, CTX, CallPolicy(gate=Gate(Allow())))
    assert error_text(plan) == 'Tool "write" denied by durable approval.'


async def test_an_approved_call_runs_once_it_still_matches_what_was_reviewed() -> None:
    gate = Gate(Deny("the gate is not asked again"))
    assert await plan_call(approved(), TOOLS, CTX, CallPolicy(gate=gate)) == Execute()
    assert gate.asked == []


async def test_an_approved_call_whose_tool_is_gone_is_stale() -> None:
    with pytest.raises(DurableApprovalError, match="no longer granted") as caught:
        await plan_call(approved(), {}, CTX, CallPolicy())
    assert caught.value.code == STALE


class StricterInput(BaseModel):
    name: int


async def test_an_approved_call_the_current_schema_refuses_is_stale() -> None:
    tools = {"write": write_tool(input_model=StricterInput)}
    with pytest.raises(DurableApprovalError, match="no longer accepts") as caught:
        verify_approved(approved(), tools, CTX)
    assert caught.value.code == STALE


async def test_an_approved_call_whose_content_changed_is_stale() -> None:
    item = approved(request_hash="f" * 64)  # reviewed something else
    with pytest.raises(DurableApprovalError, match="differs from the reviewed content") as caught:
        verify_approved(item, TOOLS, CTX)
    assert caught.value.code == STALE
    # The same call for another agent hashes differently too: the agent is part of the content.
    with pytest.raises(DurableApprovalError, match="differs"):
        verify_approved(approved(), TOOLS, replace(CTX, agent_name="intruder"))


def test_a_decision_without_its_request_is_an_integrity_error() -> None:
    item = replace(approved(), approval_request=None)
    with pytest.raises(DurableApprovalError) as caught:
        verify_approved(item, TOOLS, CTX)
    assert caught.value.code == "APPROVAL_INTEGRITY_ERROR"


async def test_a_dispatched_call_is_reconciled_even_with_an_approval() -> None:
    # Dispatched means it may have run: nothing, not even an approval, may run it again.
    item = replace(approved(), dispatched=True)
    plan = await plan_call(item, TOOLS, CTX, CallPolicy(gate=Gate(Allow())))
    assert isinstance(plan, Answer)
    assert plan.unknown is True
    assert error_text(plan).startswith(f"{OUTCOME_UNKNOWN}: tool 'write' was started")


async def test_reconcile_uses_the_tools_verdict_when_it_has_one() -> None:
    seen: list[ToolContext] = []

    async def settled(ctx: ToolContext) -> ToolResult | None:
        seen.append(ctx)
        return ToolResult("it was written")

    item = PendingCall(call=CALL, dispatched=True)
    plan = await reconcile(item, write_tool(reconcile=settled), CTX)
    assert plan.unknown is False
    assert plan.outcome.block.content == "it was written"
    assert plan.outcome.block.tool_use_id == "c1"
    assert seen == [CTX]


async def test_reconcile_without_a_verdict_reports_an_unknown_outcome() -> None:
    async def unsure(ctx: ToolContext) -> ToolResult | None:
        return None

    item = PendingCall(call=CALL, dispatched=True)
    for tool in (write_tool(reconcile=unsure), write_tool(), None):
        plan = await reconcile(item, tool, CTX)
        assert plan.unknown is True
        assert OUTCOME_UNKNOWN in error_text(plan)


def test_error_outcome_is_a_model_visible_error_for_the_call() -> None:
    outcome = error_outcome(PendingCall(call=CALL), "nope")
    assert outcome.block.tool_use_id == "c1"
    assert outcome.block.content == "nope"
    assert outcome.block.is_error
    assert outcome.record.tool_name == "write"
    assert outcome.record.input == {"name": "a.md"}
    assert outcome.record.duration_ms == 0
