"""CK-10: a completed task's full result is stored when it is JSON, left out when it is not."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from checkpoint_support import make_snapshot, task_state

from oma_actors.checkpoint import encode
from oma_actors.domain.messages import Message, TextBlock, TokenUsage
from oma_actors.domain.results import AgentRunResult, ToolCallRecord
from oma_actors.domain.snapshot import CompletedTask


def _encoded_with(tool_input: dict[str, Any]) -> dict[str, Any]:
    """The completed-task entry of a snapshot whose task called a tool with ``tool_input``."""
    record = ToolCallRecord(tool_name="price", input=tool_input, output="11", duration_ms=4)
    done = AgentRunResult(
        success=True, output="done", messages=[Message("assistant", [TextBlock("done")])],
        token_usage=TokenUsage(3, 2), tool_calls=[record], turns=2,
    )  # fmt: skip
    snapshot = make_snapshot(
        tasks=(task_state("a", "completed", result="done"),),
        completed=(CompletedTask(task_id="a", assignee="w", result="done", agent_result=done),),
    )
    entries: list[dict[str, Any]] = json.loads(encode(snapshot))["completedTaskResults"]
    return entries[0]


@pytest.mark.parametrize(
    "tool_input",
    [{"sku": "a-1", "count": 2}, {"amount": 70.5}, {"ratio": 1e16, "big": 2**60}],
    ids=["plain", "float", "float-and-large-integer"],
)
def test_a_json_result_is_kept_whole(tool_input: dict[str, Any]) -> None:
    entry = _encoded_with(tool_input)
    assert entry["result"] == "done"
    assert entry["agentResult"]["toolCalls"][0]["input"] == tool_input


@pytest.mark.parametrize(
    "tool_input",
    [{"amount": math.nan}, {"amount": math.inf}, {"when": object()}, {"ids": {1, 2}}],
    ids=["nan", "infinity", "object", "set"],
)
def test_a_result_that_is_not_json_is_left_out_and_the_save_goes_on(
    tool_input: dict[str, Any],
) -> None:
    entry = _encoded_with(tool_input)
    assert entry == {"taskId": "a", "assignee": "w", "result": "done"}
