"""Model adapters: the ``LLMAdapter`` seam, the SDK adapters and the offline ``ScriptedAdapter``.

Importing this package does not import either SDK; an adapter imports its SDK when built.
"""

from oma_actors.domain.messages import (
    ChatOptions,
    ContentBlock,
    ImageBlock,
    LLMResponse,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from oma_actors.llm.anthropic import AnthropicAdapter
from oma_actors.llm.base import LLMAdapter
from oma_actors.llm.factory import create_adapter
from oma_actors.llm.openai import OpenAIAdapter
from oma_actors.llm.retry import with_retries
from oma_actors.llm.scripted import RecordedCall, ScriptedAdapter, text_response

__all__ = [
    "AnthropicAdapter",
    "ChatOptions",
    "ContentBlock",
    "ImageBlock",
    "LLMAdapter",
    "LLMResponse",
    "Message",
    "OpenAIAdapter",
    "ReasoningBlock",
    "RecordedCall",
    "ScriptedAdapter",
    "TextBlock",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "create_adapter",
    "text_response",
    "with_retries",
]
