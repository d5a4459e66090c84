"""A tool-using agent whose conversation outgrows its context strategy (shared by the tests).

The model calls the ``step`` tool five times and then answers. Its next move depends only on
the last tool result (``"step k"``), never on how much history it is shown, so a run with a
strategy, a restored run and a baseline all make the same calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel

from oma_actors import AgentConfig, Team, TokenUsage, ToolContext, define_tool
from oma_actors.agents.context import ContextStrategy
from oma_actors.domain.jsonforms import message_to_json
from oma_actors.llm import (
    ChatOptions,
    LLMResponse,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from oma_actors.testing import ScriptedAdapter

STEPS = 5
SUMMARY = "the agent ran steps"


class Step(BaseModel):
    n: int


def last_step(messages: Sequence[Message]) -> int:
    """The step the last tool result reports (0 before any)."""
    last = messages[-1]
    for block in last.content:
        if isinstance(block, ToolResultBlock) and isinstance(block.content, str):
            return int(block.content.split()[1])
    return 0


def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """Call ``step`` until step ``STEPS``; answer a summary request with ``SUMMARY``."""
    if not options.tools:  # a summary call (Summarize asks without tools)
        return LLMResponse([TextBlock(SUMMARY)], usage=TokenUsage(7, 3))
    done = last_step(messages)
    if done >= STEPS:
        return LLMResponse([TextBlock(f"finished after {done} steps")], usage=TokenUsage(1, 1))
    call = ToolUseBlock(f"call-{done + 1}", "step", {"n": done + 1})
    return LLMResponse([call], stop_reason="tool_use", usage=TokenUsage(2, 1))


def team(adapter: ScriptedAdapter, strategy: ContextStrategy | None, payload: int = 40) -> Team:
    """One agent ``w`` with the ``step`` tool (results padded to ``payload`` characters)."""

    async def step(args: Step, ctx: ToolContext) -> str:
        return f"step {args.n} " + "x" * payload

    tool = define_tool(name="step", description="one step", input_model=Step, execute=step)
    agent = AgentConfig("w", adapter=adapter, tools=[tool], max_turns=20, context_strategy=strategy)
    return Team("t", [agent])


def sent(adapter: ScriptedAdapter) -> list[str]:
    """Every conversation the adapter was sent with tools (turns, not summary calls), as JSON."""
    return [
        json.dumps([message_to_json(m) for m in call.messages])
        for call in adapter.calls
        if call.options.tools
    ]
