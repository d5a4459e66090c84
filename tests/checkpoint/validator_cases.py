"""The negative cases of the load-time validator (CK-11..CK-18): a mutation, its message."""

from __future__ import annotations

from typing import Any

import pytest
from validator_support import (
    _awaiting,
    _call,
    _call_block,
    _commit,
    _commit_and_request,
    _completed_without_output,
    _decided_twice,
    _decision_without_request,
    _drop,
    _duplicate_in_flight,
    _entry,
    _foreign_decision,
    _foreign_request,
    _hide_request,
    _identity,
    _listed_twice,
    _pending_calls_outside,
    _pending_text_outside,
    _queue,
    _queue_v2,
    _queue_v2_without_history,
    _record,
    _result,
    _set,
    _top,
    _usage,
    _v5_negative_watermark,
    _v5_without_watermark,
)

CASES: list[Any] = [
    # CK-11: the common base
    pytest.param(_set(_top, "mode", "runEverything"), "mode 'runEverything'", id="mode-unknown"),
    pytest.param(_drop(_top, "mode"), "mode None is not one of", id="mode-missing"),
    pytest.param(_set(_top, "createdAt", 1741945613), "createdAt is not a string", id="createdAt"),
    pytest.param(_drop(_top, "createdAt"), "createdAt is not a string", id="createdAt-missing"),
    pytest.param(
        _set(_top, "completedTaskResults", {}),
        "completedTaskResults is not an array",
        id="completedTaskResults-object",
    ),
    pytest.param(
        _drop(_top, "completedTaskResults"),
        "completedTaskResults is not an array",
        id="completedTaskResults-missing",
    ),
    pytest.param(_set(_top, "metadata", ["a"]), "metadata is not an object", id="metadata-array"),
    pytest.param(_set(_top, "metadata", None), "metadata is not an object", id="metadata-null"),
    pytest.param(
        _set(_top, "revision", -1), "revision is not a non-negative integer", id="revision"
    ),
    # CK-12: identity (v >= 2)
    pytest.param(_drop(_top, "identity"), "identity is not an object", id="identity-missing"),
    pytest.param(_set(_top, "identity", "run-1"), "identity is not an object", id="identity-str"),
    pytest.param(_set(_identity, "runId", 7), "identity.runId is not a string", id="runId"),
    pytest.param(_set(_identity, "attempt", 0), "identity.attempt is not an integer >= 1", id="a0"),
    pytest.param(_set(_identity, "attempt", -2), "identity.attempt", id="attempt-negative"),
    pytest.param(_set(_identity, "attempt", 1.5), "identity.attempt", id="attempt-float"),
    pytest.param(_set(_identity, "attempt", True), "identity.attempt", id="attempt-bool"),
    pytest.param(
        _drop(_identity, "lastTraceId"), "identity.lastTraceId is not a string", id="lastTraceId"
    ),
    pytest.param(
        _set(_identity, "lastRootSpanId", None),
        "identity.lastRootSpanId is not a string",
        id="lastRootSpanId",
    ),
    # CK-13: the in-flight list (v >= 3)
    pytest.param(
        _set(_top, "inFlightTasks", {}), "inFlightTasks is not an array", id="inFlight-object"
    ),
    pytest.param(
        _drop(_top, "inFlightTasks"), "inFlightTasks is not an array", id="inFlight-missing"
    ),
    pytest.param(_duplicate_in_flight, "duplicate taskId", id="inFlight-duplicate-taskId"),
    # CK-14: one in-flight entry
    pytest.param(
        lambda raw: raw["inFlightTasks"].append("analyze"),
        "inFlightTasks[2] is not an object",
        id="entry-not-object",
    ),
    pytest.param(
        _set(_entry, "taskId", ""),
        "inFlightTasks[0].taskId is not a non-empty string",
        id="taskId-empty",
    ),
    pytest.param(
        _set(_awaiting, "assignee", ""),
        "inFlightTasks[1].assignee is not a non-empty string",
        id="assignee-empty",
    ),
    pytest.param(
        _drop(_entry, "assignee"),
        "inFlightTasks[0].assignee is not a non-empty string",
        id="assignee-missing",
    ),
    pytest.param(
        _set(_entry, "phase", "thinking"), "inFlightTasks[0].phase 'thinking'", id="phase"
    ),
    pytest.param(
        _set(_entry, "conversationMessages", "hi"),
        "conversationMessages is not an array",
        id="conversationMessages",
    ),
    pytest.param(_drop(_awaiting, "messages"), "messages is not an array", id="messages"),
    pytest.param(_set(_entry, "toolCalls", None), "toolCalls is not an array", id="toolCalls"),
    pytest.param(
        _set(_entry, "turns", -1), "turns is not a non-negative integer", id="turns-negative"
    ),
    pytest.param(_set(_entry, "turns", 1.5), "turns is not a non-negative integer", id="turns-f"),
    pytest.param(
        _set(_usage, "output_tokens", -3),
        "inFlightTasks[0].tokenUsage.output_tokens is not a finite non-negative number",
        id="tokenUsage-negative",
    ),
    pytest.param(
        _set(_usage, "input_tokens", "812"),
        "tokenUsage.input_tokens is not a finite non-negative number",
        id="tokenUsage-string",
    ),
    pytest.param(
        _set(_entry, "tokenUsage", None), "tokenUsage is not an object", id="tokenUsage-null"
    ),
    pytest.param(_set(_entry, "loopWarned", "yes"), "loopWarned is not a boolean", id="flag"),
    pytest.param(
        _drop(_entry, "pendingToolCalls"),
        "pendingToolCalls must be a non-empty array while executing_tools",
        id="executing-without-pending",
    ),
    pytest.param(
        _set(_entry, "pendingToolCalls", []),
        "pendingToolCalls must be a non-empty array while executing_tools",
        id="executing-with-empty-pending",
    ),
    pytest.param(
        _set(_entry, "pendingToolResultText", 3),
        "pendingToolResultText is not a string",
        id="pendingToolResultText-type",
    ),
    pytest.param(
        _pending_calls_outside,
        "inFlightTasks[1] has pending tool calls outside executing_tools",
        id="pendingToolCalls-outside-executing",
    ),
    pytest.param(
        _pending_text_outside,
        "has pending tool calls outside executing_tools",
        id="pendingToolResultText-outside-executing",
    ),
    pytest.param(
        _completed_without_output,
        "inFlightTasks[1].finalOutput must be a string exactly when the phase is completed",
        id="completed-without-finalOutput",
    ),
    pytest.param(
        _set(_awaiting, "finalOutput", "done"),
        "finalOutput must be a string exactly when the phase is completed",
        id="finalOutput-while-awaiting",
    ),
    pytest.param(
        lambda raw: _awaiting(raw).update(phase="completed", finalOutput=42),
        "finalOutput must be a string",
        id="finalOutput-not-string",
    ),
    # CK-15: one pending call
    pytest.param(
        lambda raw: _entry(raw)["pendingToolCalls"].append(None),
        "pendingToolCalls[2] is not an object",
        id="pending-not-object",
    ),
    pytest.param(
        _set(_call_block, "type", "function"),
        "pendingToolCalls[1].call is not a tool_use block",
        id="call-type",
    ),
    pytest.param(
        lambda raw: _call(raw, 1).pop("call"), "call is not a tool_use block", id="call-missing"
    ),
    pytest.param(_set(_call_block, "id", ""), "call.id is not a non-empty string", id="call-id"),
    pytest.param(
        _set(_call_block, "name", ""), "call.name is not a non-empty string", id="call-name"
    ),
    pytest.param(
        _set(_call_block, "input", ["pricing"]), "call.input is not an object", id="call-input"
    ),
    pytest.param(
        _set(_result, "tool_use_id", "different-call"),
        "commit.result.tool_use_id 'different-call' does not match call id",
        id="T-05-commit-tool_use_id-mismatch",
    ),
    pytest.param(
        _set(_result, "type", "text"), "commit.result is not a tool_result block", id="result-type"
    ),
    pytest.param(
        _set(_result, "content", 12), "commit.result.content is not a string", id="content"
    ),
    pytest.param(
        _set(_result, "is_error", "no"), "commit.result.is_error is not a boolean", id="is_error"
    ),
    pytest.param(
        lambda raw: _call(raw, 0).__setitem__("commit", "done"),
        "commit is not an object",
        id="commit-not-object",
    ),
    pytest.param(
        _set(_record, "toolName", "fetch_url"),
        "commit.record.toolName does not match the call",
        id="record-toolName",
    ),
    pytest.param(
        _set(_record, "output", {"text": "x"}),
        "commit.record needs an object input and a string output",
        id="record-output",
    ),
    pytest.param(
        _set(_record, "input", "https://shop.example.com/pricing"),
        "commit.record needs an object input",
        id="record-input",
    ),
    pytest.param(
        _set(_record, "duration", -5),
        "commit.record.duration is not a finite non-negative number",
        id="record-duration-negative",
    ),
    pytest.param(
        lambda raw: _commit(raw).__setitem__("delegationUsage", {"input_tokens": 1}),
        "commit.delegationUsage.output_tokens is not a finite non-negative number",
        id="delegationUsage",
    ),
    pytest.param(
        _decision_without_request,
        "pendingToolCalls[1] has an approvalDecision without an approvalRequest",
        id="decision-without-request",
    ),
    pytest.param(
        _commit_and_request,
        "pendingToolCalls[0] has both a commit and an approval request",
        id="commit-with-request",
    ),
    # CK-16: approvals (v4, v5)
    pytest.param(
        _set(_top, "pendingApprovals", {}),
        "pendingApprovals and approvalDecisions must be arrays",
        id="pendingApprovals-object",
    ),
    pytest.param(
        _drop(_top, "approvalDecisions"),
        "pendingApprovals and approvalDecisions must be arrays",
        id="approvalDecisions-missing",
    ),
    pytest.param(
        _set(_top, "pendingApprovals", [{"runId": "run-v3-pricing"}]),
        "a pending approval is not an object with an id",
        id="pendingApproval-without-id",
    ),
    pytest.param(
        _set(_top, "approvalDecisions", ["approved"]),
        "an approval decision is not an object with a requestId",
        id="decision-not-object",
    ),
]

APPROVAL_CASES: list[Any] = [
    pytest.param(_foreign_request, "belongs to another run", id="pendingApprovals-runId-mismatch"),
    pytest.param(_listed_twice, "appears twice", id="pendingApprovals-duplicate-id"),
    pytest.param(_foreign_decision, "belongs to another run", id="decision-runId-mismatch"),
    pytest.param(_decided_twice, "appears twice", id="decision-duplicate-requestId"),
    pytest.param(_hide_request, "is not listed as pending", id="in-flight-request-not-listed"),
]

QUEUE_AND_JOURNAL_CASES: list[Any] = [
    # CK-17 (v5)
    pytest.param(
        _v5_without_watermark,
        "journalWatermarkSeq is not a non-negative integer",
        id="v5-without-journalWatermarkSeq",
    ),
    pytest.param(
        _v5_negative_watermark,
        "journalWatermarkSeq is not a non-negative integer",
        id="v5-negative-journalWatermarkSeq",
    ),
    # CK-18: the queue
    pytest.param(_drop(_top, "queue"), "queue is not an object", id="queue-missing"),
    pytest.param(_set(_top, "queue", []), "queue is not an object", id="queue-array"),
    pytest.param(_set(_queue, "version", 3), "queue.version 3 is not 1 or 2", id="queue-v3"),
    pytest.param(_drop(_queue, "version"), "queue.version None", id="queue-version-missing"),
    pytest.param(_set(_queue, "tasks", {}), "queue.tasks is not an array", id="queue-tasks"),
    pytest.param(
        _queue_v2,
        "queue v2 needs an integer planRevision and a planRevisions array",
        id="queue-v2-without-planRevision",
    ),
    pytest.param(
        _queue_v2_without_history,
        "queue v2 needs an integer planRevision and a planRevisions array",
        id="queue-v2-without-planRevisions",
    ),
]
