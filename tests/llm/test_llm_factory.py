"""create_adapter: provider names, configuration errors and a missing SDK extra."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import anthropic
import openai
import pytest
from anthropic_replies import HELLO, OPTIONS, TEXT_REPLY

from oma_actors.errors import ConfigurationError, OverloadedError
from oma_actors.llm import AnthropicAdapter, LLMAdapter, OpenAIAdapter, create_adapter

if TYPE_CHECKING:
    from fake_server import FakeServer


async def test_anthropic_provider_builds_an_anthropic_adapter() -> None:
    adapter = create_adapter(provider="anthropic", model="claude-test", api_key="k")

    assert isinstance(adapter, AnthropicAdapter)
    assert isinstance(adapter, LLMAdapter)
    await adapter.aclose()


async def test_openai_provider_builds_an_openai_adapter_for_a_local_server() -> None:
    adapter = create_adapter(
        provider="openai", model="llama3", base_url="http://127.0.0.1:11434/v1"
    )

    assert isinstance(adapter, OpenAIAdapter)
    assert isinstance(adapter, LLMAdapter)
    await adapter.aclose()


def test_scripted_provider_asks_for_an_explicit_adapter() -> None:
    with pytest.raises(ConfigurationError, match=r"'scripted'.*ScriptedAdapter"):
        create_adapter(provider="scripted", model="m")


def test_missing_provider_says_what_to_set() -> None:
    with pytest.raises(ConfigurationError, match=r"no provider for model 'm'.*'anthropic'"):
        create_adapter(provider=None, model="m")


def test_unknown_provider_is_named() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown provider 'gemini'.*adapter="):
        create_adapter(provider="gemini", model="m")


def test_empty_model_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="model name"):
        create_adapter(provider="anthropic", model="", api_key="k")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_missing_sdk_extra_tells_what_to_install(
    monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    monkeypatch.setitem(sys.modules, provider, None)

    with pytest.raises(ConfigurationError, match=rf"pip install 'oma-actors\[{provider}\]'"):
        create_adapter(provider=provider, model="m", api_key="k")


def test_missing_credentials_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        create_adapter(provider="openai", model="gpt-test")


@pytest.mark.parametrize(
    ("provider", "sdk_default"),
    [("anthropic", anthropic.DEFAULT_TIMEOUT), ("openai", openai.DEFAULT_TIMEOUT)],
)
async def test_a_built_adapter_keeps_the_sdk_s_own_timeout(
    provider: str, sdk_default: object
) -> None:
    # 600 s per attempt (5 s to connect): a long answer is no failure to retry and pay for again.
    adapter = create_adapter(provider=provider, model="m", base_url="http://127.0.0.1:1/v1")
    assert isinstance(adapter, AnthropicAdapter | OpenAIAdapter)

    assert adapter._client.timeout == sdk_default
    await adapter.aclose()


async def test_create_adapter_takes_a_timeout_for_each_attempt(fake_server: FakeServer) -> None:
    for _ in range(4):
        fake_server.reply(200, TEXT_REPLY, delay=0.5)
    adapter = create_adapter(provider="anthropic", model="m", base_url=fake_server.url, timeout=0.2)

    with pytest.raises(OverloadedError, match="request timed out") as caught:
        await adapter.chat(HELLO, OPTIONS)
    await adapter.aclose()

    # A timed-out attempt is retried, as the SDKs do: 4 attempts, as the docstring says.
    assert len(fake_server.requests) == 4
    assert caught.value.__notes__ == ["anthropic: gave up after 4 attempts"]
