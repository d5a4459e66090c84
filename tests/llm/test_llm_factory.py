"""create_adapter: provider names, configuration errors and a missing SDK extra."""

from __future__ import annotations

import sys

import pytest

from oma_actors.errors import ConfigurationError
from oma_actors.llm import AnthropicAdapter, LLMAdapter, OpenAIAdapter, create_adapter


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
