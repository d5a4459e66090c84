"""``CustomContext(fn)`` must return what can be both sent and checkpointed.

A value ``fn`` puts where a content block belongs (a dict in the provider's JSON shape, say) has
no JSON form a restore can read back, and a message without blocks is one providers refuse.
Either fails the task with a ``ContextStrategyError`` naming the message, before the model is
called or anything is saved, so the run's checkpoint stays restorable. What ``fn`` passes
through is the runner's own and is not judged.
"""

from __future__ import annotations

import pytest
from context_scenario import script, team

from oma_actors import CheckpointOptions, ContextStrategyError, CustomContext, OpenMultiAgent, Task
from oma_actors.agents.context_rules import custom
from oma_actors.llm import Message, TextBlock, ToolResultBlock, ToolUseBlock
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

RAW = {"type": "text", "text": "note"}


def conversation() -> tuple[Message, ...]:
    call = ToolUseBlock("c1", "t", {})
    return (
        Message("user", [TextBlock("prompt")]),
        Message("assistant", [call]),
        Message("user", [ToolResultBlock("c1", "r")]),
    )


def with_raw_note(messages: list[Message]) -> list[Message]:
    first = messages[0]
    return [Message(first.role, [*first.content, RAW]), *messages[1:]]  # type: ignore[list-item]


def with_empty_turn(messages: list[Message]) -> list[Message]:
    return [messages[0], Message("assistant", []), *messages[1:]]


def with_text_content(messages: list[Message]) -> list[Message]:
    return [Message("user", "prompt"), *messages[1:]]  # type: ignore[arg-type]


def with_raw_tool_output(messages: list[Message]) -> list[Message]:
    raw_result = ToolResultBlock("c1", [TextBlock("ok"), RAW])  # type: ignore[list-item]
    return [*messages[:-1], Message("user", [raw_result])]


@pytest.mark.parametrize(
    ("fn", "names"),
    [
        (with_raw_note, "message 0 with a dict in block 1"),
        (with_empty_turn, r"message 1 \(assistant\) with no content block"),
        (with_raw_tool_output, "message 2 with a dict in block 0"),
        (with_text_content, "message 0 without a content list"),
    ],
)
def test_a_result_that_cannot_be_checkpointed_is_refused(fn: object, names: str) -> None:
    with pytest.raises(ContextStrategyError, match=names):
        custom(conversation(), CustomContext(fn))  # type: ignore[arg-type]


def test_an_empty_message_fn_passes_through_is_not_its_fault() -> None:
    # The runner's own conversation may hold one (a model that answered with no block).
    given = (*conversation()[:1], Message("assistant", []), Message("user", [TextBlock("again")]))

    def note(messages: list[Message]) -> list[Message]:
        return [Message("user", [*messages[0].content, TextBlock("note")]), *messages[1:]]

    rewrite = custom(given, CustomContext(note))
    assert rewrite is not None
    assert rewrite.after[1] == Message("assistant", [])


async def test_the_task_fails_and_its_checkpoint_still_restores() -> None:
    def late_raw_note(messages: list[Message]) -> list[Message]:
        return with_raw_note(messages) if len(messages) > 3 else messages

    store = InMemoryStore()
    options = CheckpointOptions(store=store, run_id="run-custom-blocks")
    adapter = ScriptedAdapter(script)
    first = await OpenMultiAgent().run_tasks(
        team(adapter, CustomContext(late_raw_note)), [Task("s", "do", id="a")], checkpoint=options
    )
    assert [task.status for task in first.tasks] == ["failed"]
    assert "CustomContext.fn returned message 0 with a dict in block 1" in str(
        first.tasks[0].result
    )
    # What was saved before the refusal is whole: a restore with a sound strategy finishes.
    again = await OpenMultiAgent().restore(
        team(ScriptedAdapter(script), CustomContext(lambda messages: messages)),
        [Task("s", "do", id="a")],
        checkpoint=options,
    )
    assert again.success, again.status
