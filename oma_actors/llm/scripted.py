"""``ScriptedAdapter``: a deterministic, offline model for tests, the demo and the sidecar.

It lives with the other adapters because it is one: production code (``oma demo``, the sidecar's
``scripted`` provider) runs it too, so it must not depend on the test kit. ``oma_actors.testing``
and the package root re-export it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from oma_actors.domain.messages import ChatOptions, LLMResponse, Message, TextBlock, TokenUsage

Script = Sequence[LLMResponse] | Callable[[Sequence[Message], ChatOptions], LLMResponse]


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One call the adapter received: a copy of the conversation and the options."""

    messages: tuple[Message, ...]
    options: ChatOptions

    @property
    def prompt(self) -> str:
        """All text of the conversation's user messages, joined (handy in assertions)."""
        parts = [
            block.text
            for message in self.messages
            if message.role == "user"
            for block in message.content
            if isinstance(block, TextBlock)
        ]
        return "\n".join(parts)


class ScriptedAdapter:
    """Plays back a list of responses in order, or a function of the conversation.

    Args:
        script: the responses, or ``f(messages, options) -> LLMResponse``.
        delay: seconds to wait before answering (simulates model latency).

    Raises (from ``chat``):
        AssertionError: the list is exhausted (a test asked for more calls than it scripted).
    """

    def __init__(self, script: Script, *, delay: float = 0.0) -> None:
        self._script = script
        self._delay = delay
        self._next = 0
        self.calls: list[RecordedCall] = []

    @property
    def call_count(self) -> int:
        """How many times ``chat`` was called."""
        return len(self.calls)

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        """Record the call and return the next scripted response."""
        self.calls.append(RecordedCall(tuple(messages), options))
        if self._delay:
            await asyncio.sleep(self._delay)
        if callable(self._script):
            return self._script(messages, options)
        if self._next >= len(self._script):
            raise AssertionError(
                f"ScriptedAdapter exhausted: call {self._next + 1} but only "
                f"{len(self._script)} responses were scripted"
            )
        response = self._script[self._next]
        self._next += 1
        return response


def text_response(text: str, *, input_tokens: int = 1, output_tokens: int = 1) -> LLMResponse:
    """A final-answer response with ``text`` and the given usage."""
    return LLMResponse(
        [TextBlock(text)], stop_reason="end_turn", usage=TokenUsage(input_tokens, output_tokens)
    )
