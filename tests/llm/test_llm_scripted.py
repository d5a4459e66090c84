"""``ScriptedAdapter``: the offline model in ``oma_actors.llm``, re-exported by the test kit."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import oma_actors.llm
import oma_actors.llm.scripted as home
import oma_actors.testing
import oma_actors.testing.scripted as legacy
from oma_actors import TokenUsage
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock

OPTIONS = ChatOptions(model="m")


def user(text: str) -> Message:
    return Message("user", [TextBlock(text)])


@pytest.mark.parametrize("name", ["RecordedCall", "ScriptedAdapter", "text_response"])
def test_the_test_kit_and_the_old_module_re_export_the_llm_objects(name: str) -> None:
    assert getattr(oma_actors.llm, name) is getattr(home, name)
    assert getattr(oma_actors.testing, name) is getattr(home, name)
    assert getattr(legacy, name) is getattr(home, name)


async def test_a_list_plays_back_in_order_and_records_each_call() -> None:
    first = LLMResponse([ToolUseBlock("c1", "search", {"q": "x"})], stop_reason="tool_use")
    adapter = home.ScriptedAdapter([first, home.text_response("done", output_tokens=3)])
    conversation = [user("hello"), Message("assistant", [TextBlock("hi")]), user("again")]

    assert await adapter.chat(conversation[:1], OPTIONS) is first
    answer = await adapter.chat(conversation, OPTIONS)

    assert answer.content == [TextBlock("done")]
    assert answer.stop_reason == "end_turn"
    assert answer.usage == TokenUsage(1, 3)
    assert adapter.call_count == 2
    assert adapter.calls[1].messages == tuple(conversation)
    assert adapter.calls[1].options is OPTIONS
    assert adapter.calls[1].prompt == "hello\nagain"  # user text only


async def test_an_exhausted_list_fails_the_test_loudly() -> None:
    adapter = home.ScriptedAdapter([home.text_response("one")])
    await adapter.chat([user("a")], OPTIONS)
    with pytest.raises(AssertionError, match="call 2 but only 1 responses were scripted"):
        await adapter.chat([user("b")], OPTIONS)
    assert adapter.call_count == 2  # the refused call is still recorded


async def test_a_function_script_answers_from_the_conversation() -> None:
    def echo(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        return home.text_response(f"{options.model}:{len(messages)}")

    adapter = home.ScriptedAdapter(echo)
    answer = await adapter.chat([user("a"), user("b")], OPTIONS)
    assert answer.content == [TextBlock("m:2")]
    assert (await adapter.chat([user("a")], OPTIONS)).content == [TextBlock("m:1")]
