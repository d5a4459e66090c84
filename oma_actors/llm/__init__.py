"""Model adapters: the ``LLMAdapter`` seam, the SDK adapters and the offline ``ScriptedAdapter``.

Importing this package does not import either SDK; an adapter imports its SDK when built.
"""

from oma_actors.llm.anthropic import AnthropicAdapter
from oma_actors.llm.base import LLMAdapter
from oma_actors.llm.factory import create_adapter
from oma_actors.llm.openai import OpenAIAdapter
from oma_actors.llm.retry import with_retries
from oma_actors.llm.scripted import RecordedCall, ScriptedAdapter, text_response

__all__ = [
    "AnthropicAdapter",
    "LLMAdapter",
    "OpenAIAdapter",
    "RecordedCall",
    "ScriptedAdapter",
    "create_adapter",
    "text_response",
    "with_retries",
]
