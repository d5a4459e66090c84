"""``create_adapter``: build the model adapter an agent's ``provider`` names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oma_actors.errors import ConfigurationError
from oma_actors.llm.anthropic import AnthropicAdapter
from oma_actors.llm.openai import OpenAIAdapter

if TYPE_CHECKING:
    from oma_actors.llm.base import LLMAdapter

PROVIDERS = ("anthropic", "openai")
"""The provider names ``create_adapter`` can build an adapter for."""


def create_adapter(
    *,
    provider: str | None,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float | None = None,
) -> LLMAdapter:
    """Build the adapter for ``provider``; the SDK is imported only now.

    The adapter keeps its defaults: a call makes at most 4 attempts (3 retries of rate limits,
    overloads, timeouts and lost connections), each of at most ``timeout`` seconds.

    Args:
        provider: ``"anthropic"`` or ``"openai"`` (also any OpenAI-compatible server via
            ``base_url``). ``"scripted"`` has no built-in adapter: pass one explicitly.
        model: the model name the agent will use; must not be empty.
        base_url: another endpoint for the provider's API (a proxy, Ollama, vLLM, ...).
        api_key: the API key; defaults to the SDK's environment lookup.
        timeout: seconds allowed for one HTTP attempt; ``None`` keeps the SDK's default (600 s,
            5 s to connect). ``AgentConfig`` does not carry it: an agent that needs another
            timeout passes ``adapter=AnthropicAdapter(timeout=...)`` (or ``OpenAIAdapter``).

    Returns:
        A new adapter. It holds an HTTP connection pool; ``aclose()`` releases it.

    Raises:
        ConfigurationError: the provider is missing, unknown or ``"scripted"``, the model is empty,
            the provider's SDK extra is not installed, or no credentials were found.
    """
    if provider == "scripted":
        raise ConfigurationError(
            "provider 'scripted' has no built-in adapter: pass an explicit adapter, e.g. "
            "AgentConfig(..., adapter=ScriptedAdapter([...])) with "
            "'from oma_actors.llm import ScriptedAdapter'"
        )
    if provider not in PROVIDERS:
        named = "no provider" if provider is None else f"unknown provider {provider!r}"
        raise ConfigurationError(
            f"{named} for model {model!r}: set provider to 'anthropic' or 'openai' "
            "(OpenAI-compatible servers such as Ollama or vLLM via base_url=...), "
            "or pass an explicit adapter=..."
        )
    if not model:
        raise ConfigurationError(f"provider {provider!r} needs a model name (model='...')")
    if provider == "anthropic":
        return AnthropicAdapter(api_key=api_key, base_url=base_url, timeout=timeout)
    return OpenAIAdapter(api_key=api_key, base_url=base_url, timeout=timeout)
