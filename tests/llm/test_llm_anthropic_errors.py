"""AnthropicAdapter against a fake Messages API: errors, retries, timeouts and credentials."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from anthropic_replies import HELLO, OPTIONS, TEXT_REPLY, adapter_for, error_body
from fake_server import closed_port

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


@pytest.fixture
async def adapter(fake_server: FakeServer) -> AsyncIterator[AnthropicAdapter]:
    async with adapter_for(fake_server) as adapter:
        yield adapter


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
    async with AnthropicAdapter(
        api_key="k",
        base_url=f"http://127.0.0.1:{closed_port()}",
        max_retries=1,
        retry_base_delay=0.001,
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
