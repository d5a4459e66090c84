"""What ``encode(decode(x))`` must keep of an OMA snapshot, and what ``encode`` must refuse.

Restoring an OMA-written checkpoint and saving again goes through these two functions; a field
dropped here is lost for every later attempt of the run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from checkpoint_support import KEY, decision_for, golden_json, make_snapshot, tool_call_request

from oma_actors.checkpoint import decode, encode
from oma_actors.errors import CheckpointError

Raw = dict[str, Any]


def _v4() -> Raw:
    raw = golden_json("v3.json")
    raw.update(version=4, pendingApprovals=[], approvalDecisions=[])
    return raw


def _rewritten(raw: Raw) -> Raw:
    value: Raw = json.loads(encode(decode(json.dumps(raw), key=KEY)))
    return value


def _executing(raw: Raw) -> Raw:
    entry: Raw = raw["inFlightTasks"][0]
    return entry


def _with_approval(raw: Raw) -> Callable[[Raw], Any]:
    entry = _executing(raw)
    pending = entry["pendingToolCalls"][1]
    request = tool_call_request(
        raw["identity"]["runId"], entry["taskId"], entry["assignee"], pending["call"]
    )
    decision = decision_for(request)
    pending.update(approvalRequest=request, approvalDecision=decision)
    raw.update(pendingApprovals=[request], approvalDecisions=[decision])
    return lambda out: {
        key: _executing(out)["pendingToolCalls"][1].get(key)
        for key in ("approvalRequest", "approvalDecision")
    }


def _with_delegation(raw: Raw) -> Callable[[Raw], Any]:
    commit = _executing(raw)["pendingToolCalls"][0]["commit"]
    commit["delegationUsage"] = {"input_tokens": 300, "output_tokens": 41}
    return lambda out: _executing(out)["pendingToolCalls"][0]["commit"].get("delegationUsage")


def _with_loop_warning(raw: Raw) -> Callable[[Raw], Any]:
    _executing(raw)["pendingToolResultText"] = "You called fetch_page twice with the same input."
    return lambda out: _executing(out).get("pendingToolResultText")


def _with_flags(raw: Raw) -> Callable[[Raw], Any]:
    _executing(raw).update(loopWarned=True, loopDetected=False, budgetExceeded=False)
    return lambda out: {
        flag: _executing(out).get(flag) for flag in ("loopWarned", "loopDetected", "budgetExceeded")
    }


def _with_plan_revisions(raw: Raw) -> Callable[[Raw], Any]:
    # OMA's PlanRevision (queue v2): the trigger failed, was recovered, and one task was added.
    tasks = raw["queue"]["tasks"]
    revision = {
        "id": "6f0c1f02-a7de-44fe-b495-8f56d28ed1f7",
        "version": 1,
        "triggerTaskId": tasks[0]["id"],
        "trigger": "failure",
        "reason": "replace the failed lookup",
        "addedTasks": {"retry": tasks[-1]["id"]},
        "retargetedTasks": [],
        "supersededTaskIds": [],
        "createdAt": "2025-11-05T11:59:00.000Z",
    }
    tasks[0]["recoveredByRevision"] = 1
    raw["queue"].update(version=2, planRevision=1, planRevisions=[revision])
    return lambda out: {
        "queue": {
            key: out["queue"].get(key) for key in ("version", "planRevision", "planRevisions")
        },
        "recovered": out["queue"]["tasks"][0].get("recoveredByRevision"),
    }


@pytest.mark.parametrize(
    "prepare",
    [
        pytest.param(_with_approval, id="in-flight-approval"),
        pytest.param(_with_delegation, id="commit-delegationUsage"),
        pytest.param(_with_loop_warning, id="pendingToolResultText"),
        pytest.param(_with_flags, id="loop-and-budget-flags"),
        pytest.param(_with_plan_revisions, id="queue-v2-plan-revisions"),
    ],
)
def test_re_encoding_keeps_oma_fields(prepare: Callable[[Raw], Callable[[Raw], Any]]) -> None:
    raw = _v4()
    read = prepare(raw)
    expected = read(raw)
    assert decode(json.dumps(raw), key=KEY)  # the input is a valid snapshot
    assert read(_rewritten(raw)) == expected
    # Nothing else changed but our revision; content blocks are re-rendered from their typed
    # form, which writes a tool result's ``is_error: false`` as absent (OMA reads both alike).
    assert _without_false_is_error(_rewritten(raw)) == _without_false_is_error(raw) | {
        "revision": 0
    }


def _without_false_is_error(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: _without_false_is_error(item)
            for key, item in value.items()
            if not (key == "is_error" and item is False)
        }
    if isinstance(value, list):
        return [_without_false_is_error(item) for item in value]
    return value


def test_re_encoding_keeps_what_the_typed_model_holds() -> None:
    raw = _v4()
    out = _rewritten(raw)
    before, after = _executing(raw), _executing(out)
    assert after["conversationMessages"] == before["conversationMessages"]
    assert after["pendingToolCalls"][0]["call"] == before["pendingToolCalls"][0]["call"]
    assert after["pendingToolCalls"][1] == before["pendingToolCalls"][1]
    result = after["pendingToolCalls"][0]["commit"]["result"]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_01Fetch0000000000000001",
        "content": "Our plan: $11/month.",
    }  # "is_error": false is omitted, which OMA reads the same way
    assert out["inFlightTasks"][1]["conversationMessages"][4]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01Calc00000000000000004", "content": "6"}
    ]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_encode_refuses_non_finite_numbers(value: float) -> None:
    snapshot = make_snapshot(metadata={"score": value})
    with pytest.raises(CheckpointError, match="cannot be serialized"):
        encode(snapshot)


def test_encode_output_is_strict_json_for_finite_values() -> None:
    text = encode(make_snapshot(metadata={"score": 0.25, "runs": 3}))
    json.loads(text, parse_constant=lambda name: pytest.fail(f"non-JSON literal {name}"))
