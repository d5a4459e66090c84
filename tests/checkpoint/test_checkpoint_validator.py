"""The load-time validator (spec CK-11..CK-18) as ``decode`` applies it, plus schema and JSON errors.

Every case starts from a valid v4 snapshot with two in-flight tasks (``executing_tools`` with one
committed and one uncommitted call, and ``awaiting_model``), breaks exactly one rule, and expects
a ``CheckpointError`` whose message names the problem: a broken value is never "no checkpoint".
The cases are listed in ``validator_cases.py``; the bases and mutations in ``validator_support.py``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from checkpoint_support import KEY, golden_json, golden_text
from validator_cases import APPROVAL_CASES, CASES, QUEUE_AND_JOURNAL_CASES
from validator_support import (
    Mutation,
    _assert_refused,
    _entry,
    _record,
    _result,
    valid_v4,
    valid_v4_with_approval,
)

from oma_actors.checkpoint import decode
from oma_actors.checkpoint.validate import problem
from oma_actors.errors import CheckpointError, UnsupportedSchemaError


def test_the_bases_are_valid() -> None:
    """Each negative case breaks one rule of a snapshot that decodes."""
    assert len(decode(json.dumps(valid_v4()), key=KEY).in_flight) == 2
    pending = decode(json.dumps(valid_v4_with_approval()), key=KEY)
    assert len(pending.pending_approvals) == 1
    decided = decode(json.dumps(valid_v4_with_approval(decided=True)), key=KEY)
    assert decided.approval_decisions[0].decision == "approved"
    v5 = valid_v4()
    v5.update(version=5, journalWatermarkSeq=0)
    assert decode(json.dumps(v5), key=KEY).version == 5
    v2_queue = valid_v4()
    v2_queue["queue"].update(version=2, planRevision=0, planRevisions=[])
    assert decode(json.dumps(v2_queue), key=KEY).version == 4


@pytest.mark.parametrize(("mutate", "fragment"), CASES + QUEUE_AND_JOURNAL_CASES)
def test_validator_refuses(mutate: Mutation, fragment: str) -> None:
    raw = valid_v4()
    mutate(raw)
    _assert_refused(raw, fragment)


@pytest.mark.parametrize(("mutate", "fragment"), APPROVAL_CASES)
def test_validator_refuses_approval_lists(mutate: Mutation, fragment: str) -> None:
    raw = valid_v4_with_approval(decided=True)
    mutate(raw)
    _assert_refused(raw, fragment)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_identity_rules_apply_from_v2(version: int) -> None:
    raw = valid_v4()
    raw["version"] = version
    raw["identity"]["attempt"] = 0
    _assert_refused(raw, "identity.attempt is not an integer >= 1")


def test_v1_needs_no_identity_and_v2_needs_no_in_flight_list() -> None:
    v1 = golden_json("v1_with_run_id.json")
    v1["identity"] = "ignored in v1"
    assert decode(json.dumps(v1), key=KEY).identity is None
    v2 = golden_json("v2.json")
    assert "inFlightTasks" not in v2
    assert decode(json.dumps(v2), key=KEY).version == 2


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1, "1"])
def test_token_usage_must_be_finite_and_non_negative(bad: Any) -> None:
    raw = valid_v4()
    _entry(raw)["tokenUsage"]["input_tokens"] = bad
    assert problem(raw) == (
        "inFlightTasks[0].tokenUsage.input_tokens is not a finite non-negative number"
    )
    with pytest.raises(CheckpointError):
        decode(json.dumps(raw), key=KEY)  # json.dumps writes NaN/Infinity as bare literals


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_commit_duration_must_be_finite(bad: float) -> None:
    raw = valid_v4()
    _record(raw)["duration"] = bad
    found = problem(raw)
    assert found is not None
    assert "duration is not a finite non-negative number" in found


def test_rich_commit_content_is_accepted() -> None:
    """D8 (LM-21 fixed): a commit's content may be a block list, not only a string."""
    raw = valid_v4()
    _result(raw)["content"] = [
        {"type": "text", "text": "Our plan: $11/month."},
        {"type": "image", "source": {"type": "url", "url": "https://shop.example.com/p.png"}},
    ]
    snapshot = decode(json.dumps(raw), key=KEY)
    commit = snapshot.in_flight[0].state.pending[0].commit
    assert commit is not None
    assert isinstance(commit.block.content, list)


# -- schema versions and JSON ------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 6, 99, -1, "4", None, 4.5, [4]])
def test_unknown_schema_versions_are_unsupported(version: Any) -> None:
    raw = valid_v4()
    raw["version"] = version
    with pytest.raises(UnsupportedSchemaError) as info:
        decode(json.dumps(raw), key=KEY)
    assert info.value.version == version
    assert info.value.supported == (1, 2, 3, 4, 5)
    assert f"unsupported checkpoint schema version {version!r}" in str(info.value)


def test_missing_version_is_unsupported() -> None:
    raw = valid_v4()
    del raw["version"]
    with pytest.raises(UnsupportedSchemaError):
        decode(json.dumps(raw), key=KEY)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "not json",
        "{'version': 4}",
        golden_text("v3.json")[:1500],  # a torn write
        '{"version": 4,}',
    ],
    ids=["empty", "open-brace", "words", "single-quotes", "truncated", "trailing-comma"],
)
def test_not_json_is_a_checkpoint_error(text: str) -> None:
    with pytest.raises(CheckpointError) as info:
        decode(text, key=KEY)
    assert type(info.value) is CheckpointError
    assert str(info.value) == f'Checkpoint: stored value at "{KEY}" is not valid JSON.'


@pytest.mark.parametrize("text", ["null", "[]", "42", '"snapshot"', "true"])
def test_json_that_is_not_an_object_is_refused(text: str) -> None:
    with pytest.raises(CheckpointError) as info:
        decode(text, key=KEY)
    assert "the value is not a JSON object" in str(info.value)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_json_number_literals_are_not_valid_json(literal: str) -> None:
    text = json.dumps(valid_v4()).replace('"prompt_version": 7', f'"prompt_version": {literal}')
    assert literal in text
    with pytest.raises(CheckpointError) as info:
        decode(text, key=KEY)
    assert "not valid JSON" in str(info.value)
