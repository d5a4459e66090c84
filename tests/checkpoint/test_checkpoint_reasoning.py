"""OMA's ``reasoning`` blocks in a snapshot: read and written back exactly as OMA stores them.

OMA keeps a model's thinking in the assistant message as ``{"type": "reasoning", "text",
"signature"?}``; it used to be refused as an unknown block type.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from checkpoint_support import KEY, golden_json
from fold_support import CALL_JSON, entry, event, journaled

from oma_actors.checkpoint import decode, encode
from oma_actors.errors import CheckpointError
from oma_actors.journal.fold import Folded, fold_tail
from oma_actors.llm import ReasoningBlock

THOUGHT_JSON = {"type": "reasoning", "text": "Look it up first.", "signature": "sig-Eq1"}


def _with_reasoning(block: dict[str, Any]) -> dict[str, Any]:
    raw = golden_json("v4.json")
    entry = raw["inFlightTasks"][0]
    for messages in (entry["conversationMessages"], entry["messages"]):
        answer_message = next(m for m in messages if m["role"] == "assistant")
        answer_message["content"].insert(0, block)
    return raw


@pytest.mark.parametrize("block", [THOUGHT_JSON, {"type": "reasoning", "text": "no signature"}])
def test_a_reasoning_block_is_read_and_written_back_exactly(block: dict[str, Any]) -> None:
    raw = _with_reasoning(block)
    snapshot = decode(json.dumps(raw), key=KEY)
    conversation = snapshot.in_flight[0].state.conversation
    assert conversation[1].content[0] == ReasoningBlock(
        block["text"], signature=block.get("signature")
    )
    written = json.loads(encode(snapshot))
    assert written["inFlightTasks"] == raw["inFlightTasks"]


@pytest.mark.parametrize(
    "block",
    [{"type": "reasoning"}, {"type": "reasoning", "text": 7}, {**THOUGHT_JSON, "signature": 1}],
)
def test_a_malformed_reasoning_block_is_refused(block: dict[str, Any]) -> None:
    with pytest.raises(CheckpointError, match="reasoning block"):
        decode(json.dumps(_with_reasoning(block)), key=KEY)


def test_a_journal_tail_folds_thinking_into_the_entry() -> None:
    """A restore folding ``assistant/message`` rebuilds the thinking as the model wrote it."""
    message = {"role": "assistant", "content": [THOUGHT_JSON, CALL_JSON]}
    usage = {"input_tokens": 2, "output_tokens": 3}
    turn = event(101, "assistant/message", message=message, origin="response", usage=usage)
    result = fold_tail(journaled(entry(mark=100)), [turn])
    assert isinstance(result, Folded), result
    (item,) = result.snapshot.in_flight
    assert item.state.conversation[1].content[0] == ReasoningBlock(
        "Look it up first.", signature="sig-Eq1"
    )
    assert item.state.phase == "executing_tools"
