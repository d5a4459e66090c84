"""Bases and one-rule mutations for the load-time validator tests.

A base is a valid v4 snapshot with two in-flight tasks (``executing_tools`` with one committed
and one uncommitted call, and ``awaiting_model``); each mutation breaks exactly one rule of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from checkpoint_support import KEY, decision_for, golden_json, tool_call_request

from oma_actors.checkpoint import decode
from oma_actors.errors import CheckpointError

Raw = dict[str, Any]
Mutation = Callable[[Raw], object]

EXECUTING = 0  # inFlightTasks[0]: executing_tools, call 0 committed, call 1 not
AWAITING = 1  # inFlightTasks[1]: awaiting_model


def valid_v4() -> Raw:
    """The v3 golden lifted to v4: in-flight state plus empty approval lists."""
    raw = golden_json("v3.json")
    raw["version"] = 4
    raw["pendingApprovals"] = []
    raw["approvalDecisions"] = []
    return raw


def valid_v4_with_approval(*, decided: bool = False) -> Raw:
    """v4 whose uncommitted call waits on a durable tool_call approval, listed at top level."""
    raw = valid_v4()
    entry = raw["inFlightTasks"][EXECUTING]
    pending = entry["pendingToolCalls"][1]
    request = tool_call_request(
        raw["identity"]["runId"], entry["taskId"], entry["assignee"], pending["call"]
    )
    pending["approvalRequest"] = request
    raw["pendingApprovals"] = [request]
    if decided:
        decision = decision_for(request)
        pending["approvalDecision"] = decision
        raw["approvalDecisions"] = [decision]
    return raw


def _entry(raw: Raw, index: int = EXECUTING) -> Raw:
    entry: Raw = raw["inFlightTasks"][index]
    return entry


def _call(raw: Raw, index: int = 0) -> Raw:
    call: Raw = _entry(raw)["pendingToolCalls"][index]
    return call


def _commit(raw: Raw) -> Raw:
    commit: Raw = _call(raw, 0)["commit"]
    return commit


def _set(target: Callable[[Raw], Raw], key: str, value: Any) -> Mutation:
    return lambda raw: target(raw).__setitem__(key, value)


def _drop(target: Callable[[Raw], Raw], key: str) -> Mutation:
    return lambda raw: target(raw).pop(key)


def _top(raw: Raw) -> Raw:
    return raw


def _identity(raw: Raw) -> Raw:
    identity: Raw = raw["identity"]
    return identity


def _queue(raw: Raw) -> Raw:
    queue: Raw = raw["queue"]
    return queue


def _awaiting(raw: Raw) -> Raw:
    return _entry(raw, AWAITING)


def _usage(raw: Raw) -> Raw:
    usage: Raw = _entry(raw)["tokenUsage"]
    return usage


def _call_block(raw: Raw) -> Raw:
    block: Raw = _call(raw, 1)["call"]
    return block


def _result(raw: Raw) -> Raw:
    result: Raw = _commit(raw)["result"]
    return result


def _record(raw: Raw) -> Raw:
    record: Raw = _commit(raw)["record"]
    return record


def _duplicate_in_flight(raw: Raw) -> None:
    raw["inFlightTasks"][AWAITING]["taskId"] = raw["inFlightTasks"][EXECUTING]["taskId"]


def _listed_twice(raw: Raw) -> None:
    request = raw["pendingApprovals"][0]
    raw["pendingApprovals"].append(dict(request))


def _decided_twice(raw: Raw) -> None:
    raw["approvalDecisions"].append(dict(raw["approvalDecisions"][0]))


def _hide_request(raw: Raw) -> None:
    raw["pendingApprovals"] = []


def _foreign_request(raw: Raw) -> None:
    raw["pendingApprovals"][0] = {**raw["pendingApprovals"][0], "runId": "someone-elses-run"}


def _foreign_decision(raw: Raw) -> None:
    raw["approvalDecisions"][0] = {**raw["approvalDecisions"][0], "runId": "someone-elses-run"}


def _decision_without_request(raw: Raw) -> None:
    request = tool_call_request(raw["identity"]["runId"], "t", "a", _call(raw, 1)["call"])
    _call(raw, 1)["approvalDecision"] = decision_for(request)


def _commit_and_request(raw: Raw) -> None:
    call = _call(raw, 0)
    request = tool_call_request(raw["identity"]["runId"], "t", "a", call["call"])
    call["approvalRequest"] = request
    raw["pendingApprovals"] = [request]


def _queue_v2(raw: Raw) -> None:
    raw["queue"]["version"] = 2
    raw["queue"]["planRevisions"] = []


def _queue_v2_without_history(raw: Raw) -> None:
    raw["queue"]["version"] = 2
    raw["queue"]["planRevision"] = 0


def _v5_without_watermark(raw: Raw) -> None:
    raw["version"] = 5


def _v5_negative_watermark(raw: Raw) -> None:
    raw["version"] = 5
    raw["journalWatermarkSeq"] = -1


def _pending_text_outside(raw: Raw) -> None:
    _awaiting(raw)["pendingToolResultText"] = "Warning: you are repeating yourself."


def _pending_calls_outside(raw: Raw) -> None:
    _awaiting(raw)["pendingToolCalls"] = _entry(raw)["pendingToolCalls"]


def _completed_without_output(raw: Raw) -> None:
    _awaiting(raw)["phase"] = "completed"


def _assert_refused(raw: Raw, fragment: str) -> None:
    text = json.dumps(raw)
    with pytest.raises(CheckpointError) as info:
        decode(text, key=KEY)
    assert type(info.value) is CheckpointError
    message = str(info.value)
    assert f'"{KEY}" is not a checkpoint snapshot' in message
    assert fragment in message
