"""Gaps the load-time validator once had, now closed: values the decoder could not map, spec
rules it did not enforce. Each case must be refused with a ``CheckpointError``.
"""

from __future__ import annotations

import json

import pytest
from checkpoint_support import KEY
from validator_support import (
    Mutation,
    Raw,
    _call,
    _entry,
    _set,
    _top,
    valid_v4,
    valid_v4_with_approval,
)

from oma_actors.checkpoint import decode
from oma_actors.errors import CheckpointError

# -- values the decoder could not map: refused as CheckpointError ----------------------------


def _agent_result(raw: Raw) -> Raw:
    result: Raw = raw["completedTaskResults"][0]["agentResult"]
    return result


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(
            lambda raw: raw["queue"]["tasks"][0].__setitem__("status", "done"), id="task-status"
        ),
        pytest.param(
            lambda raw: raw["queue"]["tasks"][1].__setitem__("dependsOn", 5), id="task-dependsOn"
        ),
        pytest.param(
            lambda raw: raw["queue"]["tasks"][1].__setitem__("maxRetries", "x"), id="maxRetries"
        ),
        pytest.param(lambda raw: raw["queue"]["tasks"].append("t-9"), id="task-not-object"),
        pytest.param(
            lambda raw: _agent_result(raw).__setitem__("messages", [{"role": "system"}]),
            id="message-role",
        ),
        pytest.param(
            lambda raw: _agent_result(raw)["messages"][0]["content"].append({"type": "video"}),
            id="unknown-block",
        ),
        pytest.param(
            lambda raw: _entry(raw)["conversationMessages"].append({"role": "user", "content": 1}),
            id="message-content",
        ),
        pytest.param(
            lambda raw: _agent_result(raw).__setitem__("tokenUsage", "lots"),
            id="agentResult-tokenUsage-string",
        ),
        pytest.param(
            lambda raw: _agent_result(raw).__setitem__("toolCalls", ["fetch_page"]),
            id="agentResult-toolCalls-string",
        ),
        pytest.param(
            lambda raw: _entry(raw)["toolCalls"].append("fetch_page"),
            id="in-flight-toolCalls-string",
        ),
        pytest.param(
            lambda raw: _agent_result(raw)["messages"][0]["content"].append(
                {"type": "image", "source": "https://example.com/x.png"}
            ),
            id="image-source-string",
        ),
    ],
)
def test_malformed_inner_values_raise_checkpoint_error(mutate: Mutation) -> None:
    raw = valid_v4()
    mutate(raw)
    with pytest.raises(CheckpointError):
        decode(json.dumps(raw), key=KEY)


# -- rules of the spec the validator enforces -------------------------------------------------


def _request(raw: Raw) -> Raw:
    request: Raw = _call(raw, 1)["approvalRequest"]
    return request


def _retarget_request(raw: Raw) -> None:
    for request in (_request(raw), raw["pendingApprovals"][0]):
        request["content"] = {**request["content"], "toolCallId": "toolu_other"}


def _rescope_request(raw: Raw) -> None:
    for request in (_request(raw), raw["pendingApprovals"][0]):
        request["scope"] = "task_dispatch"


def _unbound_decision(raw: Raw) -> None:
    for decision in (_call(raw, 1)["approvalDecision"], raw["approvalDecisions"][0]):
        decision["requestHash"] = "0" * 64


def _unlisted_decision(raw: Raw) -> None:
    raw["approvalDecisions"] = []


def _bad_request_id(raw: Raw) -> None:
    for request in (_request(raw), raw["pendingApprovals"][0]):
        request["id"] = "request-1"
    _call(raw, 1)["approvalDecision"]["requestId"] = "request-1"
    raw["approvalDecisions"][0]["requestId"] = "request-1"


def _v5(raw: Raw) -> Raw:
    raw["version"] = 5
    raw["journalWatermarkSeq"] = 57
    return raw


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        pytest.param(
            _set(_top, "metadata", {"Experiment": "x"}),
            "metadata",
            id="metadata-key-uppercase",
        ),
        pytest.param(
            _set(_top, "metadata", {"oma.internal": "x"}),
            "metadata",
            id="metadata-key-oma-prefix",
        ),
        pytest.param(
            _set(_top, "metadata", {"nested": {"a": 1}}),
            "metadata",
            id="metadata-value-object",
        ),
        pytest.param(
            _set(_top, "metadata", {f"k{i}": i for i in range(33)}),
            "metadata",
            id="metadata-33-entries",
        ),
        pytest.param(_retarget_request, "approval", id="request-toolCallId-mismatch"),
        pytest.param(_rescope_request, "approval", id="request-scope"),
        pytest.param(_bad_request_id, "approval", id="request-id-pattern"),
        pytest.param(_unbound_decision, "approval", id="decision-does-not-bind"),
        pytest.param(_unlisted_decision, "approval", id="in-flight-decision-unlisted"),
        pytest.param(
            lambda raw: _v5(raw).__setitem__("journalRef", "runs/x.jsonl"),
            "journalRef",
            id="journalRef-string",
        ),
        pytest.param(
            lambda raw: _v5(raw).__setitem__("journalRef", {"path": "runs/x.jsonl"}),
            "journalRef",
            id="journalRef-without-kind",
        ),
        pytest.param(
            lambda raw: _entry(_v5(raw)).__setitem__("journalSeq", -1),
            "journalSeq",
            id="journalSeq-negative",
        ),
        pytest.param(
            lambda raw: _entry(_v5(raw)).__setitem__("conversationLineage", [[None]]),
            "conversationLineage",
            id="conversationLineage-length",
        ),
        pytest.param(
            lambda raw: _entry(_v5(raw)).__setitem__("conversationLineage", [[None], [[0]]]),
            "conversationLineage",
            id="conversationLineage-seq-zero",
        ),
    ],
)
def test_spec_rules_not_yet_enforced(mutate: Mutation, fragment: str) -> None:
    raw = valid_v4_with_approval(decided=True)
    mutate(raw)
    with pytest.raises(CheckpointError) as info:
        decode(json.dumps(raw), key=KEY)
    assert fragment in str(info.value)
