"""``Summarize`` at its edges: the threshold, which turns it condenses, an empty summary.

OMA's ``summarizeMessages`` leaves a conversation estimated at exactly ``maxTokens`` alone,
summarizes the older ``floor(turns / 2)`` turns (its split is on an even message boundary), asks
the summarizer about those turns only, and says so when the summary came back empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from oma_actors import Summarize, TokenUsage
from oma_actors.agents.context_rules import SUMMARY_UNAVAILABLE, estimate_tokens, strategy_block
from oma_actors.agents.context_step import ContextStep
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock
from oma_actors.testing import ScriptedAdapter


def conversation(turns: int) -> tuple[Message, ...]:
    """The prompt and ``turns`` text turns (an answer and the next request)."""
    out = [Message("user", [TextBlock("prompt")])]
    for i in range(1, turns + 1):
        out += [
            Message("assistant", [TextBlock(f"answer-{i}")]),
            Message("user", [TextBlock(f"request-{i}")]),
        ]
    return tuple(out)


def reply(text: str) -> ScriptedAdapter:
    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        return LLMResponse([TextBlock(text)], usage=TokenUsage(1, 1))

    return ScriptedAdapter(script)


def step(adapter: ScriptedAdapter, max_tokens: int) -> ContextStep:
    return ContextStep(
        strategy=Summarize(max_tokens), adapter=adapter, options=ChatOptions(model="m")
    )


async def test_a_conversation_at_the_threshold_is_not_summarized() -> None:
    before = conversation(4)
    size = estimate_tokens(before)
    adapter = reply("short")
    assert await step(adapter, size).rewrite(before) is None
    assert adapter.call_count == 0
    assert await step(adapter, size - 1).rewrite(before) is not None
    assert adapter.call_count == 1


async def test_the_older_half_rounds_down_and_only_it_is_summarized() -> None:
    before = conversation(3)
    adapter = reply("short")
    rewrite = await step(adapter, 1).rewrite(before)
    assert rewrite is not None
    assert rewrite.after[1:] == before[3:]  # one turn condensed, two kept
    assert all(a is b for a, b in zip(rewrite.after[1:], before[3:], strict=True))
    asked = adapter.calls[0].prompt
    assert "answer-1" in asked
    assert "request-1" in asked
    assert "answer-2" not in asked  # the turns kept are not what the summary stands for
    assert "request-3" not in asked


async def test_an_empty_summary_says_it_is_unavailable_and_is_superseded_later() -> None:
    adapter = reply("   ")
    rewrite = await step(adapter, 1).rewrite(conversation(4))
    assert rewrite is not None
    [made] = rewrite.replacements
    assert made.block == TextBlock(SUMMARY_UNAVAILABLE)  # OMA's text
    # It is still the strategy's block: the next summary replaces it, not adds to it.
    assert strategy_block(rewrite.after[0]) is made.block
