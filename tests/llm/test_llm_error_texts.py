"""What the adapters' errors say: never the API key, and never nothing.

A provider or proxy may echo the key it rejected in its error body; the error's message becomes
the task's failure reason, a journal record and log lines, so both adapters mask their own key.
A connection reset mid-response raises an exception with no text; the message names its type.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest
from anthropic_replies import HELLO, OPTIONS, error_body
from anthropic_replies import TEXT_REPLY as ANTHROPIC_TEXT_REPLY
from openai_replies import TEXT_REPLY as OPENAI_TEXT_REPLY

from oma_actors.errors import AuthenticationError, LLMError, OverloadedError, ProviderError
from oma_actors.llm import AnthropicAdapter, OpenAIAdapter
from oma_actors.llm.sdk import REDACTED

if TYPE_CHECKING:
    from collections.abc import Callable

    from fake_server import FakeServer

Adapter = AnthropicAdapter | OpenAIAdapter

KEY = "sk-THISISTHESECRETKEY0123456789"


def _anthropic(fake_server: FakeServer, api_key: str | None = KEY) -> Adapter:
    return AnthropicAdapter(
        api_key=api_key, base_url=fake_server.url, max_retries=1, retry_base_delay=0.001
    )


def _openai(fake_server: FakeServer, api_key: str | None = KEY) -> Adapter:
    return OpenAIAdapter(
        api_key=api_key, base_url=f"{fake_server.url}/v1", max_retries=1, retry_base_delay=0.001
    )


def _openai_error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error"}}


def _anthropic_error(message: str) -> dict[str, Any]:
    return error_body("authentication_error", message)


ADAPTERS = pytest.mark.parametrize(
    ("make", "body"),
    [(_anthropic, _anthropic_error), (_openai, _openai_error)],
    ids=["anthropic", "openai"],
)


async def _failure(adapter: Adapter) -> LLMError:
    async with adapter:
        with pytest.raises(LLMError) as caught:
            await adapter.chat(HELLO, OPTIONS)
    return caught.value


@ADAPTERS
async def test_an_echoed_key_is_masked_in_the_error(
    fake_server: FakeServer,
    make: Callable[..., Adapter],
    body: Callable[[str], dict[str, Any]],
) -> None:
    fake_server.reply(401, body(f"invalid x-api-key {KEY}"))

    error = await _failure(make(fake_server))

    assert isinstance(error, AuthenticationError)
    assert str(error).endswith(f"HTTP 401: invalid x-api-key {REDACTED}")
    assert KEY not in str(error)


@ADAPTERS
async def test_an_echoed_key_is_masked_in_retry_logs_and_the_final_error(
    fake_server: FakeServer,
    make: Callable[..., Adapter],
    body: Callable[[str], dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_server.reply_many(2, 503, body(f"upstream refused key {KEY}"))

    with caplog.at_level(logging.INFO, logger="oma_actors.llm.retry"):
        error = await _failure(make(fake_server))

    assert isinstance(error, OverloadedError)
    assert len(fake_server.requests) == 2
    assert "call failed" in caplog.text
    assert REDACTED in caplog.text
    assert KEY not in caplog.text
    assert KEY not in str(error)


@ADAPTERS
async def test_the_placeholder_key_is_not_masked(
    fake_server: FakeServer,
    make: Callable[..., Adapter],
    body: Callable[[str], dict[str, Any]],
) -> None:
    # Without a key a base_url adapter sends "unused"; masking it would garble every message
    # that has the word, and protect nothing.
    fake_server.reply(400, body("the unused field is unknown"))

    error = await _failure(make(fake_server, api_key=None))

    assert isinstance(error, ProviderError)
    assert str(error).endswith("HTTP 400: the unused field is unknown")


@pytest.mark.parametrize(
    ("provider", "make", "reply"),
    [("anthropic", _anthropic, ANTHROPIC_TEXT_REPLY), ("openai", _openai, OPENAI_TEXT_REPLY)],
)
async def test_a_connection_reset_mid_response_names_what_failed(
    fake_server: FakeServer, provider: str, make: Callable[..., Adapter], reply: dict[str, Any]
) -> None:
    fake_server.reply(200, reply, reset=True)
    fake_server.reply(200, reply, reset=True)

    error = await _failure(make(fake_server))

    assert isinstance(error, OverloadedError)
    assert len(fake_server.requests) == 2
    # httpx raises with no text here; the message says which exception instead of nothing.
    assert str(error) in {
        f"{provider}: connection failed: ReadError",
        f"{provider}: connection failed: RemoteProtocolError",
    }
