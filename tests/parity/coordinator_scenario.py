"""A ``run_team`` whose coordinator's calls cost known tokens (shared by the parity tests).

The coordinator ``lead`` (model ``lead-model``) plans two dependent tasks for ``worker`` (model
``worker-model``), then writes the final answer; each call's usage is set by the test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from oma_actors import AgentConfig, Team, TokenUsage
from oma_actors.llm import ChatOptions, LLMResponse, Message, TextBlock
from oma_actors.testing import ScriptedAdapter

PLAN = [
    {"title": "Research", "description": "find facts", "assignee": "worker"},
    {
        "title": "Write",
        "description": "write it up",
        "assignee": "worker",
        "dependsOn": ["Research"],
    },
]


def answer(text: str, usage: tuple[int, int]) -> LLMResponse:
    return LLMResponse([TextBlock(text)], usage=TokenUsage(*usage))


def is_synthesis(messages: Sequence[Message]) -> bool:
    first = messages[0].content[0]
    return isinstance(first, TextBlock) and "Break the goal below" not in first.text


def lead(
    plan: tuple[int, int],
    synthesis: tuple[int, int],
    *,
    on_synthesis: Callable[[], None] = lambda: None,
) -> AgentConfig:
    """The coordinator: the plan for ``plan`` tokens, the answer for ``synthesis`` tokens."""

    def script(messages: Sequence[Message], options: ChatOptions) -> LLMResponse:
        if is_synthesis(messages):
            on_synthesis()
            return answer("final answer", synthesis)
        return answer(json.dumps(PLAN), plan)

    return AgentConfig("lead", model="lead-model", adapter=ScriptedAdapter(script))


def team(worker: tuple[int, int] = (1, 1)) -> tuple[Team, ScriptedAdapter]:
    adapter = ScriptedAdapter(lambda m, o: answer("done", worker))
    return Team("t", [AgentConfig("worker", model="worker-model", adapter=adapter)]), adapter
