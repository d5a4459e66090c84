"""A ``CustomContext`` function that edits a block it was given in place fails the task.

``fn`` gets copies of the messages, but their blocks are the conversation's own, and a tool
call's ``input`` dict and a tool result's content list can be changed in place. Such a change
reaches the model while the journal's ``context/replace``, which records a passed-through block
as a reference to the block before, and so a restore, keep the old value: the restored run
would differ from the one that ran. So it is refused, naming the block, before anything is
sent or recorded; a block ``fn`` makes anew is recorded verbatim and is fine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from pydantic import BaseModel

from oma_actors import (
    AgentConfig,
    CheckpointOptions,
    ContextStrategyError,
    CustomContext,
    OpenMultiAgent,
    Task,
    Team,
    TokenUsage,
    ToolContext,
    ToolResult,
    define_tool,
)
from oma_actors.agents.context_rules import custom
from oma_actors.journal import InMemoryRunJournal, JournalOptions
from oma_actors.llm import (
    ChatOptions,
    ContentBlock,
    LLMResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter


def conversation() -> tuple[Message, ...]:
    """The prompt and two tool turns; the first result has rich (list) content."""
    return (
        Message("user", [TextBlock("prompt")]),
        Message("assistant", [ToolUseBlock("c1", "look", {"n": 1, "tags": ["a"]})]),
        Message("user", [ToolResultBlock("c1", [TextBlock("seen 1")])]),
        Message("assistant", [ToolUseBlock("c2", "look", {"n": 2})]),
        Message("user", [ToolResultBlock("c2", "seen 2")]),
    )


def result_list(messages: Sequence[Message]) -> list[ContentBlock]:
    block = messages[2].content[0]
    assert isinstance(block, ToolResultBlock)
    assert isinstance(block.content, list)
    return block.content


def call_input(messages: Sequence[Message]) -> dict[str, object]:
    block = messages[1].content[0]
    assert isinstance(block, ToolUseBlock)
    return block.input


def append_note(messages: list[Message]) -> list[Message]:
    result_list(messages).append(TextBlock("note"))
    return messages


def renumber(messages: list[Message]) -> list[Message]:
    call_input(messages)["n"] = 99
    return messages


def retag(messages: list[Message]) -> list[Message]:
    call_input(messages)["tags"].append("b")  # type: ignore[attr-defined]
    return messages


def reorder(messages: list[Message]) -> list[Message]:
    args = call_input(messages)
    args["n"] = args.pop("n")  # the same items, another key order: another request
    return messages


@pytest.mark.parametrize(
    ("fn", "names"),
    [
        (append_note, r"block 0 of message 2 \(tool_result c1\)"),
        (renumber, r"block 0 of message 1 \(tool_use c1\)"),
        (retag, r"block 0 of message 1 \(tool_use c1\)"),
        (reorder, r"block 0 of message 1 \(tool_use c1\)"),
    ],
)
def test_a_block_changed_in_place_is_refused(fn: object, names: str) -> None:
    with pytest.raises(ContextStrategyError, match=names + " in place"):
        custom(conversation(), CustomContext(fn))  # type: ignore[arg-type]


def test_a_change_in_place_that_fn_then_drops_is_refused_too() -> None:
    # The block may be shared beyond the conversation (the transcript holds the same object).
    def note_and_cut(messages: list[Message]) -> list[Message]:
        result_list(messages).append(TextBlock("note"))
        return [messages[0], *messages[3:]]

    with pytest.raises(ContextStrategyError, match=r"message 2 \(tool_result c1\)"):
        custom(conversation(), CustomContext(note_and_cut))


def test_a_list_inside_a_tool_results_content_is_watched_too() -> None:
    inner = ToolResultBlock("c0", [TextBlock("inner")])
    given = (*conversation()[:2], Message("user", [ToolResultBlock("c1", [inner])]))

    def note_inside(messages: list[Message]) -> list[Message]:
        assert isinstance(inner.content, list)
        inner.content.append(TextBlock("note"))
        return messages

    with pytest.raises(ContextStrategyError, match=r"message 2 \(tool_result c1\) in place"):
        custom(given, CustomContext(note_inside))


def test_a_new_block_with_the_change_is_recorded() -> None:
    given = conversation()

    def with_note(messages: list[Message]) -> list[Message]:
        old = messages[2].content[0]
        assert isinstance(old, ToolResultBlock)
        assert isinstance(old.content, list)
        new = replace(old, content=[*old.content, TextBlock("note")])
        return [*messages[:2], Message("user", [new]), *messages[3:]]

    rewrite = custom(given, CustomContext(with_note))
    assert rewrite is not None
    [made] = rewrite.replacements
    assert made.block is rewrite.after[2].content[0]
    assert result_list(given) == [TextBlock("seen 1")]  # the conversation's own is as it was


def test_an_equal_block_in_place_of_a_list_item_is_no_change() -> None:
    def same_text(messages: list[Message]) -> list[Message]:
        result_list(messages)[0] = TextBlock("seen 1")
        return messages

    assert custom(conversation(), CustomContext(same_text)) is None


class Look(BaseModel):
    n: int


def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """Call ``look`` twice, then answer."""
    done = sum(isinstance(b, ToolResultBlock) for m in messages for b in m.content)
    if done >= 2:
        return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))
    call = ToolUseBlock(f"look-{done + 1}", "look", {"n": done + 1})
    return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(1, 1))


async def look(args: Look, ctx: ToolContext) -> ToolResult:
    text = f"seen {args.n}"
    return ToolResult(text, content=(TextBlock(text),))  # rich: a content list


def note_in_place(messages: list[Message]) -> list[Message]:
    """Append a note to the first tool result's content list, once two results are in."""
    if len(messages) >= 5:
        result_list(messages).append(TextBlock("note"))
    return messages


async def test_the_run_fails_the_task_naming_the_block() -> None:
    tool = define_tool(name="look", description="look", input_model=Look, execute=look)
    agent = AgentConfig(
        "w",
        adapter=ScriptedAdapter(script),
        tools=[tool],
        max_turns=10,
        context_strategy=CustomContext(note_in_place),
    )
    result = await OpenMultiAgent().run_tasks(
        Team("t", [agent]), [Task("look", "look twice", id="a")],
        checkpoint=CheckpointOptions(store=InMemoryStore(), run_id="run-in-place"),
        journal=JournalOptions(InMemoryRunJournal(), enforce_lineage=True),
    )  # fmt: skip
    assert [task.status for task in result.tasks] == ["failed"]
    output = str(result.tasks[0].result)
    assert "CustomContext.fn changed block 0 of message 2 (tool_result look-1) in place" in output
