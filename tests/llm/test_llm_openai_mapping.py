"""OpenAIAdapter against a fake Chat Completions API: requests and responses mapped both ways."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from openai_replies import (
    HELLO,
    MODEL,
    OPTIONS,
    TEXT_REPLY,
    USAGE,
    adapter_for,
    completion,
    tool_call,
)

from oma_actors.domain.messages import (
    UNPARSED_ARGUMENTS,
    ChatOptions,
    ImageBlock,
    Message,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from oma_actors.errors import (
    ConfigurationError,
)
from oma_actors.llm import OpenAIAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fake_server import FakeServer


@pytest.fixture
async def adapter(fake_server: FakeServer) -> AsyncIterator[OpenAIAdapter]:
    async with adapter_for(fake_server) as adapter:
        yield adapter


async def test_text_response_maps_to_llm_response(
    adapter: OpenAIAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(200, TEXT_REPLY)

    response = await adapter.chat(HELLO, OPTIONS)

    assert response.content == [TextBlock("hi there")]
    assert response.stop_reason == "end_turn"
    assert response.usage == TokenUsage(13, 5)
    assert response.model == "gpt-test-2099"
    request = fake_server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.header("authorization") == "Bearer test-key"


async def test_request_body_maps_system_tools_tool_calls_and_results(
    adapter: OpenAIAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(200, TEXT_REPLY)
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    options = ChatOptions(
        model=MODEL,
        system_prompt="be brief",
        tools=[ToolSpec("search", "Search the web", schema)],
        max_tokens=99,
    )
    conversation = [
        Message("user", [TextBlock("find cats")]),
        Message(
            "assistant",
            [
                TextBlock("searching"),
                ToolUseBlock("call_1", "search", {"q": "cats"}),
                ToolUseBlock("call_2", "search", {"q": "dogs"}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultBlock("call_1", "3 cats"),
                ToolResultBlock(
                    "call_2",
                    [TextBlock("no dogs"), ImageBlock("image/png", url="https://x/dog.png")],
                    is_error=True,
                ),
                TextBlock("and this picture?"),
                ImageBlock("image/png", data="aGVsbG8="),
            ],
        ),
        Message("assistant", [ToolUseBlock("call_3", "search", {})]),
    ]

    await adapter.chat(conversation, options)

    body = fake_server.requests[0].body
    assert body["model"] == MODEL
    assert body["max_tokens"] == 99  # a compatible server (base_url) gets max_tokens
    assert "max_completion_tokens" not in body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "search", "description": "Search the web", "parameters": schema},
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "find cats"},
        {
            "role": "assistant",
            "content": "searching",
            "tool_calls": [
                tool_call("call_1", "search", json.dumps({"q": "cats"})),
                tool_call("call_2", "search", json.dumps({"q": "dogs"})),
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "3 cats"},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": "Error: no dogs\n[image image/png: https://x/dog.png omitted]",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
            ],
        },
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_3", "search", "{}")]},
    ]


async def test_an_error_result_is_marked_as_an_error_once(
    adapter: OpenAIAdapter, fake_server: FakeServer
) -> None:
    # The tool layer's error results begin with "Error:" already; Chat Completions has no
    # is_error flag, so only a result that does not say so gets the word.
    fake_server.reply(200, TEXT_REPLY)
    conversation = [
        Message("user", [TextBlock("add")]),
        Message("assistant", [ToolUseBlock("c1", "add", {}), ToolUseBlock("c2", "add", {})]),
        Message(
            "user",
            [
                ToolResultBlock(
                    "c1", "Error: invalid input for tool 'add': a: missing", is_error=True
                ),
                ToolResultBlock("c2", "disk full", is_error=True),
            ],
        ),
    ]

    await adapter.chat(conversation, OPTIONS)

    tool_messages = [m for m in fake_server.requests[0].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [
        "Error: invalid input for tool 'add': a: missing",
        "Error: disk full",
    ]


async def test_defaults_omit_tools_and_token_limit(
    adapter: OpenAIAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(200, TEXT_REPLY)

    await adapter.chat(HELLO, OPTIONS)

    body = fake_server.requests[0].body
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert not {"tools", "max_tokens", "max_completion_tokens"} & body.keys()


async def test_official_endpoint_gets_max_completion_tokens(
    fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No base_url argument: the adapter treats this as api.openai.com, which the SDK lets the
    # environment redirect to the fake server.
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_server.url}/v1")
    fake_server.reply(200, TEXT_REPLY)

    async with OpenAIAdapter(api_key="k") as adapter:
        await adapter.chat(HELLO, ChatOptions(model=MODEL, max_tokens=50))

    body = fake_server.requests[0].body
    assert body["max_completion_tokens"] == 50
    assert "max_tokens" not in body


async def test_tool_calls_response_maps_to_tool_use_blocks(
    adapter: OpenAIAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(
        200,
        completion(
            {
                "content": None,
                "tool_calls": [
                    tool_call("call_a", "search", '{"q": "cats", "n": 2}'),
                    tool_call("call_b", "clock", ""),
                ],
            },
            finish_reason="tool_calls",
            usage=USAGE,
        ),
    )

    response = await adapter.chat(HELLO, OPTIONS)

    assert response.content == [
        ToolUseBlock("call_a", "search", {"q": "cats", "n": 2}),
        ToolUseBlock("call_b", "clock", {}),
    ]
    assert response.stop_reason == "tool_use"


@pytest.mark.parametrize("arguments", ['{"q": "cats"', "[1, 2]", "not json"])
async def test_arguments_that_are_not_a_json_object_are_kept_raw(
    adapter: OpenAIAdapter, fake_server: FakeServer, arguments: str
) -> None:
    fake_server.reply(
        200,
        completion(
            {"content": None, "tool_calls": [tool_call("call_x", "search", arguments)]},
            finish_reason="tool_calls",
        ),
    )

    response = await adapter.chat(HELLO, OPTIONS)

    assert response.tool_uses == [ToolUseBlock("call_x", "search", {UNPARSED_ARGUMENTS: arguments})]


async def test_call_ids_are_passed_on_as_the_server_gave_them(
    adapter: OpenAIAdapter, fake_server: FakeServer
) -> None:
    # A missing id is "" and a repeated one is kept: the agent loop makes every id unique in
    # the task's transcript (tests/agents/test_call_ids.py), for every adapter alike.
    missing = {"type": "function", "function": {"name": "a", "arguments": "{}"}}
    calls = [missing, tool_call("0", "b", "{}"), tool_call("0", "c", "{}")]
    fake_server.reply(200, completion({"content": None, "tool_calls": calls}))

    uses = (await adapter.chat(HELLO, OPTIONS)).tool_uses

    assert [(u.id, u.name) for u in uses] == [("", "a"), ("0", "b"), ("0", "c")]


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("content_filter", "content_filter"),
        (None, "end_turn"),
    ],
)
async def test_finish_reason_mapping(
    adapter: OpenAIAdapter, fake_server: FakeServer, finish: str | None, expected: str
) -> None:
    fake_server.reply(200, completion({"content": "x"}, finish_reason=finish))

    assert (await adapter.chat(HELLO, OPTIONS)).stop_reason == expected


async def test_stop_with_tool_calls_means_tool_use(
    adapter: OpenAIAdapter, fake_server: FakeServer
) -> None:
    # Ollama and others answer finish_reason "stop" even when the model called a tool.
    fake_server.reply(
        200,
        completion({"content": "", "tool_calls": [tool_call("c", "search", "{}")]}),
    )

    response = await adapter.chat(HELLO, OPTIONS)

    assert response.stop_reason == "tool_use"
    assert response.content == [ToolUseBlock("c", "search", {})]


async def test_missing_usage_counts_zero(adapter: OpenAIAdapter, fake_server: FakeServer) -> None:
    fake_server.reply(200, completion({"content": "x"}))

    assert (await adapter.chat(HELLO, OPTIONS)).usage == TokenUsage(0, 0)


async def test_refusal_is_surfaced_as_text(adapter: OpenAIAdapter, fake_server: FakeServer) -> None:
    fake_server.reply(200, completion({"content": None, "refusal": "I can't help with that."}))

    assert (await adapter.chat(HELLO, OPTIONS)).text == "I can't help with that."


@pytest.mark.parametrize(
    "message",
    [
        Message("user", [ToolUseBlock("c", "search", {})]),
        Message("assistant", [ToolResultBlock("c", "x")]),
        Message("assistant", [ImageBlock("image/png", data="x")]),
    ],
)
async def test_impossible_shapes_are_rejected_before_sending(
    adapter: OpenAIAdapter, fake_server: FakeServer, message: Message
) -> None:
    with pytest.raises(ConfigurationError):
        await adapter.chat([message], OPTIONS)

    assert fake_server.requests == []
