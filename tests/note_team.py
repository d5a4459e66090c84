"""A deterministic scripted team whose one tool, ``note``, records each execution.

Each agent answers turn ``n`` with ``calls`` calls of ``note`` (ids ``c<n>-<i>``) until ``turns``
turns are done, then with ``"done"``. Every execution calls ``record(ctx)`` first, so a test can
keep a ledger of effects outside the run: a re-run shows up as a repeated tool call id. Shared
by the journal-first tests (``tests/journal``) and the history and fork tests (``tests/history``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel

from oma_actors import AgentConfig, Team, TokenUsage, ToolContext, define_tool
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock, ToolUseBlock
from oma_actors.testing import ScriptedAdapter


class Note(BaseModel):
    text: str


def script(turns: int, calls: int) -> Callable[[Sequence[Message], ChatOptions], LLMResponse]:
    """The model: ``calls`` calls of ``note`` per turn for ``turns`` turns, then ``"done"``."""

    def answer(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        n = sum(1 for m in messages if m.role == "assistant")
        if n < turns:
            blocks = [ToolUseBlock(f"c{n}-{i}", "note", {"text": f"t{n}"}) for i in range(calls)]
            return LLMResponse(blocks, stop_reason="tool_use", usage=TokenUsage(7, 3))  # type: ignore[arg-type]
        return LLMResponse([TextBlock("done")], usage=TokenUsage(2, 1))

    return answer


def note_team(
    turns: int,
    calls: int,
    effect: str,
    record: Callable[[ToolContext], None],
    *,
    padding: int = 0,
    agents: Sequence[str] = ("w", "v"),
) -> Team:
    """Team ``t`` of ``agents``, each scripted by ``script(turns, calls)`` with the tool ``note``
    of ``effect``, which calls ``record`` and answers ``noted <text>`` plus ``padding`` x's."""

    async def note(args: Note, ctx: ToolContext) -> str:
        record(ctx)
        return f"noted {args.text}" + (" " + "x" * padding if padding else "")

    tool = define_tool(
        name="note", description="n", input_model=Note, execute=note,
        effect=effect,  # type: ignore[arg-type]
    )  # fmt: skip
    return Team(
        "t",
        [
            AgentConfig(
                name,
                adapter=ScriptedAdapter(script(turns, calls)),
                tools=[tool],
                max_turns=turns + 5,
            )
            for name in agents
        ],
    )
