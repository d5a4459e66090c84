"""The model adapter seam."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.domain.messages import ChatOptions, LLMResponse, Message


@runtime_checkable
class LLMAdapter(Protocol):
    """Anything that turns a conversation into one model response."""

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        """Send ``messages`` with ``options`` and return the model's response.

        Raises:
            LLMError: a subclass naming the provider failure (auth, rate limit, overload, ...).
        """
        ...
