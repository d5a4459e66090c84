"""Context strategies (OMA's ``contextStrategy``): how a long conversation shrinks before a call.

An agent with ``AgentConfig(context_strategy=...)`` has its conversation rewritten just before
each model call when the strategy's threshold is crossed; the rewrite is what the model sees
from then on, what the checkpoint saves and what the journal records as ``context/replace``
(with the lineage of every block it derived, and the layout a fold needs to rebuild it exactly).

- ``SlidingWindow(max_turns)``: keep the prompt and the last ``max_turns`` turns (an assistant
  message with the user message that answers it, so a ``tool_use`` never loses its
  ``tool_result``); a notice in the prompt message says that older turns were removed.
- ``Summarize(max_tokens, summarizer=None)``: once the estimated size passes ``max_tokens``, the
  older half of the turns is replaced by a model-written summary in the prompt message. The
  summary call uses ``summarizer`` (or the agent's own model, without tools); its tokens count
  towards the agent's ``max_token_budget`` and the run's budgets.
- ``CompressToolResults(max_chars)``: a tool result longer than ``max_chars`` that the model has
  already answered is replaced by a short marker (errors are kept whole).
- ``CustomContext(fn)``: ``fn`` gets the conversation and returns the one to send; blocks it
  passes through keep their lineage, blocks it makes are recorded verbatim. A block it was given
  must not be edited in place (the task fails): the journal would not see the change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from oma_actors.domain.messages import ContentBlock, Message, TokenUsage
from oma_actors.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from oma_actors.agents.config import AgentConfig


class ContextStrategyError(ConfigurationError):
    """A strategy produced a conversation the model cannot be sent (e.g. a split tool pair)."""


def _positive(owner: str, name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"{owner}.{name} must be an int >= 1, got {value!r}")


@dataclass(frozen=True, slots=True)
class SlidingWindow:
    """Keep the prompt and the last ``max_turns`` turns (OMA's ``sliding-window``)."""

    max_turns: int
    kind: ClassVar[str] = "sliding-window"

    def __post_init__(self) -> None:
        _positive("SlidingWindow", "max_turns", self.max_turns)


@dataclass(frozen=True, slots=True)
class Summarize:
    """Summarize the older turns once the conversation passes ``max_tokens`` (estimated).

    Args:
        max_tokens: the threshold, in estimated tokens (OMA's ``estimateTokens``: 4 content
            characters per token, an image 64 characters).
        summarizer: the agent that writes the summary; ``None``: the agent's own model.
    """

    max_tokens: int
    summarizer: AgentConfig | None = field(default=None, compare=False)
    kind: ClassVar[str] = "summarize"

    def __post_init__(self) -> None:
        _positive("Summarize", "max_tokens", self.max_tokens)
        from oma_actors.agents.config import AgentConfig  # config imports this module

        if self.summarizer is not None and not isinstance(self.summarizer, AgentConfig):
            raise ConfigurationError(
                f"Summarize.summarizer must be an AgentConfig or None, got {self.summarizer!r}"
            )


@dataclass(frozen=True, slots=True)
class CompressToolResults:
    """Replace answered tool results longer than ``max_chars`` by a marker.

    The size is OMA's ``toolResultContentSize`` (an image counts its base64 or URL). OMA's
    ``compressToolResults: {minChars: N}`` compresses from ``N`` characters on: it is
    ``CompressToolResults(N - 1)``.
    """

    max_chars: int
    kind: ClassVar[str] = "compress-tool-results"

    def __post_init__(self) -> None:
        _positive("CompressToolResults", "max_chars", self.max_chars)


@dataclass(frozen=True, slots=True)
class CustomContext:
    """Rewrite the conversation with ``fn`` before every model call (OMA's ``custom``)."""

    fn: Callable[[list[Message]], list[Message]] = field(compare=False)
    kind: ClassVar[str] = "custom"

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ConfigurationError(f"CustomContext.fn must be callable, got {self.fn!r}")


ContextStrategy = SlidingWindow | Summarize | CompressToolResults | CustomContext
STRATEGY_TYPES = (SlidingWindow, Summarize, CompressToolResults, CustomContext)


@dataclass(frozen=True, slots=True)
class Replacement:
    """A block a rewrite made, and the blocks it stands for (its lineage's sources)."""

    block: ContentBlock
    sources: tuple[ContentBlock, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRewrite:
    """One application of a strategy: the conversation before and after, and what it made.

    Attributes:
        strategy: OMA's kind (``sliding-window``, ``summarize``, ``compress-tool-results``,
            ``custom``).
        before: the conversation the strategy was given.
        after: the conversation the model is sent; its blocks are blocks of ``before`` (the
            very objects) or ``replacements``' blocks.
        replacements: the blocks it made, each with its sources.
        detail: OMA's ``detail`` of ``context/replace`` (e.g. the summary call's usage).
        usage: tokens the rewrite itself spent (the summary call), counted like a turn's.
    """

    strategy: str
    before: tuple[Message, ...]
    after: tuple[Message, ...]
    replacements: tuple[Replacement, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)
    usage: TokenUsage = field(default_factory=TokenUsage)

    def dropped(self) -> list[ContentBlock]:
        """Blocks of ``before`` that are not in ``after`` (by identity)."""
        kept = {id(block) for message in self.after for block in message.content}
        return [b for message in self.before for b in message.content if id(b) not in kept]


__all__ = [
    "CompressToolResults",
    "ContextRewrite",
    "ContextStrategy",
    "ContextStrategyError",
    "CustomContext",
    "Replacement",
    "STRATEGY_TYPES",
    "SlidingWindow",
    "Summarize",
]
