"""Requests and decisions: creation, OMA JSON, validation (AP-05, AP-06, AP-09, AP-14, AP-15).

T-47..T-50 of ``durable-approval-validation.test.ts``, plus the content builders.
"""

from __future__ import annotations

import copy
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from approval_helpers import REQUESTED_AT, dispatch_request, plan_request, task_json, tool_request

from oma_actors.approvals import (
    PLAN_BOUNDARY,
    approval_request_id,
    content_boundary,
    create_approval_request,
    decision_from_json,
    decision_to_json,
    dispatch_boundary,
    dispatch_content,
    hash_approval_request,
    plan_content,
    request_from_json,
    request_to_json,
    round_boundary,
    round_content,
    tool_call_boundary,
    tool_call_content,
)
from oma_actors.domain.approvals import ApprovalDecision, Reviewer
from oma_actors.errors import DurableApprovalError

VALIDATION = "APPROVAL_VALIDATION_ERROR"
INTEGRITY = "APPROVAL_INTEGRITY_ERROR"


def _tool_content(raw_input: dict[str, Any]) -> dict[str, Any]:
    return tool_call_content(
        tool_name="charge_card",
        raw_input=raw_input,
        input={"amount": 7},
        agent_name="worker",
        task_id="t1",
        tool_call_id="call-1",
    )


def _create(**overrides: Any) -> None:
    arguments: dict[str, Any] = {
        "run_id": "run-1",
        "scope": "tool_call",
        "boundary": "t1:call-1",
        "content": _tool_content({"amount": "7"}),
    }
    create_approval_request(**{**arguments, **overrides})


def _cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


@pytest.mark.parametrize(
    "raw_input",
    [
        {"amount": math.nan},
        _cyclic(),
        {"when": datetime(2026, 1, 1, tzinfo=UTC)},
        {"amount": object()},  # Python has no undefined; an arbitrary object stands in
        {"amount": {1, 2}},  # nor bigint: Python ints are JSON ints, a set stands in
    ],
    ids=["nan", "cycle", "datetime", "object", "set"],
)
def test_t47_non_json_tool_input_is_refused(raw_input: dict[str, Any]) -> None:
    with pytest.raises(DurableApprovalError) as caught:
        _create(content=_tool_content(raw_input))
    assert caught.value.code == VALIDATION
    assert "$.content.rawInput" in str(caught.value) or "$.rawInput" in str(caught.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"run_id": " "}, "runId and boundary must be non-empty"),
        ({"boundary": " "}, "runId and boundary must be non-empty"),
        ({"scope": "plan"}, "does not match content kind"),
        ({"reason": 42}, "reason must be a string"),
        ({"scope": "later"}, "unknown approval scope"),
        ({"content": {"kind": "tool_call"}}, "invalid approval content"),
    ],
)
def test_t48_create_validates_its_inputs(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(DurableApprovalError, match=message) as caught:
        _create(**overrides)
    assert caught.value.code == VALIDATION


def test_create_trims_copies_and_cuts_to_milliseconds() -> None:
    raw_input = {"amount": "7"}
    request = create_approval_request(
        run_id="  run-1 ",
        scope="tool_call",
        boundary=" t1:call-1 ",
        content=_tool_content(raw_input),
        requested_at=datetime(2026, 1, 2, 3, 4, 5, 678999, tzinfo=UTC),
    )
    raw_input["amount"] = "7000"  # the caller's dict changes afterwards
    assert request.content["rawInput"] == {"amount": "7"}
    assert (request.run_id, request.boundary) == ("run-1", "t1:call-1")
    assert request.requested_at == REQUESTED_AT
    assert request.request_hash == hash_approval_request("tool_call", "t1:call-1", request.content)
    assert request.id == approval_request_id(
        "run-1", "tool_call", "t1:call-1", request.request_hash
    )


def test_content_builders_follow_ap06() -> None:
    one, two, three = task_json("t1", status="completed"), task_json("t2"), task_json("t3")
    plan = plan_content([one, two], "plan_only")
    assert plan == {"kind": "plan", "continuation": "plan_only", "tasks": [one, two]}
    assert content_boundary(plan) == PLAN_BOUNDARY == "coordinator-plan"
    dispatch = dispatch_content(two)
    assert dispatch == {"kind": "task_dispatch", "task": two}
    assert content_boundary(dispatch) == dispatch_boundary(two) == "t2"
    rounds = round_content([one], [two, three])
    assert rounds == {"kind": "task_round", "completedTasks": [one], "nextTasks": [two, three]}
    assert content_boundary(rounds) == round_boundary([one], [two, three]) == "t1->t2,t3"
    tool = _tool_content({"amount": "7"})
    assert tool == {
        "kind": "tool_call",
        "toolName": "charge_card",
        "rawInput": {"amount": "7"},
        "input": {"amount": 7},
        "agentName": "worker",
        "taskId": "t1",
        "toolCallId": "call-1",
        "consequential": False,
    }
    assert content_boundary(tool) == tool_call_boundary("t1", "call-1") == "t1:call-1"


@pytest.mark.parametrize("make", [tool_request, dispatch_request, plan_request])
def test_request_json_round_trips_exactly(make: Any) -> None:
    request = make()
    raw = request_to_json(request)
    assert raw["version"] == 1
    assert raw["requestedAt"] == "2026-01-02T03:04:05.678Z"
    assert set(raw) >= {"id", "runId", "scope", "boundary", "requestHash", "content"}
    assert request_from_json(raw) == request


def test_reason_is_omitted_when_absent() -> None:
    assert "reason" not in request_to_json(tool_request(reason=None))
    assert request_from_json(request_to_json(tool_request(reason=None))).reason is None


def _edit(path: str, value: Any) -> Any:
    def apply(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = raw
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        key: Any = int(last) if isinstance(target, list) else last
        if value is _DELETE:
            del target[key]
        else:
            target[key] = value

    return apply


_DELETE = object()


@pytest.mark.parametrize(
    ("make", "path", "value", "message"),
    [
        (tool_request, "version", 2, "unsupported version"),
        (tool_request, "version", True, "unsupported version"),
        (tool_request, "id", "apr_xyz", "is not apr_"),
        (tool_request, "id", "apr_" + "f" * 32, "id does not match"),
        (tool_request, "requestedAt", "yesterday", "requestedAt is not a parseable date"),
        (tool_request, "runId", 5, "no valid runId"),
        (tool_request, "boundary", 5, "no valid boundary"),
        (tool_request, "scope", "other", "unknown scope"),
        (tool_request, "requestHash", "abc", "not 64 hex"),
        (tool_request, "requestHash", "0" * 64, "does not match its requestHash"),
        (tool_request, "reason", None, "reason that is not a string"),
        (tool_request, "content", None, "content must be an object"),
        (plan_request, "content", None, "content must be an object"),
        (plan_request, "content.continuation", "later", "continuation"),
        (plan_request, "content.tasks", "t1", "plan tasks must be an array"),
        (plan_request, "content.tasks.0", {}, "not a task snapshot"),
        (plan_request, "content.tasks.0.createdAt", 5, "createdAt must be a string"),
        (plan_request, "scope", "task_round", "does not match content kind"),
        (dispatch_request, "content.task", "t1", "dispatch task"),
        (tool_request, "content.toolName", _DELETE, "toolName must be a string"),
        (tool_request, "content.rawInput", [1], "rawInput must be an object"),
        (tool_request, "content.consequential", "yes", "consequential must be a boolean"),
        (tool_request, "content.rawInput.amount", math.inf, "not canonical JSON"),
        (tool_request, "content.kind", "shell", "unknown content kind"),
        (tool_request, "content.rawInput.amount", "7000", "does not match its requestHash"),
    ],
)
def test_t49_request_validation_refuses(make: Any, path: str, value: Any, message: str) -> None:
    raw = copy.deepcopy(request_to_json(make()))
    _edit(path, value)(raw)
    with pytest.raises(DurableApprovalError, match=message) as caught:
        request_from_json(raw)
    assert caught.value.code == INTEGRITY


def test_t49_round_content_validation() -> None:
    completed, upcoming = [task_json("t1", status="completed")], [task_json("t2")]
    request = create_approval_request(
        run_id="run-1",
        scope="task_round",
        boundary=round_boundary(completed, upcoming),
        content=round_content(completed, upcoming),
    )
    assert request_from_json(request_to_json(request)) == request
    raw = request_to_json(request)
    raw["content"] = {**raw["content"], "nextTasks": "t2"}
    with pytest.raises(DurableApprovalError, match="round nextTasks must be an array"):
        request_from_json(raw)


def test_t49_non_object_request_is_refused() -> None:
    with pytest.raises(DurableApprovalError, match="must be an object") as caught:
        request_from_json(["not", "a", "request"])
    assert caught.value.code == INTEGRITY


def _decision(**overrides: Any) -> dict[str, Any]:
    request = tool_request()
    decision = ApprovalDecision(
        request_id=request.id,
        run_id=request.run_id,
        scope=request.scope,
        request_hash=request.request_hash,
        decision="approved",
        reviewer=Reviewer("finance@example.com", "Finance"),
        decided_at=REQUESTED_AT,
    )
    return {**decision_to_json(decision), **overrides}


def test_t50_valid_decision_binds_and_round_trips() -> None:
    raw = _decision()
    assert raw["reviewer"] == {"id": "finance@example.com", "displayName": "Finance"}
    assert raw["decidedAt"] == "2026-01-02T03:04:05.678Z"
    parsed = decision_from_json(raw, request=tool_request())
    assert decision_to_json(parsed) == raw


@pytest.mark.parametrize(
    ("overrides", "code", "message"),
    [
        ({"version": 2}, INTEGRITY, "unsupported version"),
        ({"decision": "pending"}, INTEGRITY, "not 'approved' or 'rejected'"),
        ({"reviewer": {"id": "  "}}, VALIDATION, "reviewer id must be a non-empty string"),
        ({"reviewer": {"id": "a", "displayName": 7}}, VALIDATION, "displayName must be a string"),
        ({"reviewer": "a"}, VALIDATION, "no reviewer object"),
        ({"decidedAt": "soon"}, INTEGRITY, "decidedAt is not a parseable date"),
        ({"requestId": "apr_1"}, INTEGRITY, "requestId is not apr_"),
        ({"runId": " "}, INTEGRITY, "has no runId"),
        ({"scope": "other"}, INTEGRITY, "unknown scope"),
        ({"requestHash": "x"}, INTEGRITY, "not 64 hex"),
        ({"runId": "run-2"}, INTEGRITY, "does not bind the pending request"),
        ({"requestHash": "0" * 64}, INTEGRITY, "does not bind the pending request"),
        ({"scope": "plan"}, INTEGRITY, "does not bind the pending request"),
    ],
)
def test_t50_decision_validation_refuses(
    overrides: dict[str, Any], code: str, message: str
) -> None:
    with pytest.raises(DurableApprovalError, match=message) as caught:
        decision_from_json(_decision(**overrides), request=tool_request())
    assert caught.value.code == code


def test_t50_unbound_decision_needs_no_request() -> None:
    assert decision_from_json(_decision(runId="run-2")).run_id == "run-2"


def test_a_huge_stored_value_is_quoted_cut_with_an_ellipsis() -> None:
    from oma_actors.approvals.content import content_problem

    problem = content_problem({"kind": "x" * 10_000}) or ""
    assert problem.startswith("unknown content kind 'xxx")
    assert problem.endswith("…")
    assert len(problem) == 200
