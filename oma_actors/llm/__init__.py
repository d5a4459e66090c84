"""Model adapters: the ``LLMAdapter`` seam and its Anthropic and OpenAI implementations.

Importing this package does not import either SDK; an adapter imports its SDK when built.
"""

from oma_actors.llm.anthropic import AnthropicAdapter
from oma_actors.llm.base import LLMAdapter
from oma_actors.llm.factory import create_adapter
from oma_actors.llm.openai import OpenAIAdapter
from oma_actors.llm.retry import with_retries

__all__ = [
    "AnthropicAdapter",
    "LLMAdapter",
    "OpenAIAdapter",
    "create_adapter",
    "with_retries",
]
