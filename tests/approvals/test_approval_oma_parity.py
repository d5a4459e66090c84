"""Approvals as OMA v1.16.1 has them: JavaScript trim, event shapes, rejection texts, stale decisions.

Each test names the OMA source it follows (``packages/core/src``). The expected request ids were
computed by Node 20 with OMA's formula (``approval/durable.ts`` 125-196: ``stableJson``, then
``apr_`` + sha256(``runId.trim()``, scope, ``boundary.trim()``, hash)).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from approval_helpers import REQUESTED_AT
from pydantic import BaseModel, Field

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
    Deny,
    DurableApprovalLedger,
    Reviewer,
    Suspend,
    create_approval_request,
    decide_approval,
    decision_from_json,
    decision_to_json,
    get_approval_record,
    request_from_json,
    request_to_json,
    tool_call_content,
)
from oma_actors.approvals.canonical import js_trim
from oma_actors.approvals.gates import ToolCallRequest
from oma_actors.events import AgentCompleted, ApprovalPending, ProgressEvent
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RUN = "run-parity"

# What ("a" + c + "x").trim() removes in Node 20 for every BMP code point c: computed with
# `String.fromCharCode(c) + "x").trim() === "x"`.
NODE_TRIMMED = [
    0x9, 0xA, 0xB, 0xC, 0xD, 0x20, 0xA0, 0x1680, *range(0x2000, 0x200B),
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF,
]  # fmt: skip


def _content() -> dict[str, Any]:
    return tool_call_content(
        tool_name="charge_card",
        raw_input={"amount": "7"},
        input={"amount": 7},
        agent_name="worker",
        task_id="t1",
        tool_call_id="call-1",
        consequential=True,
    )


# -- 5: JavaScript trim ---------------------------------------------------------------------------


def test_js_trim_removes_exactly_what_javascript_trim_removes() -> None:
    removed = [
        code
        for code in range(0x10000)
        if not 0xD800 <= code <= 0xDFFF and js_trim(chr(code) + "x") == "x"
    ]
    assert removed == NODE_TRIMMED
    assert js_trim("\ufeff run\x1c\x1d\x1e\x1f\x85 \u3000") == "run\x1c\x1d\x1e\x1f\x85"


@pytest.mark.parametrize(
    ("run_id", "boundary", "expected_run_id", "expected_boundary", "expected_id"),
    [
        ("run-1\x1c", "t1:call-1", "run-1\x1c", "t1:call-1", "apr_5f2a3ab31a989790aa0486c7ccf9c81d"),
        ("\ufeffrun-1\ufeff", "\ufefft1:call-1", "run-1", "t1:call-1",
         "apr_c1cb064b5569184b2fa545cbd6fc01a0"),
        ("run-1\x85", "t1:call-1", "run-1\x85", "t1:call-1", "apr_0295201cde46de978373c659f39f6592"),
        ("run-1", "t1:call-1\x1f", "run-1", "t1:call-1\x1f", "apr_0c08eae2484003820687d91723930af5"),
    ],
)  # fmt: skip
def test_request_ids_trim_like_oma(
    run_id: str, boundary: str, expected_run_id: str, expected_boundary: str, expected_id: str
) -> None:
    # durable.ts 159-160, 184: runId and boundary are trim()med before hashing and the id.
    request = create_approval_request(
        run_id=run_id,
        scope="tool_call",
        boundary=boundary,
        content=_content(),
        requested_at=REQUESTED_AT,
    )
    assert (request.run_id, request.boundary, request.id) == (
        expected_run_id, expected_boundary, expected_id,
    )  # fmt: skip
    # The row OMA writes for it is read back as the same request (no "invalid runId").
    assert request_from_json(json.loads(json.dumps(request_to_json(request)))) == request


def test_a_run_id_of_control_characters_is_not_blank() -> None:
    # durable.ts 378: a decision's runId must satisfy runId.trim().length > 0; "\x1c" does.
    request = create_approval_request(
        run_id="\x1c", scope="tool_call", boundary="t1:call-1", content=_content()
    )
    assert request.run_id == "\x1c"
    raw = {
        "version": 1,
        "requestId": request.id,
        "runId": "\x1c",
        "scope": "tool_call",
        "requestHash": request.request_hash,
        "decision": "approved",
        "reviewer": {"id": "\x1f"},
        "decidedAt": "2026-01-02T03:04:05.678Z",
    }
    decision = decision_from_json(raw, request=request)
    assert (decision.run_id, decision.reviewer.id) == ("\x1c", "\x1f")


def test_a_stored_reviewer_is_read_as_it_is_stored() -> None:
    # durable.ts 207-220 (assertReviewer) checks a stored reviewer and keeps it; the restore
    # compares ids as stored (orchestrator.ts 3173-3184). Only decide() trims (durable.ts 536).
    request = create_approval_request(
        run_id="r", scope="tool_call", boundary="t1:call-1", content=_content()
    )
    raw = {
        "version": 1,
        "requestId": request.id,
        "runId": "r",
        "scope": "tool_call",
        "requestHash": request.request_hash,
        "decision": "rejected",
        "reviewer": {"id": " bob\x1c", "displayName": "Bob"},
        "decidedAt": "2026-01-02T03:04:05.678Z",
    }
    decision = decision_from_json(raw, request=request)
    assert decision.reviewer == Reviewer(" bob\x1c", "Bob")
    assert decision_to_json(decision)["reviewer"] == {"id": " bob\x1c", "displayName": "Bob"}


async def test_decide_records_the_reviewer_id_trimmed_like_oma() -> None:
    store = InMemoryStore()
    request = create_approval_request(
        run_id="r", scope="tool_call", boundary="t1:call-1", content=_content()
    )
    await DurableApprovalLedger(store).ensure_request(request)
    await decide_approval(
        store,
        request_id=request.id,
        request_hash=request.request_hash,
        decision="reject",
        reviewer=Reviewer("\ufeff bob\x1c\n"),
    )
    record = await get_approval_record(store, request.id)
    assert record is not None
    assert record.decision is not None
    assert record.decision.reviewer.id == "bob\x1c"  # "\ufeff bob\x1c\n".trim() in Node
    assert json.loads(record.raw)["decision"]["reviewer"] == {"id": "bob\x1c"}


# -- 4: plan rejection text -----------------------------------------------------------------------

PLAN = [{"title": "Research", "description": "find facts", "assignee": "worker"}]


def _answer(text: str) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(1, 1))


@pytest.mark.parametrize("reason", [None, "too risky"])
async def test_a_denied_plan_says_what_oma_says_whatever_the_reason(reason: str | None) -> None:
    # orchestrator.ts 1892-1899: statusOnly('rejected', 'Plan approval rejected.'); a deny
    # reason of onPlanReady is not part of the result.
    workers = ScriptedAdapter([_answer("facts")])
    result = await OpenMultiAgent(on_plan_ready=lambda tasks: Deny(reason)).run_team(
        Team("t", [AgentConfig("worker", adapter=workers)]),
        "goal",
        coordinator=AgentConfig(
            "coordinator", adapter=ScriptedAdapter([_answer(json.dumps(PLAN))])
        ),
    )
    assert (result.status.code, result.status.message) == ("rejected", "Plan approval rejected.")
    assert workers.call_count == 0


# -- 2, 3: events of a tool call's suspension -----------------------------------------------------


class Charge(BaseModel):
    amount: int = Field(le=10_000)


class SmallCharge(BaseModel):
    amount: int = Field(le=5)


def _charge_tool(executions: list[int], model: type[BaseModel] = Charge):  # type: ignore[no-untyped-def]
    async def run(args: BaseModel, ctx: ToolContext) -> str:
        executions.append(args.amount)  # type: ignore[attr-defined]
        return "charged"

    return define_tool(name="charge_card", description="charge", input_model=model, execute=run)


def _script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    if len(messages) > 1:
        return _answer("after")
    return LLMResponse(
        [ToolUseBlock("call-1", "charge_card", {"amount": "7"})],
        stop_reason="tool_use",
        usage=TokenUsage(1, 1),
    )


def _team(adapter: ScriptedAdapter, tools: Sequence[object]) -> Team:
    return Team("t", [AgentConfig("worker", adapter=adapter, tools=tools)])  # type: ignore[arg-type]


def _options(store: InMemoryStore) -> CheckpointOptions:
    return CheckpointOptions(store=store, run_id=RUN)


async def _suspend(store: InMemoryStore, events: list[ProgressEvent]) -> Any:
    def gate(call: ToolCallRequest) -> Suspend:
        return Suspend("Finance review")

    adapter = ScriptedAdapter(_script)
    first = await OpenMultiAgent(on_tool_call=gate, on_progress=events.append).run_tasks(
        _team(adapter, [_charge_tool([])]), [Task("pay", "pay it")], checkpoint=_options(store)
    )
    assert first.status.code == "suspended"
    return first, adapter


async def test_a_tool_calls_approval_pending_names_its_task_and_agent() -> None:
    # task-execution.ts 1186-1195: {type: 'approval_pending', task: task.id, agent: assignee}.
    events: list[ProgressEvent] = []
    first, _ = await _suspend(InMemoryStore(), events)
    [pending] = [e for e in events if isinstance(e, ApprovalPending)]
    [request] = first.pending_approvals
    assert pending.request == request
    assert (pending.task_id, pending.agent) == (first.tasks[0].id, "worker")


async def test_a_dispatch_approval_pending_names_no_task_as_in_oma() -> None:
    # task-execution.ts 345-372 (persistPendingApproval): {type: 'approval_pending', data} only.
    events: list[ProgressEvent] = []
    first = await OpenMultiAgent(
        on_task_dispatch=lambda task: Suspend("review"), on_progress=events.append
    ).run_tasks(
        _team(ScriptedAdapter([_answer("done")]), []),
        [Task("a", "x")],
        checkpoint=_options(InMemoryStore()),
    )
    assert first.status.code == "suspended"
    [pending] = [e for e in events if isinstance(e, ApprovalPending)]
    assert (pending.task_id, pending.agent) == (None, None)


async def test_a_task_suspended_on_a_tool_approval_reports_its_agent_complete() -> None:
    # task-execution.ts 1414-1431: a suspended result still emits agent_complete (task, agent).
    events: list[ProgressEvent] = []
    first, _ = await _suspend(InMemoryStore(), events)
    done = [e for e in events if isinstance(e, AgentCompleted)]
    assert [(e.task_id, e.agent) for e in done] == [(first.tasks[0].id, "worker")]
    assert done[0].result.output == ""  # agent.ts 501: the runner's output, the turn's text


# -- 1: a rejection of a call that changed since is stale -----------------------------------------


@pytest.mark.parametrize("change", ["schema", "tool gone"])
async def test_a_rejection_of_a_changed_tool_call_is_stale(change: str) -> None:
    # tool/executor.ts 213-247: the current validated call is re-hashed BEFORE the decision is
    # looked at, so a rejected decision for another call is stale; agent/runner.ts 1416-1429,
    # 1480-1485: a reviewed tool no longer granted throws APPROVAL_STALE_DECISION too.
    store = InMemoryStore()
    first, adapter = await _suspend(store, [])
    [request] = first.pending_approvals
    await decide_approval(
        store,
        request_id=request.id,
        request_hash=request.request_hash,
        decision="reject",
        reviewer=Reviewer("reviewer-2"),
    )
    executions: list[int] = []
    tools = [_charge_tool(executions, SmallCharge)] if change == "schema" else []
    calls_before = adapter.call_count
    with pytest.raises(DurableApprovalError) as caught:
        await OpenMultiAgent().restore(_team(adapter, tools), checkpoint=_options(store))
    assert caught.value.code == "APPROVAL_STALE_DECISION"
    assert executions == []
    assert adapter.call_count == calls_before  # the model never saw a denial
