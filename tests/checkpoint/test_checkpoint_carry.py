"""The lossless re-save rule: members another writer put in a checkpoint survive our re-save.

Members we model are written from the typed snapshot (and so follow real state transitions);
every other member of an object is written back from the object it was read from, found by its
identity. These tests add members OMA may write (today or in a later release) at every level of
a snapshot and check what ``encode`` writes back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from checkpoint_support import KEY, decision_for, golden_json, tool_call_request

from oma_actors.checkpoint import decode, encode
from oma_actors.checkpoint.validate import problem
from oma_actors.domain.inflight import RunnerState, ToolCommit
from oma_actors.domain.messages import ToolResultBlock, ToolUseBlock
from oma_actors.domain.results import ToolCallRecord

Raw = dict[str, Any]
Getter = Callable[[Raw], Raw]

COMPLETED_ID = "11111111-2222-4333-8444-555555555555"
EXECUTING_ID = "22222222-3333-4444-8555-666666666666"
FETCH_CALL = "toolu_01Fetch0000000000000001"


def _v4() -> Raw:
    raw = golden_json("v3.json")
    raw.update(version=4, pendingApprovals=[], approvalDecisions=[])
    return raw


def _rewritten(raw: Raw) -> Raw:
    value: Raw = json.loads(encode(decode(json.dumps(raw), key=KEY)))
    return value


def _by(items: list[Raw], key: str, value: str) -> Raw:
    (found,) = [item for item in items if item[key] == value]
    return found


def _executing(raw: Raw) -> Raw:
    return _by(raw["inFlightTasks"], "taskId", EXECUTING_ID)


def _pending(raw: Raw, call_id: str = FETCH_CALL) -> Raw:
    calls: list[Raw] = _executing(raw)["pendingToolCalls"]
    (found,) = [p for p in calls if p["call"]["id"] == call_id]
    return found


def _agent_result(raw: Raw) -> Raw:
    result: Raw = _by(raw["completedTaskResults"], "taskId", COMPLETED_ID)["agentResult"]
    return result


PLACES: list[Any] = [
    pytest.param(lambda raw: raw, "costLedger", {"usd": 0.12}, id="root"),
    pytest.param(lambda raw: raw["identity"], "links", [{"relation": "x"}], id="identity"),
    pytest.param(lambda raw: raw["queue"], "schedulerHint", "fifo", id="queue"),
    pytest.param(lambda raw: raw["queue"]["tasks"][1], "memoryScope", "task", id="task"),
    pytest.param(lambda raw: raw["queue"]["tasks"][3], "requires", ["web"], id="task-requires"),
    pytest.param(lambda raw: raw["sharedMemory"], "namespace", "team", id="shared-memory"),
    pytest.param(lambda raw: raw["sharedMemory"]["entries"][0], "tags", ["a"], id="memory-entry"),
    pytest.param(
        lambda raw: _by(raw["completedTaskResults"], "taskId", COMPLETED_ID),
        "note",
        "kept",
        id="completed-entry",
    ),
    pytest.param(_agent_result, "status", {"code": "ok"}, id="agentResult-status"),
    pytest.param(
        _agent_result,
        "identity",
        {"runId": "r", "attempt": 1, "traceId": "a" * 32, "rootSpanId": "b" * 16},
        id="agentResult-identity",
    ),
    pytest.param(_agent_result, "structured", {"price": 9}, id="agentResult-structured"),
    pytest.param(_executing, "contextWindow", 200000, id="in-flight-entry"),
    pytest.param(_pending, "gateNote", "checked", id="pending-call"),
    pytest.param(lambda raw: _pending(raw)["commit"], "resultMeta", {"x": 1}, id="commit"),
]


@pytest.mark.parametrize(("where", "member", "value"), PLACES)
def test_a_member_we_do_not_model_is_written_back(where: Getter, member: str, value: Any) -> None:
    raw = _v4()
    where(raw)[member] = value
    assert decode(json.dumps(raw), key=KEY)  # still a valid snapshot
    assert where(_rewritten(raw))[member] == value


def test_members_of_approval_records_are_written_back() -> None:
    raw = _v4()
    pending = _pending(raw, "toolu_01Note00000000000000002")
    request = tool_call_request(
        raw["identity"]["runId"], EXECUTING_ID, _executing(raw)["assignee"], pending["call"]
    )
    decision = decision_for(request)
    pending.update(approvalRequest=dict(request, channel="slack"), approvalDecision=decision)
    raw.update(pendingApprovals=[dict(request, channel="slack")])
    raw.update(approvalDecisions=[dict(decision, ticket="OPS-1")])
    out = _rewritten(raw)
    assert out["pendingApprovals"][0]["channel"] == "slack"
    assert out["approvalDecisions"][0]["ticket"] == "OPS-1"
    assert _pending(out, "toolu_01Note00000000000000002")["approvalRequest"]["channel"] == "slack"


def test_a_spelled_out_default_is_kept() -> None:
    raw = _v4()
    _executing(raw).update(loopWarned=False, loopDetected=False, budgetExceeded=False)
    raw["queue"]["tasks"][0].update(maxRetries=0, dependsOn=[])
    _agent_result(raw)["turns"] = 0
    out = _rewritten(raw)
    assert {k: _executing(out)[k] for k in ("loopWarned", "loopDetected", "budgetExceeded")} == {
        "loopWarned": False,
        "loopDetected": False,
        "budgetExceeded": False,
    }
    assert (out["queue"]["tasks"][0]["maxRetries"], out["queue"]["tasks"][0]["dependsOn"]) == (
        0,
        [],
    )
    assert _agent_result(out)["turns"] == 0


def test_what_we_model_follows_the_state_not_the_source() -> None:
    """The runner moved on: stale pending calls, warning text and flags are not written back."""
    raw = _v4()
    _executing(raw).update(pendingToolResultText="You repeat yourself.", loopWarned=True)
    _executing(raw)["loopDetected"] = False  # a spelled-out default the new state contradicts
    snapshot = decode(json.dumps(raw), key=KEY)
    entry = next(item for item in snapshot.in_flight if item.task_id == EXECUTING_ID)
    moved: RunnerState = replace(
        entry.state,
        phase="awaiting_model",
        pending=(),
        pending_tool_result_text=None,
        loop_warned=False,
        loop_detected=True,
    )
    in_flight = tuple(
        replace(item, state=moved) if item is entry else item for item in snapshot.in_flight
    )
    out = json.loads(encode(replace(snapshot, in_flight=in_flight)))
    written = _executing(out)
    assert written["phase"] == "awaiting_model"
    for member in ("pendingToolCalls", "pendingToolResultText", "loopWarned"):
        assert member not in written, member
    assert written["loopDetected"] is True
    assert problem(out) is None


def test_objects_that_are_gone_are_not_brought_back() -> None:
    raw = _v4()
    snapshot = decode(json.dumps(raw), key=KEY)
    out = json.loads(encode(replace(snapshot, in_flight=snapshot.in_flight[1:])))
    assert [entry["taskId"] for entry in out["inFlightTasks"]] == [
        raw["inFlightTasks"][1]["taskId"]
    ]


def test_members_are_matched_by_identity_not_position() -> None:
    raw = _v4()
    _executing(raw)["contextWindow"] = 1
    raw["inFlightTasks"][1]["contextWindow"] = 2
    snapshot = decode(json.dumps(raw), key=KEY)
    out = json.loads(encode(replace(snapshot, in_flight=snapshot.in_flight[::-1])))
    assert {e["taskId"]: e["contextWindow"] for e in out["inFlightTasks"]} == {
        e["taskId"]: e["contextWindow"] for e in raw["inFlightTasks"]
    }


def test_v5_journal_members_are_not_written_into_v4() -> None:
    """We write v4: the journal watermark and lineage describe a journal we do not keep."""
    out = json.loads(encode(decode(json.dumps(golden_json("v5.json")), key=KEY)))
    assert out["version"] == 4
    assert "journalWatermarkSeq" not in out
    assert "journalRef" not in out
    for entry in out["inFlightTasks"]:
        assert "journalSeq" not in entry
        assert "conversationLineage" not in entry
    assert problem(out) is None


def test_a_committed_call_drops_its_approval() -> None:
    """Spec CK-15: a commit may not sit next to a request or decision; the decision stays listed."""
    raw = _v4()
    pending = _pending(raw, "toolu_01Note00000000000000002")
    request = tool_call_request(
        raw["identity"]["runId"], EXECUTING_ID, _executing(raw)["assignee"], pending["call"]
    )
    decision = decision_for(request)
    pending.update(approvalRequest=request, approvalDecision=decision)
    raw.update(pendingApprovals=[request], approvalDecisions=[decision])
    snapshot = decode(json.dumps(raw), key=KEY)
    entry = next(item for item in snapshot.in_flight if item.task_id == EXECUTING_ID)
    calls = tuple(
        replace(item, commit=_commit_of(item.call)) if item.approval_request else item
        for item in entry.state.pending
    )
    state = replace(entry.state, pending=calls)
    in_flight = tuple(
        replace(item, state=state) if item is entry else item for item in snapshot.in_flight
    )
    out = json.loads(encode(replace(snapshot, in_flight=in_flight, pending_approvals=())))
    written = _pending(out, "toolu_01Note00000000000000002")
    assert "commit" in written
    assert "approvalRequest" not in written
    assert "approvalDecision" not in written
    assert out["approvalDecisions"] == [decision]
    assert problem(out) is None


def _commit_of(call: ToolUseBlock) -> ToolCommit:
    record = ToolCallRecord(tool_name=call.name, input=call.input, output="noted", duration_ms=3)
    return ToolCommit(block=ToolResultBlock(call.id, "noted"), record=record)


def test_the_source_message_bus_is_kept() -> None:
    raw = _v4()
    message = {"id": "m1", "from": "a", "to": "b", "content": "hi", "timestamp": "t"}
    raw["messageBus"] = {"version": 1, "messages": [message], "readState": []}
    snapshot = decode(json.dumps(raw), key=KEY)
    # A snapshot built from live state has no bus of its own: the restored one is written.
    out = json.loads(encode(replace(snapshot, message_bus=None)))
    assert out["messageBus"]["messages"] == [message]
    fresh = json.loads(encode(replace(snapshot, message_bus=None, source=None)))
    assert fresh["messageBus"] == {"version": 1, "messages": [], "readState": []}
