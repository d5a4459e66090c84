"""Messages, blocks and pending calls read from JSON: bad shapes are a ``CheckpointError``.

A snapshot or a journal event that holds one is corrupt; without these checks it failed with an
``AttributeError`` or a ``TypeError`` that names nothing, or (a result that is no tool_result)
was read as a commit of the wrong kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from oma_actors import CheckpointError
from oma_actors.domain.jsonforms import (
    block_from_json,
    message_from_json,
    pending_from_json,
    result_from_json,
)
from oma_actors.domain.results import AgentRunResult

CALL = {"type": "tool_use", "id": "c1", "name": "lookup", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "c1", "content": "found"}


@pytest.mark.parametrize(
    ("read", "raw", "named"),
    [
        (block_from_json, "text", "content block is not an object: 'text'"),
        (block_from_json, ["text"], "content block is not an object"),
        (message_from_json, "hi", "message is not a user/assistant object"),
        (message_from_json, {"role": "system", "content": "x"}, "not a user/assistant object"),
        (message_from_json, {"role": "user", "content": 3}, "neither a string nor a list: 3"),
        (message_from_json, {"role": "user"}, "neither a string nor a list: None"),
        (message_from_json, {"role": "user", "content": [7]}, "content block is not an object"),
        (pending_from_json, {"call": RESULT}, "pending call is not a tool_use block"),
        (
            pending_from_json,
            {"call": CALL, "commit": {"result": {"type": "text", "text": "x"}, "record": {}}},
            "commit of 'c1' is not a tool_result block",
        ),
    ],
)
def test_a_bad_shape_is_a_checkpoint_error_naming_it(
    read: Callable[[Any], object], raw: object, named: str
) -> None:
    with pytest.raises(CheckpointError, match=named.replace("(", r"\(")):
        read(raw)


def test_well_formed_content_reads() -> None:
    assert message_from_json({"role": "assistant", "content": "hi"}).content[0].text == "hi"  # type: ignore[union-attr]
    pending = pending_from_json({"call": CALL, "commit": {"result": RESULT, "record": {}}})
    assert pending.commit is not None
    assert pending.commit.block.tool_use_id == "c1"


@pytest.mark.parametrize("raw", [None, "not serializable", 3])
def test_a_result_left_out_of_the_snapshot_is_oma_s_minimal_result(raw: object) -> None:
    # CK-10: the task's result text stands in for a result that could not be serialized.
    assert result_from_json(raw, "the task's result") == AgentRunResult(
        success=True, output="the task's result"
    )
