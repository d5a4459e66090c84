"""AnthropicAdapter against a fake Messages API: requests and responses mapped both ways."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from anthropic_replies import HELLO, MODEL, OPTIONS, TEXT_REPLY, adapter_for, reply_body

from oma_actors.domain.messages import (
    ChatOptions,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from oma_actors.errors import (
    ConfigurationError,
)
from oma_actors.llm import AnthropicAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fake_server import FakeServer


@pytest.fixture
async def adapter(fake_server: FakeServer) -> AsyncIterator[AnthropicAdapter]:
    async with adapter_for(fake_server) as adapter:
        yield adapter


async def test_text_response_maps_to_llm_response(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(200, TEXT_REPLY)

    response = await adapter.chat(HELLO, OPTIONS)

    assert response.content == [TextBlock("hi there")]
    assert response.stop_reason == "end_turn"
    assert response.usage == TokenUsage(11, 7)
    assert response.model == "claude-test-20990101"
    request = fake_server.requests[0]
    assert request.path == "/v1/messages"
    assert "test-key" in (request.header("x-api-key") or request.header("authorization") or "")


async def test_request_body_maps_system_tools_and_every_block_kind(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(200, TEXT_REPLY)
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    options = ChatOptions(
        model=MODEL,
        system_prompt="be brief",
        tools=[ToolSpec("search", "Search the web", schema)],
        max_tokens=321,
    )
    conversation = [
        Message(
            "user",
            [
                TextBlock("look"),
                ImageBlock("image/png", data="aGVsbG8="),
                ImageBlock("image/jpeg", url="https://example.com/cat.jpg"),
            ],
        ),
        Message("assistant", [TextBlock("searching"), ToolUseBlock("tu_1", "search", {"q": "x"})]),
        Message(
            "user",
            [
                ToolResultBlock("tu_1", "plain result"),
                ToolResultBlock(
                    "tu_2",
                    [TextBlock("rich"), ImageBlock("image/gif", data="R0lG")],
                    is_error=True,
                ),
            ],
        ),
    ]

    await adapter.chat(conversation, options)

    body = fake_server.requests[0].body
    assert body["model"] == MODEL
    assert body["max_tokens"] == 321
    assert body["system"] == "be brief"
    assert body["tools"] == [
        {"name": "search", "description": "Search the web", "input_schema": schema}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="},
                },
                {
                    "type": "image",
                    "source": {"type": "url", "url": "https://example.com/cat.jpg"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "searching"},
                {"type": "tool_use", "id": "tu_1", "name": "search", "input": {"q": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_1",
                    "is_error": False,
                    "content": "plain result",
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_2",
                    "is_error": True,
                    "content": [
                        {"type": "text", "text": "rich"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"},
                        },
                    ],
                },
            ],
        },
    ]


async def test_an_assistant_turn_with_nothing_to_send_is_left_out(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    # An empty reply (content [], end_turn) stays in our conversation, but the API refuses an
    # assistant message with no content anywhere but last (400); nor does it take an empty text
    # block. The user turns either side are joined by the API.
    fake_server.reply(200, TEXT_REPLY)
    conversation = [
        Message("user", [TextBlock("plan this")]),
        Message("assistant", []),
        Message("user", [TextBlock("answer with a JSON plan")]),
        Message("assistant", [TextBlock(""), ReasoningBlock("unsigned")]),
        Message("user", [TextBlock("please")]),
        Message("assistant", [TextBlock(""), TextBlock("ok:")]),
    ]

    await adapter.chat(conversation, OPTIONS)

    assert fake_server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "plan this"}]},
        {"role": "user", "content": [{"type": "text", "text": "answer with a JSON plan"}]},
        {"role": "user", "content": [{"type": "text", "text": "please"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok:"}]},
    ]


async def test_defaults_omit_system_and_tools_and_use_default_max_tokens(
    fake_server: FakeServer,
) -> None:
    fake_server.reply(200, TEXT_REPLY)
    async with AnthropicAdapter(
        api_key="k", base_url=fake_server.url, default_max_tokens=77
    ) as adapter:
        await adapter.chat(HELLO, OPTIONS)

    body = fake_server.requests[0].body
    assert body["max_tokens"] == 77
    assert "system" not in body
    assert "tools" not in body
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]


async def test_tool_use_response_keeps_thinking_and_skips_unknown_blocks(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(
        200,
        reply_body(
            [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "block_from_the_future", "payload": 1},
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "toolu_9", "name": "search", "input": {"q": "cats"}},
            ],
            stop_reason="tool_use",
        ),
    )

    response = await adapter.chat(HELLO, OPTIONS)

    assert response.content == [
        ReasoningBlock("hmm", signature="sig"),
        TextBlock("let me look"),
        ToolUseBlock("toolu_9", "search", {"q": "cats"}),
    ]
    assert response.stop_reason == "tool_use"
    assert response.tool_uses == [ToolUseBlock("toolu_9", "search", {"q": "cats"})]


@pytest.mark.parametrize("reason", ["max_tokens", "stop_sequence", "pause_turn", "refusal"])
async def test_stop_reason_is_verbatim(
    adapter: AnthropicAdapter, fake_server: FakeServer, reason: str
) -> None:
    fake_server.reply(200, reply_body([{"type": "text", "text": "x"}], stop_reason=reason))

    assert (await adapter.chat(HELLO, OPTIONS)).stop_reason == reason


async def test_usage_counts_cached_input_tokens_as_input(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    usage = {
        "input_tokens": 5,
        "output_tokens": 3,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 20,
    }
    fake_server.reply(200, reply_body([{"type": "text", "text": "x"}], usage=usage))

    assert (await adapter.chat(HELLO, OPTIONS)).usage == TokenUsage(125, 3)


async def test_image_without_data_or_url_is_rejected_before_sending(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    with pytest.raises(ConfigurationError, match="data or url"):
        await adapter.chat([Message("user", [ImageBlock("image/png")])], OPTIONS)

    assert fake_server.requests == []
