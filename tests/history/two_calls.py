"""The two-call team of the fork tests: agent ``w`` asks for a ``safe`` (idempotent) call and a
``risky`` one at once, and each waits in the parent run until the other has started, so the
parent's history has a point where both calls are open."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pydantic import BaseModel

from oma_actors import AgentConfig, Team, TokenUsage, ToolContext, define_tool
from oma_actors.llm import LLMResponse, TextBlock, ToolUseBlock
from oma_actors.testing import ScriptedAdapter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from oma_actors.llm import ChatOptions, LLMAdapter, Message


class Note(BaseModel):
    text: str


def answer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
    """Turn 1 asks for ``safe`` (s0) and ``risky`` (u0) at once; turn 2 answers."""
    if not any(m.role == "assistant" for m in messages):
        calls = [
            ToolUseBlock("s0", "safe", {"text": "a"}),
            ToolUseBlock("u0", "risky", {"text": "b"}),
        ]
        return LLMResponse(calls, stop_reason="tool_use", usage=TokenUsage(1, 1))  # type: ignore[arg-type]
    return LLMResponse([TextBlock("done")], usage=TokenUsage(1, 1))


def two_tools(
    effects: list[tuple[str | None, str]],
    *,
    parent: str = "r1",
    model: LLMAdapter | None = None,
    risky_effect: str = "unsafe",
) -> Team:
    """Agent ``w`` with ``safe`` (idempotent) and ``risky`` (of effect ``risky_effect``).

    In the run ``parent``, ``risky`` (dispatched first: its ``tool/call`` is durable before it
    runs) waits until ``safe`` has returned, and ``safe`` until ``risky`` has started. A safe
    call's ``tool/call`` is journaled with its commit, just before its ``tool/result``: so the
    parent's history has a point at ``safe``'s ``tool/call`` where both calls are open.
    """
    risky_started = asyncio.Event()
    safe_returned = asyncio.Event()

    async def safe(args: Note, ctx: ToolContext) -> str:
        effects.append((ctx.run_id, ctx.tool_call_id or ""))
        if ctx.run_id == parent:
            await asyncio.wait_for(risky_started.wait(), 5)
            safe_returned.set()
        return f"safe {args.text}"

    async def risky(args: Note, ctx: ToolContext) -> str:
        effects.append((ctx.run_id, ctx.tool_call_id or ""))
        if ctx.run_id == parent:
            risky_started.set()
            await asyncio.wait_for(safe_returned.wait(), 5)
        return f"risky {args.text}"

    tools = [
        define_tool(name="safe", description="n", input_model=Note, execute=safe),
        define_tool(
            name="risky",
            description="n",
            input_model=Note,
            execute=risky,
            effect=risky_effect,  # type: ignore[arg-type]
        ),
    ]
    agent = AgentConfig("w", adapter=model or ScriptedAdapter(answer), tools=tools, max_turns=5)
    return Team("t", [agent])


def of(effects: list[tuple[str | None, str]], run_id: str) -> list[str]:
    return [call for run, call in effects if run == run_id]
