"""OpenAIAdapter against a fake Chat Completions API: errors, retries and credentials."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import pytest
from fake_server import closed_port
from openai_replies import ERROR, HELLO, OPTIONS, TEXT_REPLY, adapter_for

from oma_actors.errors import (
    AuthenticationError,
    ConfigurationError,
    OverloadedError,
    ProviderError,
    RateLimitError,
)
from oma_actors.llm import OpenAIAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fake_server import FakeServer


@pytest.fixture
async def adapter(fake_server: FakeServer) -> AsyncIterator[OpenAIAdapter]:
    async with adapter_for(fake_server) as adapter:
        yield adapter


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failure_is_typed_and_not_retried(
    adapter: OpenAIAdapter, fake_server: FakeServer, status: int
) -> None:
    fake_server.reply(status, {"error": {"message": "Incorrect API key", "type": "auth"}})

    with pytest.raises(AuthenticationError) as caught:
        await adapter.chat(HELLO, OPTIONS)

    assert caught.value.provider == "openai"
    assert caught.value.status == status
    assert "Incorrect API key" in str(caught.value)
    assert len(fake_server.requests) == 1


async def test_rate_limit_then_success_is_retried(
    adapter: OpenAIAdapter, fake_server: FakeServer
) -> None:
    fake_server.reply(429, {"error": {"message": "Rate limit reached"}})
    fake_server.reply(200, TEXT_REPLY)

    assert (await adapter.chat(HELLO, OPTIONS)).text == "hi there"
    assert len(fake_server.requests) == 2


async def test_rate_limit_exhausted(adapter: OpenAIAdapter, fake_server: FakeServer) -> None:
    fake_server.reply_many(3, 429, {"error": {"message": "Rate limit reached"}})

    with pytest.raises(RateLimitError):
        await adapter.chat(HELLO, OPTIONS)
    assert len(fake_server.requests) == 3


@pytest.mark.parametrize("status", [408, 409])
async def test_timeout_and_conflict_statuses_are_retried(
    adapter: OpenAIAdapter, fake_server: FakeServer, status: int
) -> None:
    fake_server.reply(status, {"error": {"message": "try again"}})
    fake_server.reply(200, TEXT_REPLY)

    assert (await adapter.chat(HELLO, OPTIONS)).text == "hi there"
    assert len(fake_server.requests) == 2


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_server_errors_retried_until_attempts_run_out(
    adapter: OpenAIAdapter, fake_server: FakeServer, status: int
) -> None:
    fake_server.reply_many(3, status, {"error": {"message": "try later"}})

    with pytest.raises(OverloadedError) as caught:
        await adapter.chat(HELLO, OPTIONS)

    assert caught.value.status == status
    assert len(fake_server.requests) == 3


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_client_errors_are_provider_errors_and_not_retried(
    adapter: OpenAIAdapter, fake_server: FakeServer, status: int
) -> None:
    fake_server.reply(status, ERROR)

    with pytest.raises(ProviderError) as caught:
        await adapter.chat(HELLO, OPTIONS)

    assert caught.value.status == status
    assert str(caught.value) == f"openai: HTTP {status}: bad thing"  # not the SDK's dump
    assert len(fake_server.requests) == 1


@pytest.mark.parametrize("body", [b"not json", {}, {"choices": []}])
async def test_unreadable_success_body_is_a_provider_error(
    adapter: OpenAIAdapter, fake_server: FakeServer, body: Any
) -> None:
    fake_server.reply(200, body)

    with pytest.raises(ProviderError):
        await adapter.chat(HELLO, OPTIONS)


async def test_base_url_without_api_key_works(fake_server: FakeServer) -> None:
    fake_server.reply(200, TEXT_REPLY)

    async with OpenAIAdapter(base_url=f"{fake_server.url}/v1") as adapter:
        response = await adapter.chat(HELLO, OPTIONS)

    assert response.text == "hi there"
    assert fake_server.requests[0].header("authorization") == "Bearer unused"


def test_no_key_for_the_official_endpoint_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIAdapter()


def test_missing_sdk_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)

    with pytest.raises(ConfigurationError, match=r"pip install 'oma-actors\[openai\]'"):
        OpenAIAdapter(api_key="k")


async def test_timeout_is_an_overloaded_error(fake_server: FakeServer) -> None:
    fake_server.reply(200, TEXT_REPLY, delay=0.5)

    async with OpenAIAdapter(
        api_key="k", base_url=f"{fake_server.url}/v1", max_retries=0, timeout=0.1
    ) as adapter:
        with pytest.raises(OverloadedError, match="openai: request timed out"):
            await adapter.chat(HELLO, OPTIONS)


async def test_connection_refused_is_an_overloaded_error() -> None:
    async with OpenAIAdapter(
        api_key="k", base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=0
    ) as adapter:
        with pytest.raises(OverloadedError, match="openai: connection failed") as caught:
            await adapter.chat(HELLO, OPTIONS)

    assert caught.value.status is None
