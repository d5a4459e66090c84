"""AnthropicAdapter against a fake Messages API: mapping both ways, errors and retries."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from oma_actors.domain.messages import (
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
    AuthenticationError,
    ConfigurationError,
    OverloadedError,
    ProviderError,
    RateLimitError,
)
from oma_actors.llm import AnthropicAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fake_server import FakeServer

MODEL = "claude-test"
OPTIONS = ChatOptions(model=MODEL)
HELLO = [Message("user", [TextBlock("hello")])]


def reply_body(
    content: list[dict[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    usage: dict[str, int] | None = None,
    model: str = "claude-test-20990101",
) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 11, "output_tokens": 7},
    }


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


TEXT_REPLY = reply_body([{"type": "text", "text": "hi there"}])


@pytest.fixture
async def adapter(fake_server: FakeServer) -> AsyncIterator[AnthropicAdapter]:
    async with AnthropicAdapter(
        api_key="test-key",
        base_url=fake_server.url,
        max_retries=2,
        retry_base_delay=0.001,
        timeout=5.0,
    ) as adapter:
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


async def test_tool_use_response_skips_thinking_and_unknown_blocks(
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


@pytest.mark.parametrize(
    ("status", "kind"), [(401, "authentication_error"), (403, "permission_error")]
)
async def test_auth_failure_is_typed_and_not_retried(
    adapter: AnthropicAdapter, fake_server: FakeServer, status: int, kind: str
) -> None:
    fake_server.reply(status, error_body(kind, "invalid x-api-key"))

    with pytest.raises(AuthenticationError) as caught:
        await adapter.chat(HELLO, OPTIONS)

    assert caught.value.provider == "anthropic"
    assert caught.value.status == status
    assert "invalid x-api-key" in str(caught.value)
    assert len(fake_server.requests) == 1


async def test_rate_limit_then_success_is_retried(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(429, error_body("rate_limit_error", "slow down"))
    fake_server.reply(200, TEXT_REPLY)

    response = await adapter.chat(HELLO, OPTIONS)

    assert response.text == "hi there"
    assert len(fake_server.requests) == 2
    # The SDK's retry counter stays at 0: every attempt is ours.
    assert [r.header("x-stainless-retry-count") for r in fake_server.requests] == ["0", "0"]


async def test_rate_limit_exhausted_raises_rate_limit_error(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply_many(3, 429, error_body("rate_limit_error", "slow down"))

    with pytest.raises(RateLimitError) as caught:
        await adapter.chat(HELLO, OPTIONS)

    assert caught.value.retryable
    assert caught.value.status == 429
    assert len(fake_server.requests) == 3


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
async def test_overload_retried_until_attempts_run_out(
    adapter: AnthropicAdapter, fake_server: FakeServer, status: int
) -> None:
    fake_server.reply_many(3, status, error_body("overloaded_error", "Overloaded"))

    with pytest.raises(OverloadedError) as caught:
        await adapter.chat(HELLO, OPTIONS)

    assert caught.value.status == status
    assert caught.value.provider == "anthropic"
    assert len(fake_server.requests) == 3  # max_retries=2, so 3 attempts
    assert "gave up after 3 attempts" in " ".join(caught.value.__notes__)


async def test_bad_request_is_a_provider_error_and_not_retried(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(400, error_body("invalid_request_error", "messages: field required"))

    with pytest.raises(ProviderError) as caught:
        await adapter.chat(HELLO, OPTIONS)

    assert caught.value.status == 400
    assert "messages: field required" in str(caught.value)
    assert len(fake_server.requests) == 1


async def test_retry_after_header_is_honoured(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(429, error_body("rate_limit_error", "wait"), {"retry-after-ms": "200"})
    fake_server.reply(200, TEXT_REPLY)

    started = time.monotonic()
    await adapter.chat(HELLO, OPTIONS)

    assert time.monotonic() - started >= 0.2


@pytest.mark.parametrize("body", [b"<html>oops</html>", {}])
async def test_unreadable_success_body_is_a_provider_error(
    adapter: AnthropicAdapter, fake_server: FakeServer, body: Any
) -> None:
    fake_server.reply(200, body)

    with pytest.raises(ProviderError):
        await adapter.chat(HELLO, OPTIONS)

    assert len(fake_server.requests) == 1


async def test_timeout_is_an_overloaded_error(fake_server: FakeServer) -> None:
    fake_server.reply(200, TEXT_REPLY, delay=0.5)

    async with AnthropicAdapter(
        api_key="k", base_url=fake_server.url, max_retries=0, timeout=0.1
    ) as adapter:
        with pytest.raises(OverloadedError, match="timed out"):
            await adapter.chat(HELLO, OPTIONS)


async def test_connection_refused_is_retried_then_overloaded() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The port is closed again: nothing listens there.
    async with AnthropicAdapter(
        api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=1, retry_base_delay=0.001
    ) as adapter:
        with pytest.raises(OverloadedError) as caught:
            await adapter.chat(HELLO, OPTIONS)

    assert caught.value.status is None
    assert "gave up after 2 attempts" in " ".join(caught.value.__notes__)


async def test_cancellation_propagates_and_is_not_retried(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(200, TEXT_REPLY, delay=0.5)

    task = asyncio.create_task(adapter.chat(HELLO, OPTIONS))
    assert await asyncio.to_thread(fake_server.wait_for_requests, 1)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(fake_server.requests) == 1


async def test_base_url_without_api_key_uses_a_placeholder(fake_server: FakeServer) -> None:
    fake_server.reply(200, TEXT_REPLY)

    async with AnthropicAdapter(base_url=fake_server.url) as adapter:
        response = await adapter.chat(HELLO, OPTIONS)

    assert response.text == "hi there"


def test_no_credentials_for_the_official_endpoint_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicAdapter()


def test_missing_sdk_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)

    with pytest.raises(ConfigurationError, match=r"pip install 'oma-actors\[anthropic\]'"):
        AnthropicAdapter(api_key="k")


async def test_image_without_data_or_url_is_rejected_before_sending(
    adapter: AnthropicAdapter, fake_server: FakeServer
) -> None:
    with pytest.raises(ConfigurationError, match="data or url"):
        await adapter.chat([Message("user", [ImageBlock("image/png")])], OPTIONS)

    assert fake_server.requests == []
