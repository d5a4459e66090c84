"""Applying an agent's context strategy just before a model call (the runner's side).

OMA applies the strategy before every model call; so do we, on the conversation about to be
sent. A rewrite that changes nothing is no rewrite (no event). The summary call of ``Summarize``
is made here, on the summarizer's adapter (or the agent's own, without tools); like OMA, it is
not a turn of the conversation: its usage is the rewrite's, recorded in ``context/replace``'s
``detail`` and added to the task's usage (and so to its budget).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from oma_actors.agents.context import (
    CompressToolResults,
    ContextRewrite,
    CustomContext,
    Replacement,
    SlidingWindow,
    Summarize,
)
from oma_actors.agents.context_rules import (
    SUMMARY_MARK,
    SUMMARY_UNAVAILABLE,
    check_sendable,
    compress_tool_results,
    custom,
    estimate_tokens,
    prompt_with,
    sliding_window,
    strategy_block,
    summary_input,
    summary_split,
)
from oma_actors.domain.jsonforms import usage_to_json
from oma_actors.domain.messages import ChatOptions, Message, TextBlock

if TYPE_CHECKING:
    from oma_actors.agents.context import ContextStrategy
    from oma_actors.llm.base import LLMAdapter

SUMMARY_INSTRUCTIONS = "\n".join(
    [
        "Summarize the following conversation history for an LLM that will continue it.",
        "- Keep the user's goals, constraints and decisions.",
        "- Keep key tool outputs and open questions.",
        "- Use concise bullets; do not invent details.",
    ]
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextStep:
    """An agent's strategy with what its summary calls use.

    Attributes:
        strategy: the agent's ``context_strategy``.
        adapter: the adapter of summary calls (the summarizer's, or the agent's).
        options: the options of summary calls (no tools).
    """

    strategy: ContextStrategy
    adapter: LLMAdapter
    options: ChatOptions

    async def rewrite(self, conversation: tuple[Message, ...]) -> ContextRewrite | None:
        """The rewrite of ``conversation`` before a model call, or ``None`` (send it as is).

        Raises:
            ContextStrategyError: the strategy's result cannot be sent (the task fails).
            LLMError: the summary call failed.
        """
        found = await self._apply(conversation)
        if found is not None:
            check_sendable(found.after)
        return found

    async def _apply(self, conversation: tuple[Message, ...]) -> ContextRewrite | None:
        strategy = self.strategy
        if isinstance(strategy, SlidingWindow):
            return sliding_window(conversation, strategy)
        if isinstance(strategy, CompressToolResults):
            return compress_tool_results(conversation, strategy)
        if isinstance(strategy, CustomContext):
            return custom(conversation, strategy)
        return await self._summarize(conversation, strategy)

    async def _summarize(
        self, conversation: tuple[Message, ...], strategy: Summarize
    ) -> ContextRewrite | None:
        if estimate_tokens(conversation) <= strategy.max_tokens:
            return None
        split = summary_split(conversation)
        if split is None:
            return None
        older, recent = split
        prompt = conversation[0]
        previous = strategy_block(prompt)
        request = Message(
            "user",
            [
                TextBlock(SUMMARY_INSTRUCTIONS),
                TextBlock("Conversation:\n" + summary_input(older, previous)),
            ],
        )
        response = await self.adapter.chat([request], self.options)
        text = response.text.strip()
        summary = TextBlock(f"{SUMMARY_MARK}\n{text}" if text else SUMMARY_UNAVAILABLE)
        # The summary stands for the turns it replaced and for the summary it supersedes.
        sources = tuple(b for m in older for b in m.content)
        if previous is not None:
            sources = (previous, *sources)
        return ContextRewrite(
            strategy=strategy.kind,
            before=conversation,
            after=(prompt_with(prompt, summary), *recent),
            replacements=(Replacement(summary, sources),),
            detail={"summaryModel": self.options.model, "usage": usage_to_json(response.usage)},
            usage=response.usage,
        )


def summary_options(options: ChatOptions) -> ChatOptions:
    """A summary call's options: the model and system prompt given, never tools."""
    return replace(options, tools=[])
