"""Thinking across turns: AnthropicAdapter keeps thinking blocks (with signatures) and re-sends them.

The Messages API requires a tool turn's thinking, signature unchanged, in the assistant message
sent back with the tool results; it is OMA's ``reasoning`` block in our conversation, so it is
carried through checkpoints and restores as the model wrote it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from anthropic_replies import HELLO, OPTIONS, adapter_for, reply_body

from oma_actors.domain.jsonforms import message_from_json, message_to_json
from oma_actors.domain.messages import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
)
from oma_actors.errors import ProviderError

if TYPE_CHECKING:
    from fake_server import FakeServer

THINKING = {"type": "thinking", "thinking": "Search first.", "signature": "EqQBCkYIBxgCKkA"}
TOOL_TURN = reply_body(
    [THINKING, {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "cats"}}],
    stop_reason="tool_use",
)


async def test_a_tool_turns_thinking_goes_back_with_its_results(fake_server: FakeServer) -> None:
    fake_server.reply(200, TOOL_TURN)
    fake_server.reply(200, reply_body([{"type": "text", "text": "cats found"}]))
    async with adapter_for(fake_server) as adapter:
        first = await adapter.chat(HELLO, OPTIONS)
        assert first.content[0] == ReasoningBlock("Search first.", signature="EqQBCkYIBxgCKkA")
        # Through a checkpoint, as a restore would rebuild the conversation.
        answered = message_from_json(message_to_json(Message("assistant", first.content)))
        results = Message("user", [ToolResultBlock("toolu_1", "3 cats")])
        await adapter.chat([*HELLO, answered, results], OPTIONS)
    sent = fake_server.requests[1].body["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": [
            THINKING,
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "cats"}},
        ],
    }


async def test_thinking_without_a_signature_is_not_sent(fake_server: FakeServer) -> None:
    """Another provider's thinking cannot be verified by the API, which would refuse the turn."""
    fake_server.reply(200, reply_body([{"type": "text", "text": "ok"}]))
    conversation = [
        *HELLO,
        Message("assistant", [ReasoningBlock("elsewhere"), TextBlock("hi")]),
        Message("user", [TextBlock("more")]),
    ]
    async with adapter_for(fake_server) as adapter:
        await adapter.chat(conversation, OPTIONS)
    assert fake_server.requests[0].body["messages"][1]["content"] == [
        {"type": "text", "text": "hi"}
    ]


async def test_a_thinking_block_without_text_is_a_provider_error(fake_server: FakeServer) -> None:
    fake_server.reply(200, reply_body([{"type": "thinking", "signature": "s"}]))
    async with adapter_for(fake_server) as adapter:
        with pytest.raises(ProviderError, match="thinking block without text"):
            await adapter.chat(HELLO, OPTIONS)
