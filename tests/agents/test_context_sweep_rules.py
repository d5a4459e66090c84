"""The pure context rules at their edges: settings, turns, sizes, what ``fn`` may return.

Each test pins one rule of ``agents/context.py`` or ``agents/context_rules.py`` that the broader
tests in ``test_context_rules.py`` pass over: a strategy's setting must be an ``int``; the
estimate rounds up; a turn is an assistant message with the one user message that answers it;
the dropped blocks are told apart by identity, not equality; a tool result's size counts list
content; a role is part of what a custom function changes; and a tool result belongs in a user
message.
"""

from __future__ import annotations

import pytest

from oma_actors import (
    CompressToolResults,
    ConfigurationError,
    ContextStrategyError,
    CustomContext,
    SlidingWindow,
    Summarize,
)
from oma_actors.agents.context_rules import (
    COMPRESSED_MARK,
    check_sendable,
    compress_tool_results,
    custom,
    estimate_tokens,
    sliding_window,
    turns_after_prompt,
)
from oma_actors.llm import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock

PROMPT = Message("user", [TextBlock("prompt")])


def tool_turn(call_id: str, output: str | list[ContentBlock]) -> tuple[Message, Message]:
    call = ToolUseBlock(call_id, "t", {})
    return Message("assistant", [call]), Message("user", [ToolResultBlock(call_id, output)])


@pytest.mark.parametrize(
    "make",
    [
        lambda: SlidingWindow(2.5),  # type: ignore[arg-type]
        lambda: Summarize("100"),  # type: ignore[arg-type]
        lambda: CompressToolResults(None),  # type: ignore[arg-type]
    ],
)
def test_a_setting_that_is_not_an_int_is_refused(make: object) -> None:
    with pytest.raises(ConfigurationError, match="must be an int >= 1"):
        make()  # type: ignore[operator]


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("a", 1), ("abc", 1), ("abcde", 2)])
def test_the_estimate_rounds_the_characters_up(text: str, tokens: int) -> None:
    # OMA's Math.ceil: a conversation is never estimated smaller than it is.
    assert estimate_tokens([Message("user", [TextBlock(text)])]) == tokens


def test_a_user_message_after_a_user_message_opens_a_turn_of_its_own() -> None:
    first, answer, extra = (Message("user", [TextBlock(t)]) for t in ("first", "answer", "extra"))
    reply = Message("assistant", [TextBlock("reply")])
    assert turns_after_prompt((PROMPT, first, reply, answer)) == [[first], [reply, answer]]
    assert turns_after_prompt((PROMPT, reply, answer, extra)) == [[reply, answer], [extra]]


def test_blocks_equal_to_kept_ones_are_still_dropped() -> None:
    # Repeated repair requests are equal blocks in different messages: the window drops the
    # old ones, and the journal's ``dropped`` must name them (identity, not equality).
    turns = [
        message
        for _ in range(3)
        for message in (
            Message("assistant", [TextBlock("ok")]),
            Message("user", [TextBlock("go on")]),
        )
    ]
    before = (PROMPT, *turns)
    rewrite = sliding_window(before, SlidingWindow(1))
    assert rewrite is not None
    dropped = rewrite.dropped()
    assert [id(b) for b in dropped] == [id(m.content[0]) for m in before[1:5]]


def test_a_long_result_with_list_content_is_compressed() -> None:
    before = (PROMPT, *tool_turn("c1", [TextBlock("x" * 100)]), *tool_turn("c2", "latest"))
    rewrite = compress_tool_results(before, CompressToolResults(50))
    assert rewrite is not None
    [made] = rewrite.replacements
    assert made.sources == (before[2].content[0],)
    marker = rewrite.after[2].content[0]
    assert isinstance(marker, ToolResultBlock)
    assert isinstance(marker.content, str)
    assert marker.content.startswith(COMPRESSED_MARK)


def test_a_custom_function_that_only_changes_a_role_rewrites() -> None:
    reply = Message("assistant", [TextBlock("reply")])
    before = (PROMPT, reply, Message("user", [TextBlock("again")]))

    def as_user(messages: list[Message]) -> list[Message]:
        return [messages[0], Message("user", messages[1].content), messages[2]]

    rewrite = custom(before, CustomContext(as_user))
    assert rewrite is not None  # the model is sent what fn returned, not the conversation
    assert [m.role for m in rewrite.after] == ["user", "user", "user"]
    assert rewrite.after[1].content[0] is reply.content[0]


def test_an_empty_message_whose_role_fn_changed_is_judged_as_its_own() -> None:
    before = (PROMPT, Message("assistant", []), Message("user", [TextBlock("again")]))

    def flip(messages: list[Message]) -> list[Message]:
        return [messages[0], Message("user", []), messages[2]]

    with pytest.raises(ContextStrategyError, match=r"message 1 \(user\) with no content block"):
        custom(before, CustomContext(flip))


@pytest.mark.parametrize(("content", "kind"), [(5, "int"), ({"text": "raw"}, "dict")])
def test_a_tool_result_whose_content_is_neither_text_nor_blocks_is_refused(
    content: object, kind: str
) -> None:
    before = (PROMPT, *tool_turn("c1", "r"))

    def odd(messages: list[Message]) -> list[Message]:
        raw = ToolResultBlock("c1", content)  # type: ignore[arg-type]
        return [*messages[:-1], Message("user", [raw])]

    with pytest.raises(ContextStrategyError, match=f"message 2 with a {kind} in block 0"):
        custom(before, CustomContext(odd))


def test_a_tool_result_in_an_assistant_message_is_not_an_answer() -> None:
    call, answer = tool_turn("c1", "r")
    misplaced = (PROMPT, call, Message("assistant", list(answer.content)), PROMPT)
    with pytest.raises(ContextStrategyError, match="a tool_use must keep its tool_result"):
        check_sendable(misplaced)
