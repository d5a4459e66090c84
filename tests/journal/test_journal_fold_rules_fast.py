"""The fold rules' fast paths judge as their general paths (P5: parse only what a rule needs).

``tool/call`` is checked on the raw call object when it is a plain ``tool_use`` block, and on
the block ``block_from_json`` builds otherwise: the same acceptance and the same rejection
(reason included) either way. A ``tool/result`` rebuilds its pending call field by field: every
member other than the commit stays.
"""

from __future__ import annotations

from typing import Any

import pytest

from oma_actors.domain.approvals import ApprovalRequest
from oma_actors.domain.inflight import PendingCall, RunnerState
from oma_actors.domain.jsonforms import block_from_json, record_from_json_once, usage_from_json
from oma_actors.domain.messages import (
    Message,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.domain.snapshot import InFlightTask
from oma_actors.journal import JournalEvent
from oma_actors.journal.fold_rules import TailRejected, apply_event

CALL = ToolUseBlock("c1", "note", {"text": "a"})


def entry(*pending: PendingCall) -> InFlightTask:
    state = RunnerState(
        phase="executing_tools",
        conversation=(
            Message("user", [TextBlock("go")]),
            Message("assistant", [p.call for p in pending]),
        ),
        pending=pending,
    )
    return InFlightTask(task_id="t", assignee="w", state=state, journal_seq=2)


def event(kind: str, seq: int = 3, **data: Any) -> JournalEvent:
    return JournalEvent(
        seq=seq,
        type=kind,
        run_id="r",
        attempt=1,
        timestamp_unix_ms=1,
        task_id="t",
        agent_name="w",
        data=data,
    )


def outcome(item: InFlightTask, call: Any) -> str:
    try:
        after = apply_event(item, event("tool/call", call=call), enforce_lineage=False)
    except TailRejected as rejected:
        return f"rejected: {rejected.reason}"
    return "folded" if after.state == item.state else "changed"


class Name(str):
    """A str subclass: not a plain call (the general path reads it)."""


PLAIN = {"type": "tool_use", "id": "c1", "name": "note", "input": {"text": "a"}}
CALLS: dict[str, Any] = {
    "plain": PLAIN,
    "no input": {"type": "tool_use", "id": "c1", "name": "note"},
    "null input": {**PLAIN, "input": None},
    "empty list input": {**PLAIN, "input": []},
    "pairs input": {**PLAIN, "input": [["k", "v"]]},
    "bad list input": {**PLAIN, "input": [1]},
    "text input": {**PLAIN, "input": "x"},
    "other id": {**PLAIN, "id": "c9"},
    "other name": {**PLAIN, "name": "other"},
    "numeric id": {**PLAIN, "id": 1},
    "no id": {"type": "tool_use", "name": "note"},
    "no name": {"type": "tool_use", "id": "c1"},
    "subclass name": {**PLAIN, "name": Name("note")},
    "text block": {"type": "text", "text": "hi"},
    "no type": {"id": "c1", "name": "note"},
    "not an object": ["tool_use"],
    "null": None,
}
EXPECTED = {
    "plain": "folded",
    "no input": "folded",
    "null input": "folded",
    "empty list input": "folded",
    "pairs input": "folded",
    "subclass name": "folded",
    "other id": "rejected: tool/call at seq 3 (task 't') for call 'c9': no assistant turn "
    "requesting it",
    "other name": "rejected: tool/call at seq 3 (task 't') for call 'c1': no assistant turn "
    "requesting it",
    "numeric id": "rejected: tool/call at seq 3 (task 't') for call '1': no assistant turn "
    "requesting it",
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_tool_call_is_judged_as_its_block_would_be(name: str) -> None:
    got = outcome(entry(PendingCall(call=CALL)), CALLS[name])
    if name in EXPECTED:
        assert got == EXPECTED[name]
    else:
        # Malformed: the reason is the general path's (the block's own error).
        assert got.startswith("rejected: tool/call at seq 3 is malformed: "), got


def test_a_tool_call_outside_a_tool_round_is_refused() -> None:
    item = entry(PendingCall(call=CALL))
    item = InFlightTask(
        task_id="t",
        assignee="w",
        state=RunnerState(phase="awaiting_model", conversation=item.state.conversation),
        journal_seq=2,
    )
    assert outcome(item, PLAIN).endswith("for call 'c1': no assistant turn requesting it")


def test_a_result_commits_its_call_and_keeps_its_other_members() -> None:
    request = ApprovalRequest.__new__(ApprovalRequest)  # only carried, never read
    pending = PendingCall(call=CALL, dispatched=True, approval_request=request)
    other = PendingCall(call=ToolUseBlock("c2", "note", {}))
    result = {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}
    after = apply_event(
        entry(pending, other),
        event("tool/result", toolCallId="c1", result=result),
        enforce_lineage=False,
    )
    first, second = after.state.pending
    assert first.commit is not None
    assert first.commit.block.content == "ok"
    assert (first.call, first.dispatched, first.approval_request) == (CALL, True, request)
    assert first.approval_decision is None
    assert second == other


def test_a_numeric_name_is_read_as_its_text_as_the_block_reads_it() -> None:
    # ``block_from_json`` reads ``"name": 1`` as the name "1": the call of tool "1" is requested.
    numeric = PendingCall(call=ToolUseBlock("c1", "1", {}))
    assert outcome(entry(numeric), {**PLAIN, "name": 1}) == "folded"


USAGES: list[Any] = [
    None,
    {},
    {"input_tokens": 3, "output_tokens": 4},
    {"input_tokens": 3},
    {"input_tokens": True, "output_tokens": "5"},
    {"input_tokens": 2.0, "output_tokens": 1},
]


@pytest.mark.parametrize("raw", USAGES)
def test_an_answers_usage_adds_as_usage_from_json_reads_it(raw: Any) -> None:
    item = InFlightTask(
        task_id="t",
        assignee="w",
        state=RunnerState(
            phase="awaiting_model",
            conversation=(Message("user", [TextBlock("go")]),),
            token_usage=TokenUsage(10, 20),
        ),
        journal_seq=2,
    )
    message = {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
    data = {"message": message} if raw is None else {"message": message, "usage": raw}
    after = apply_event(item, event("assistant/message", **data), enforce_lineage=False)
    assert after.state.token_usage == TokenUsage(10, 20) + usage_from_json(raw)


RECORDS: list[Any] = [
    None,
    {},
    {"duration": 7},
    {"duration": True},
    {"duration": "7"},
    {"duration": 7, "output": "other"},
    {"toolName": "renamed", "input": {"x": 1}},
]


@pytest.mark.parametrize("raw", RECORDS)
def test_a_results_record_reads_as_record_from_json_once(raw: Any) -> None:
    result = {"type": "tool_result", "tool_use_id": "c1", "content": "ok", "is_error": True}
    data: dict[str, Any] = {"toolCallId": "c1", "result": result}
    if raw is not None:
        data["record"] = raw
    after = apply_event(
        entry(PendingCall(call=CALL)), event("tool/result", **data), enforce_lineage=False
    )
    commit = after.state.pending[0].commit
    assert commit is not None
    if raw is None:
        return  # the record rebuilt from the call (no record on OMA's event): not a fast path
    block = block_from_json(result)
    assert isinstance(block, ToolResultBlock)
    expected = record_from_json_once(raw, CALL, block)
    assert (expected.tool_call_id, expected.is_error) == ("c1", True)  # its result's
    assert commit.record == expected
    assert commit.record.input is not CALL.input  # a copy, as record_from_json makes
