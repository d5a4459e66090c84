"""Conversation values shared by the runner, the model adapters and the checkpoint codec.

They mirror the Anthropic-style content-block model OMA uses: a message is a role plus a list of
blocks; a tool call is a ``ToolUseBlock`` answered by a ``ToolResultBlock`` with the same id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Plain text."""

    text: str
    type: Literal["text"] = field(default="text", init=False, repr=False)


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image, inline (base64 ``data``) or by ``url`` (rich tool results, decision D8)."""

    media_type: str
    data: str | None = None
    url: str | None = None
    type: Literal["image"] = field(default="image", init=False, repr=False)


@dataclass(frozen=True, slots=True)
class ReasoningBlock:
    """The model's thinking, kept in the conversation as OMA keeps it (its ``reasoning`` block).

    ``signature`` is the provider's proof of the thinking (Anthropic's thinking ``signature``):
    an adapter that re-sends thinking must send it unchanged, or the provider refuses the turn.
    """

    text: str
    signature: str | None = field(default=None, kw_only=True)
    type: Literal["reasoning"] = field(default="reasoning", init=False, repr=False)


UNPARSED_ARGUMENTS = "_raw_arguments"
"""The input key under which a model adapter keeps tool-call arguments that are not a JSON object.

A model's arguments can be cut off (``max_tokens``) or malformed. Refusing the whole response
would lose the turn, so the call is kept with its text under this one key, and the tool layer
answers it with an error result the model sees, without running the tool or asking an approval
gate (pydantic ignores an unknown key: a tool whose fields all have defaults would otherwise run
on them). Adapters write it (``llm.sdk.unparsed_arguments``); ``tools.validation`` reads it.
"""


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A tool call issued by the model; ``id`` is the model-issued tool call id."""

    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = field(default="tool_use", init=False, repr=False)


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The answer to one tool call, sent back to the model in a user message."""

    tool_use_id: str
    content: str | list[ContentBlock]
    is_error: bool = False
    type: Literal["tool_result"] = field(default="tool_result", init=False, repr=False)


ContentBlock = TextBlock | ImageBlock | ReasoningBlock | ToolUseBlock | ToolResultBlock


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message."""

    role: Literal["user", "assistant"]
    content: list[ContentBlock]


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts; ``+`` adds two usages, ``-`` gives what one gained over the other."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input_tokens - other.input_tokens, self.output_tokens - other.output_tokens
        )


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatOptions:
    """Per-call options handed to an adapter."""

    model: str
    system_prompt: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """One model response: content blocks, why it stopped, usage."""

    content: list[ContentBlock]
    stop_reason: str = "end_turn"
    usage: TokenUsage = field(default_factory=TokenUsage)
    model: str = ""

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The tool calls of this response, in the order the model issued them."""
        return [block for block in self.content if isinstance(block, ToolUseBlock)]

    @property
    def text(self) -> str:
        """The concatenated text blocks of this response."""
        return "".join(block.text for block in self.content if isinstance(block, TextBlock))


def text_of(content: str | list[ContentBlock]) -> str:
    """Flatten a tool-result or message content to its text."""
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextBlock))
